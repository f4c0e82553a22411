"""A progress bar on stderr for a long job at a terminal (``verify`` of a
long log). Rich is imported only when the bar is shown."""

from __future__ import annotations

from ..core.names import printable


class progress_bar:  # noqa: N801 -- used as a function: with progress_bar(total) as update
    """A progress bar on stderr, for a long job at a terminal: ``with
    progress_bar(total, what) as update: update(done)``. Imports rich only
    when it is shown; elsewhere ``update`` does nothing."""

    def __init__(self, total: int, what: str, show: bool):
        self.total, self.what, self.show, self._bar = total, what, show, None

    def __enter__(self):
        if not self.show:
            return lambda done: None
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.start()
        task = self._bar.add_task(escape(printable(self.what)), total=self.total)
        return lambda done: self._bar.update(task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

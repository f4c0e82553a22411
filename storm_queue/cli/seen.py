"""The two commands that let a storm be seen from anywhere (issue 34):
``metrics`` (the OpenMetrics text, on stdout or into a file replaced
atomically) and ``serve`` (the read-only web view, ``storm_queue.web``).
Both read only: no lock, no record."""

from __future__ import annotations

import sys

from .answer import err, storm, warn


def metrics(root: str | None, as_json: bool, output: str | None) -> int:
    """Print the storm's metrics, or with ``output`` replace that file with
    them (a temporary file beside it, fsynced, renamed, the directory
    fsynced: a textfile collector reads the old text or the new, whole)."""
    from ..core.metrics import exposition
    from ..service.sight import look

    sight = look(storm(root, reads=True))
    if sight.listing.moved_to:
        from .answer import say_moved

        say_moved(sight.listing.moved_to)
    text = exposition(sight.metrics())
    warn(list(sight.log.warnings))  # a torn tail ignored: what every reader says (contract, section 4)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    from ..core.errors import BadArgument
    from ..store.directory.fsutil import replace_atomically

    try:
        replace_atomically(output, text.encode("utf-8"))
    except OSError as exc:
        raise BadArgument(f"--output {output}: cannot write it ({exc.strerror}); nothing was written") from None
    return 0


def serve(root: str | None, as_json: bool, host: str, port: int, token_file: str | None) -> int:
    """Serve the read-only web view of the storm until Ctrl-C (130) or SIGTERM (143)."""
    from ..web.server import run

    return run(lambda: storm(root, reads=True), host, port, token_file, err)


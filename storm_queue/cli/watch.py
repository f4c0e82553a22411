"""``storm-queue watch``: a live view of the storm for the operator at a
terminal. Only the ``watch`` command imports this module.

What a frame shows and how it is drawn is ``frame`` (pure). This is the
edge: ``run`` reads the storm (``Storm.listing`` and ``Storm.history``:
reads only, no lock, nothing written), notices change (``Source``: a stat
of the storm's files, woken early by inotify where the C library has it;
a database storm is read again every interval), reads keys in cbreak mode
with ``select`` (the interval is the timeout: no busy loop) and restores
the terminal on every way out.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque

from .. import wall
from .frame import EVENTS, Frame, build, failed, plain_text, rich_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from ..service.storm import Listing, Storm

# -- the edge: reading the storm, noticing change -------------------------

class Source:
    """The storm as the view reads it: the listing, the log's last events
    (read again only when the log has grown), and a signature of the files
    that make the storm (``Upkeep.watched``), so an unchanged storm is not
    read again. A storm of no files to stat (a database's): ``signature``
    is None, and it is read every interval."""

    def __init__(self, storm: Storm, again: Any = None):
        self.storm = storm
        self._again = again  # makes the storm anew: a database storm's next connection
        self.appended = storm.store.upkeep.appended  # how the log's push lines say where the lane went
        self._seq: int | None = None
        self._events: tuple[dict[str, Any], ...] = ()

    def paths(self) -> list[str]:
        """The files whose change changes the view (``Upkeep.watched``)."""
        return self.storm.store.upkeep.watched()

    def signature(self) -> tuple | None:
        """What the storm's files look like now: equal signatures, an
        unchanged storm (None: a storm of no files, read every interval)."""
        try:
            paths = self.paths()
        except Exception:  # noqa: BLE001 -- an unreadable storm.toml: whoever reads the storm next says why
            return ("unreadable", time.monotonic())
        from ..store.wake import signature

        return signature(paths) if paths else None

    def reconnect(self) -> None:
        """After a failed read: read the next time over the store made anew
        (a database's old connection may be gone with its server)."""
        if self._again is not None:
            self.storm = self._again()

    def read(self) -> tuple[Listing, tuple[dict[str, Any], ...]]:
        """The listing and the log's last ``EVENTS`` events; reads only."""
        listing = self.storm.listing()
        if listing.seq != self._seq:
            self._events, self._seq = self._last_events(), listing.seq
        return listing, self._events

    def _last_events(self) -> tuple[dict[str, Any], ...]:
        """The log's last ``EVENTS`` events, each checked as every reader
        checks it. A directory log is read from its checkpoint (the lines
        since it, a few dozen) when those are enough; else, and in a
        database, the whole log streams past, keeping only the last few."""
        ring: deque = deque(maxlen=EVENTS)
        log_file = self.storm.store.upkeep.log_file(self.storm.declaration())
        if log_file is not None:
            from ..store.directory.log import reader

            read = reader.read(log_file, each=lambda line, event: ring.append(event))
            if len(ring) == EVENTS or not read.checkpoint_seq:
                return tuple(ring)
            ring.clear()
        self.storm.history(lambda line, event: ring.append(event))
        return tuple(ring)


def boundary(listing: Listing, now: str) -> str | None:
    """The first moment after ``now`` at which time alone changes the
    listing: a lease expires, a schedule comes due (``runs.next_due``)."""
    from ..core.runs import next_due

    return next_due((r.run for r in listing.view.rows), now)


class Keys:
    """The terminal on stdin in cbreak mode (keys arrive one at a time,
    unechoed; Ctrl-C still interrupts), restored on exit; and a wake-up
    pipe that SIGWINCH writes to, so a resized terminal is redrawn.
    ``wait(timeout, extra)`` waits in ``select`` for a key, a resize or
    ``extra`` (a descriptor) and says which came first."""

    def __init__(self, stdin: Any = None):
        self.stdin = stdin or sys.stdin
        self.fd: int | None = None
        self._saved: Any = None
        self._pipe: tuple[int, int] | None = None
        self._winch: Any = None

    def __enter__(self) -> "Keys":
        import signal

        try:
            fd = self.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            fd = None
        if fd is not None and os.isatty(fd):
            import termios
            import tty

            self._saved = termios.tcgetattr(fd)
            self.fd = fd
            tty.setcbreak(fd, termios.TCSANOW)
        self._pipe = os.pipe()
        for end in self._pipe:
            os.set_blocking(end, False)
        write_end = self._pipe[1]

        def on_winch(signum: int, frame: object) -> None:
            try:
                os.write(write_end, b"w")
            except OSError:
                pass

        self._winch = signal.signal(signal.SIGWINCH, on_winch)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._winch is not None:
            signal.signal(signal.SIGWINCH, self._winch)
        if self._saved is not None and self.fd is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
        if self._pipe is not None:
            for end in self._pipe:
                os.close(end)
            self._pipe = None

    def wait(self, timeout: float, extra: int | None = None) -> str:
        """``key:C`` (a key was pressed), ``resize``, ``change`` (``extra``
        turned readable), or ``tick`` (``timeout`` seconds passed)."""
        import select

        fds = [f for f in (self.fd, self._pipe[0] if self._pipe else None, extra) if f is not None]
        ready, _, _ = select.select(fds, [], [], max(0.0, timeout))
        if self.fd is not None and self.fd in ready:
            data = os.read(self.fd, 64)
            if not data:
                self.fd = None  # end of input: keys no longer come; Ctrl-C still quits
                return "tick"
            return "key:" + data.decode("utf-8", "replace")
        if self._pipe and self._pipe[0] in ready:
            try:
                os.read(self._pipe[0], 64)
            except OSError:
                pass
            return "resize"
        if extra is not None and extra in ready:
            return "change"
        return "tick"


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def once(storm: Storm, out: Any = None) -> int:
    """One frame: plain text when ``out`` is not a terminal or NO_COLOR is
    set, else drawn by rich. A storm that cannot be read raises, as
    ``list`` does."""
    out = out or sys.stdout
    listing, events = Source(storm).read()
    frame = build(listing, events, wall.now(), storm.store.upkeep.appended)
    if no_color() or not out.isatty():
        out.write(plain_text(frame) + "\n")
        out.flush()
    else:
        from rich.console import Console

        Console(file=out).print(rich_view(frame))
    return 0


def live(storm: Storm, interval: float, again: Any = None) -> int:
    """The full-screen view until ``q`` or Ctrl-C (exit 0); the terminal
    is restored on every way out. SIGTERM ends it as any command's (143)."""
    from rich.console import Console
    from rich.live import Live

    from ..core.errors import StormError
    from .answer import Interrupted

    source = Source(storm, again)
    listing, events = source.read()  # a storm that cannot be read at all stops here, as list does
    sig = source.signature()
    due = boundary(listing, wall.now())
    frame = build(listing, events, wall.now(), storm.store.upkeep.appended)
    # NO_COLOR: the same frame, fitted to the terminal as ever, with no style at all (no colour, no bold)
    console = Console(color_system=None, highlight=False) if no_color() else Console(highlight=False)
    from ..store.directory.changes import Waker

    waker = Waker()
    every = (f"redrawn when the storm changes (checked every {interval:g}s)" if sig is not None
             else f"no files to watch: read again every {interval:g}s")
    try:
        with Keys() as keys:
            quits = "q or Ctrl-C quits" if keys.fd is not None else "Ctrl-C quits"
            footer = f"{quits}; {every}"
            waker.watch(source.paths())

            def draw(f: Frame) -> Any:
                return rich_view(f, console.size.height, footer)

            with Live(draw(frame), console=console, screen=True, auto_refresh=False, redirect_stdout=False,
                      redirect_stderr=False) as view:
                tick = time.monotonic() + interval
                while True:
                    woke = keys.wait(tick - time.monotonic(), waker.fd)
                    if woke.startswith("key:"):
                        if woke[4:].strip().lower().startswith("q"):
                            return 0
                        continue
                    if woke == "change":
                        time.sleep(0.05)  # a request writes its line, then its witness: read once both are there
                        waker.drain()
                    elif woke == "tick":
                        tick = time.monotonic() + interval
                    now = wall.now()
                    new = source.signature()
                    if (new != sig or (due is not None and now >= due)
                            or (woke == "tick" and (new is None or frame.error))):
                        try:
                            listing, events = source.read()
                            frame, due = build(listing, events, now, source.appended), boundary(listing, now)
                            waker.watch(source.paths())
                        except StormError as exc:
                            frame = failed(storm.root, str(exc), now, frame)
                            try:
                                source.reconnect()
                            except StormError:
                                pass
                        sig = new
                    elif woke == "change":
                        continue  # nothing the view shows has changed
                    elif not frame.error:
                        frame = build(listing, events, now, source.appended)  # time alone: the clock, the leases' bars
                    view.update(draw(frame), refresh=True)
    except (Interrupted, KeyboardInterrupt) as exc:
        if getattr(exc, "signum", 2) == 2:  # Ctrl-C: a way out, the screen put back; its code is SIGINT's
            from ..core.exit_codes import interrupted

            return interrupted(2)
        raise
    finally:
        waker.close()


def run(root: str | None, interval: float, one: bool) -> int:
    """``watch``: one frame (``--once``, stdout not a terminal, or a dumb
    one), else the live view."""
    from .answer import storm as find

    storm = find(root)
    if one or not sys.stdout.isatty() or os.environ.get("TERM") == "dumb":
        return once(storm)
    return live(storm, interval, lambda: find(root))

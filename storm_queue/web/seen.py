"""The storm as the web view last read it (``Seen``), shared by every
request: read again only when the storm changed (the store's ``changes``
of every change: inotify on a directory, LISTEN and the log's head read
twice a second on a database, followed by a thread of its own) or, when a page asks, once ``interval`` seconds have passed (time
alone moves leases and schedules). What it read is kept with a ``version``
(a digest of the chain's head and of the run order ``/`` shows) that a page's
script compares to know the storm changed, and the bytes each path made
from it, so a thousand open pages cost one reading and one rendering.
It reads only: no lock, nothing written."""

from __future__ import annotations

import threading
import time
from collections import deque
from hashlib import sha256

from ..core.errors import StormError
from ..core.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..service.sight import Sight
    from ..service.storm import Storm

#: how many of the log's last lines the log page and /api/log search
WINDOW = 1000
#: how many rendered answers are kept for the version at hand
KEPT = 64


@dataclass(frozen=True)
class Reading:
    """One reading: the ``sight`` (None when the storm could not be read:
    ``error`` says why, ``exit`` its exit code), its ``version`` (a digest
    of the chain's head and of the run order as ``/`` shows it), and the
    body of ``/``'s <main>, made to compute it."""

    sight: Any
    version: str
    front: str = ""
    error: str = ""
    exit: int = 0
    failure: Any = None  # the StormError itself


class Seen:
    """The storm behind one server; every method is safe from any thread."""

    def __init__(self, make: Callable[[], Storm], interval: float = 2.0):
        self._make = make
        self.storm = make()
        self.interval = interval
        self._lock = threading.RLock()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._checked = 0.0
        self.reading: Reading = self._read()
        self._answers: dict[tuple[str, str], tuple[int, str, bytes]] = {}
        self._log: tuple[tuple[int, str | None], deque, bool] | None = None
        self._log_lock = threading.Lock()  # the log's window, read by a storm object of its own
        self._log_storm: Storm | None = None
        self._log_end: tuple[int, int, str | None] | None = None  # the window's end: byte offset, seq, digest
        self._follower = threading.Thread(target=self._follow, name="storm-queue-changes", daemon=True)

    def start(self) -> None:
        self._follower.start()

    def close(self) -> None:
        self._stop.set()
        if self._follower.is_alive():
            self._follower.join(timeout=5)
        self.storm.close()
        if self._log_storm is not None:
            self._log_storm.close()

    def _follow(self) -> None:
        """Mark the reading stale at every change the store reports."""
        while not self._stop.is_set():
            try:
                with self._lock:
                    waiting = self.storm.store.changes(every=True)
                with waiting as changes:
                    while not self._stop.is_set():
                        if changes.wait(0.5):
                            self._dirty.set()
            except Exception:  # noqa: BLE001 -- a storm that cannot be watched now is read every interval
                self._dirty.set()
                self._stop.wait(self.interval)

    def _read(self) -> Reading:
        from ..service.sight import look
        from .pages import run_order

        self._checked = time.monotonic()
        try:
            sight = look(self.storm)
        except StormError as exc:
            from ..roots import hide

            words = hide(str(exc))
            try:  # a database's next reading over a new connection (the old one may be gone with the server)
                self.storm.close()
                self.storm = self._make()
            except StormError:
                pass
            return Reading(None, "error-" + sha256(words.encode()).hexdigest()[:16], error=words, exit=exc.exit_code,
                           failure=exc)
        front = run_order(sight.listing)
        head = f"{sight.log.seq} {sight.log.digest} ".encode()
        return Reading(sight, sha256(head + front.encode("utf-8")).hexdigest()[:16], front)

    def current(self) -> Reading:
        """The reading, read again first when the storm changed or
        ``interval`` seconds passed since it was read."""
        with self._lock:
            if self._dirty.is_set() or time.monotonic() - self._checked >= self.interval:
                self._dirty.clear()
                fresh = self._read()
                if fresh.version != self.reading.version:
                    self._answers.clear()
                self.reading = fresh
            return self.reading

    def answer(self, reading: Reading, key: str, make: Callable[[Reading], tuple[int, str, bytes]]) -> tuple[int, str, bytes]:
        """``make(reading)``'s answer (status, content type, body) for the
        path and query ``key``, made once per version."""
        with self._lock:
            kept = self._answers.get((reading.version, key))
            if kept is None:
                kept = make(reading)
                if len(self._answers) >= KEPT:
                    self._answers.pop(next(iter(self._answers)))
                self._answers[(reading.version, key)] = kept
            return kept

    def why(self, slug: str) -> Any:
        """``why SLUG`` on the storm now (``Storm.why``)."""
        with self._lock:
            return self.storm.why(slug)

    def events(self, sight: Sight) -> tuple[list[tuple[bytes, dict]], bool]:
        """The log's last ``WINDOW`` lines as checked (each its bytes and
        event), oldest first, as of ``sight``'s head (or later), and whether
        they are the whole log. Read again only when the head moved, under a
        lock and a storm object of their own, so that a long log's read
        holds up no other page. On a directory, the lines past the window's
        end are read from there when the line ending there is still the
        window's last (each checked and chained onto it, as ``log`` checks
        them); else, and on a database, the whole log streams past."""
        head = (sight.log.seq, sight.log.digest)
        with self._log_lock:
            if self._log is not None and self._log[0] == head:
                return list(self._log[1]), self._log[2]
            if self._log_storm is None:
                self._log_storm = self._make()
            storm = self._log_storm
            ring: deque = deque(maxlen=WINDOW)
            try:
                if not (self._log is not None and self._follow_log(storm, ring)):
                    ring.clear()
                    read = storm.history(lambda line, event: ring.append((line, event)))
                    self._log_end = (read.length, read.seq, read.digest) if read.seq else None
            except StormError:
                storm.close()
                self._log_storm, self._log = None, None
                raise
            self._log = (head, ring, not ring or ring[0][1]["seq"] == 1)
            return list(ring), self._log[2]

    def _follow_log(self, storm: Storm, ring: deque) -> bool:
        """The window taken on into ``ring``: the lines a directory's log
        holds past the end of the window held, read from there when the line
        ending there is still the one the window ends with, each checked
        and chained onto it; False (nothing taken) when it is not."""
        from ..core.framing import digest
        from ..core.stream import Bad, LineCheck
        from ..store.directory.log import reader
        from ..store.directory.log.checkpoint import line_ending_at

        log_file = storm.store.upkeep.log_file(storm.declaration())
        if log_file is None or self._log_end is None:
            return False
        offset, seq, last = self._log_end
        new: list[tuple[bytes, dict]] = []
        lines = LineCheck(seq=seq, digest=last, offset=offset, each=lambda line, event: new.append((line, event)),
                          quick=False)
        try:
            with reader.open_log(log_file) as f:
                end = line_ending_at(f.fileno(), offset)
                if end is None or digest(end) != last:
                    return False
                f.seek(offset)
                reader.chain(f, lines)
        except (OSError, Bad):  # the whole read says what is wrong
            return False
        ring.extend(self._log[1])
        ring.extend(new)
        self._log_end = (lines.offset, lines.seq, lines.digest)
        return True

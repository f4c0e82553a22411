"""The writers' lock, ``<log name>.lock`` beside the log. Readers never take it."""

from __future__ import annotations

import os

from ....core.errors import Busy, RecordFailed, WriteFailed, unreadable
from ..fsutil import open_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


#: called once, ``on_wait(who, path, wait)``, when a writer has waited
#: ``NOTICE_AFTER`` seconds for the lock and may wait longer: the command
#: line says who holds it at a terminal (``answer.storm``); None says nothing
on_wait: Callable[[str, str, float], None] | None = None
NOTICE_AFTER = 0.5


def lock_path(log_path: str) -> str:
    return log_path + ".lock"


def _open_own(path: str, may_create: bool) -> int:
    """Open the lock file, never through a symbolic link; create it (0644)
    when ``may_create``. Returns the descriptor."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if may_create else 0)
    try:
        fd = open_file(path, flags)
    except FileNotFoundError:
        raise RecordFailed(f"{path} does not exist, and only the storm's owner creates it") from None
    except OSError as exc:
        import errno

        if exc.errno in (errno.ELOOP, errno.EISDIR):
            raise unreadable(path, exc) from None
        raise
    return fd


def holder(path: str) -> str:
    """Which process holds the flock on ``path``, in words, found in
    ``/proc/locks`` (Linux; no cooperation from the holder is needed), or
    '' when it cannot be told."""
    try:
        st = os.stat(path, follow_symlinks=False)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            table = f.read().splitlines()
    except OSError:
        return ""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for row in table:
        fields = row.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:  # waiters carry '->' and fail this
            pid = fields[4]
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().rstrip(b"\0").split(b"\0")
            except OSError:
                return f"process {pid}"
            from ....core.names import quote

            command = " ".join(a.decode("utf-8", "replace") for a in argv)
            return f"process {pid} ({quote(command[:120])})"
    return ""


class held:  # noqa: N801 -- used as the function it was: ``with held(...):``
    """Hold the writers' lock (an flock(2) on the lock file) for the block.
    A caller that is not the storm's owner (``may_create`` false) never
    creates the lock file; a symbolic link in its place is refused by name.
    Raises ``Busy`` after ``wait`` seconds, naming the holder when
    ``/proc/locks`` tells it. SIGINT and SIGTERM are held back while the
    lock is held; one that arrived meanwhile is acted on once it is released.
    (A lock library would cost a request more start-up time than all the
    rest of its work: filelock 3.2x imports asyncio; a plain class spares
    it contextlib too.)"""

    def __init__(self, log_path: str, wait: float, may_create: bool):
        self.log_path, self.wait, self.may_create = log_path, wait, may_create
        self.fd = -1
        self.mask: object = None

    def __enter__(self) -> None:
        try:
            fd = _open_own(lock_path(self.log_path), self.may_create)
            try:
                _take(fd, lock_path(self.log_path), self.wait)
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:  # the Protocol's error (``store.interface.Store.writing``)
            raise WriteFailed.of(exc) from exc
        self.fd = fd
        self.mask = _defer_signals()  # a request under the lock is done whole or not begun

    def __exit__(self, *exc: object) -> None:
        import fcntl

        try:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                _restore_signals(self.mask)
        finally:
            os.close(self.fd)


def _take(fd: int, path: str, wait: float) -> None:
    """Take the flock on ``fd`` within ``wait`` seconds, or raise ``Busy``.
    In the main thread the wait is a blocking flock(2) that a timer
    (``SIGALRM``) ends at the deadline, so a waiter takes the lock the
    moment it is freed; elsewhere (no signals there) it polls."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        if wait <= 0:
            raise _busy(path, wait) from None
    import time

    waiting = _Waiting(path, wait, time.monotonic())
    while True:
        try:
            if not _wait_blocked(fd, waiting):
                _wait_polling(fd, waiting)
            return
        except _Expired:  # an alarm late by a bytecode: wait on (if the lock is ours, flock says so at once)
            continue


class _Waiting:
    """One wait for the lock: where, how long, since when, and whether the
    holder was named (``on_wait`` is called once)."""

    def __init__(self, path: str, wait: float, start: float):
        self.path, self.wait, self.start = path, wait, start
        self.told = on_wait is None or wait <= NOTICE_AFTER

    def left(self, now: float) -> float:
        """Seconds left to wait (the notice given when it is due)."""
        if not self.told and now - self.start >= NOTICE_AFTER:
            self.told = True
            on_wait(holder(self.path) or "another writer", self.path, self.wait)  # type: ignore[misc]
        return self.start + self.wait - now

    def step(self, now: float, left: float) -> float:
        """How long to block before looking again: to the notice, else to the deadline."""
        return left if self.told else min(left, self.start + NOTICE_AFTER - now)


class _Expired(Exception):
    """The alarm that ends one blocked flock(2)."""


_armed = False


def _alarm(signum: int, frame: object) -> None:
    if _armed:
        raise _Expired


def _wait_blocked(fd: int, waiting: _Waiting) -> bool:
    """Wait in a blocking flock(2), woken by ``SIGALRM`` at the deadline;
    any other handler and timer of ``SIGALRM`` are put back after. Returns
    False, having waited for nothing, where no alarm can be set (not the
    main thread, no ``SIGALRM``); raises ``Busy`` at the deadline."""
    global _armed
    import _signal
    import fcntl
    import time

    try:
        if _signal.getsignal(_signal.SIGALRM) is None:  # a handler set outside Python: not ours to move
            return False
        before = _signal.signal(_signal.SIGALRM, _alarm)
    except (AttributeError, ValueError, OSError):
        return False
    other = _signal.setitimer(_signal.ITIMER_REAL, 0)
    try:
        while True:
            now = time.monotonic()
            left = waiting.left(now)
            if left <= 0:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    raise _busy(waiting.path, waiting.wait) from None
            try:
                _armed = True
                _signal.setitimer(_signal.ITIMER_REAL, max(waiting.step(now, left), 0.001))
                fcntl.flock(fd, fcntl.LOCK_EX)
                return True
            except _Expired:
                continue
            finally:
                _armed = False
                _signal.setitimer(_signal.ITIMER_REAL, 0)
    finally:
        _signal.signal(_signal.SIGALRM, before)
        if other[0] > 0:  # someone else's timer runs on, less the time waited
            _signal.setitimer(_signal.ITIMER_REAL, max(other[0] - (time.monotonic() - waiting.start), 0.000001), other[1])


def _wait_polling(fd: int, waiting: _Waiting) -> None:
    """Wait by trying again and again, pausing 1 ms doubling up to 20 ms."""
    import fcntl
    import time

    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = waiting.left(time.monotonic())
            if left <= 0:
                raise _busy(waiting.path, waiting.wait) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.02)


def _busy(path: str, wait: float) -> Busy:
    who = holder(path) or "another writer"
    return Busy(f"the storm is busy: {who} has held the writers' lock {path} for longer than "
                f"--wait {wait:g} seconds; nothing was recorded; try again, or wait longer with --wait SECONDS")


def _defer_signals() -> object:
    """Hold SIGINT and SIGTERM back (the main thread's signal mask); returns
    the mask before, for ``_restore_signals`` (None where there is none)."""
    import _signal

    try:
        return _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM})
    except (AttributeError, OSError, ValueError):  # no signal mask here
        return None


def _restore_signals(before: object) -> None:
    """Put back the mask ``_defer_signals`` returned; a signal that arrived
    meanwhile is acted on now."""
    if before is not None:
        import _signal

        _signal.pthread_sigmask(_signal.SIG_SETMASK, before)

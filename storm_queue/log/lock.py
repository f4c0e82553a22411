"""The writers' lock, ``<log name>.lock`` beside the log. Readers never take it."""

from __future__ import annotations

import os
from contextlib import contextmanager

from ..errors import Busy, RecordFailed, unreadable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterator


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
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        raise RecordFailed(f"{path} does not exist, and only the storm's owner creates it") from None
    except OSError as exc:
        import errno

        if exc.errno in (errno.ELOOP, errno.EISDIR):
            raise unreadable(path, exc) from None
        raise
    try:
        os.fchmod(fd, 0o644)  # whatever the umask, as the storm's other files
    except PermissionError:
        pass
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
            from ..names import quote

            command = " ".join(a.decode("utf-8", "replace") for a in argv)
            return f"process {pid} ({quote(command[:120])})"
    return ""


@contextmanager
def held(log_path: str, wait: float, may_create: bool) -> Iterator[None]:
    """Hold the writers' lock (an flock(2) on the lock file) for the block.
    A caller that is not the storm's owner (``may_create`` false) never
    creates the lock file; a symbolic link in its place is refused by name.
    Raises ``Busy`` after ``wait`` seconds, naming the holder when
    ``/proc/locks`` tells it. (A lock library would cost a request more
    start-up time than all the rest of its work: filelock 3.2x imports asyncio.)"""
    import fcntl
    import time

    path = lock_path(log_path)
    fd = _open_own(path, may_create)
    try:
        start = time.monotonic()
        deadline = start + wait
        told = on_wait is None or wait <= NOTICE_AFTER
        pause = 0.001  # doubling up to 20 ms: a waiter takes a lock freed a moment ago
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    who = holder(path) or "another writer"
                    raise Busy(f"the storm is busy: {who} has held the writers' lock {path} for longer than "
                               f"--wait {wait:g} seconds; nothing was recorded; try again, or wait longer with --wait SECONDS") from None
                if not told and time.monotonic() - start >= NOTICE_AFTER:
                    told = True
                    on_wait(holder(path) or "another writer", path, wait)
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.02)
        with _signals_deferred():  # a request under the lock is done whole or not begun
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block (the main thread's
    signal mask); one that arrived meanwhile is acted on when it ends."""
    import _signal

    wanted = {_signal.SIGINT, _signal.SIGTERM}
    try:
        before = _signal.pthread_sigmask(_signal.SIG_BLOCK, wanted)
    except (AttributeError, OSError, ValueError):  # no signal mask here
        yield
        return
    try:
        yield
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, before)

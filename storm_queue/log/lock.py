"""The writers' lock, ``<log name>.lock`` beside the log. Readers never take it."""

from __future__ import annotations

import os
from contextlib import contextmanager

from ..errors import Busy, RecordFailed, unreadable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator


def lock_path(log_path: str) -> str:
    return log_path + ".lock"


def _open_own(path: str, may_create: bool) -> None:
    """Open the lock file ourselves, never through a symbolic link, before
    filelock does (filelock 3.12 to 3.1x follow a link there, and truncate
    what it points at); creates it when ``may_create``."""
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
    os.close(fd)


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
    """Hold the writers' lock for the block. A caller that is not the storm's
    owner (``may_create`` false) never creates the lock file; a symbolic link
    in its place is refused by name. Raises ``Busy`` after ``wait`` seconds,
    naming the holder when ``/proc/locks`` tells it."""
    import filelock

    path = lock_path(log_path)
    _open_own(path, may_create)
    lock = filelock.FileLock(path, timeout=wait, mode=0o644)
    try:
        lock.acquire()
    except filelock.Timeout:
        who = holder(path) or "another writer"
        raise Busy(f"the storm is busy: {who} has held the writers' lock {path} for longer than "
                   f"--wait {wait:g} seconds; nothing was recorded; try again, or wait longer with --wait SECONDS") from None
    try:
        yield
    finally:
        lock.release()

"""What both stores' waits for a change (``Store.changes``) share, and what
the live view compares between reads (``signature``)."""

from __future__ import annotations


def readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` turns readable within ``timeout`` seconds (poll(2),
    not select(2): a descriptor past 1,023 is as good as any)."""
    import select

    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    return bool(waiting.poll(max(0, int(timeout * 1000 + 0.999))))


def signature(paths: list[str]) -> tuple:
    """What the files ``paths`` look like now (inode, size, modification
    time; None for one that is not there): equal signatures, unchanged files."""
    import os

    def stat(path: str) -> tuple[int, int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    return tuple((path, stat(path)) for path in paths)

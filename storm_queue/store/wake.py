"""What both stores' waits for a change (``Store.changes``) share."""

from __future__ import annotations


def readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` turns readable within ``timeout`` seconds (poll(2),
    not select(2): a descriptor past 1,023 is as good as any)."""
    import select

    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    return bool(waiting.poll(max(0, int(timeout * 1000 + 0.999))))

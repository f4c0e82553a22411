"""The writers' lock, ``<log name>.lock`` beside the log. Readers never take it."""

from __future__ import annotations

import os
from contextlib import contextmanager

from ..errors import Busy, RecordFailed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator


def lock_path(log_path: str) -> str:
    return log_path + ".lock"


@contextmanager
def held(log_path: str, wait: float, may_create: bool) -> Iterator[None]:
    """Hold the writers' lock for the block. A caller that is not the storm's
    owner (``may_create`` false) never creates the lock file. Raises ``Busy``
    after ``wait`` seconds."""
    import filelock

    path = lock_path(log_path)
    if not may_create and not os.path.isfile(path):
        raise RecordFailed(f"{path} does not exist, and only the storm's owner creates it")
    lock = filelock.FileLock(path, timeout=wait, mode=0o644)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise Busy(f"the storm is busy: another writer has held {path} for {wait:g} seconds; try again") from None
    try:
        yield
    finally:
        lock.release()

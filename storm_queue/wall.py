"""The wall clock: the one place the time of day is read. The core takes
the time as an argument; the stores, the request path and the live view
ask here."""

from __future__ import annotations

import time

from .core.clock import stamp


def now() -> str:
    """The stamp of this moment."""
    return stamp(time.time())


def seconds() -> float:
    """This moment as POSIX seconds."""
    return time.time()

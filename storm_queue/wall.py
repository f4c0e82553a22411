"""The wall clock: the one place the time of day is read. The core takes
the time as an argument; the stores, the request path and the live view
ask here."""

from __future__ import annotations

import time

from .core.clock import stamp

#: the clock every reading of the time of day goes through (POSIX
#: seconds): a test moves it on rather than sleep (``tests/conftest.py``,
#: the ``clock`` fixture), and what a process records follows it
clock = time.time


def now() -> str:
    """The stamp of this moment."""
    return stamp(clock())


def seconds() -> float:
    """This moment as POSIX seconds."""
    return clock()

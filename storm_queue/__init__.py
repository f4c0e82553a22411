"""storm-queue: decides what a storm runs next, and keeps the priority lane.

The Python API::

    from storm_queue import Storm
    storm = Storm.find("/path/to/storm")
    storm.listing().decision          # 'run SLUG ISSUE', 'review ...', 'wait ...', 'empty'
    storm.bump("e", reason="customer outage").outcome   # 'done', 'noop' or 'refused'

The names below load on first use, so that a command importing one module
of the package does not pay for all of them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .desk import Listing, Outcome, Storm
    from .errors import Busy, NoStorm, RecordFailed, StormError, UnknownOrder

__all__ = ["Storm", "Listing", "Outcome", "StormError", "UnknownOrder", "NoStorm", "Busy", "RecordFailed"]
__version__ = "0.1.0"

_HOME = {"Storm": "desk", "Listing": "desk", "Outcome": "desk", "StormError": "errors",
         "UnknownOrder": "errors", "NoStorm": "errors", "Busy": "errors", "RecordFailed": "errors"}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module 'storm_queue' has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{_HOME[name]}", fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

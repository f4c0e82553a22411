"""storm-queue: decides what a storm runs next, and keeps the priority lane.

The Python API::

    from storm_queue import Storm
    storm = Storm.find("/path/to/storm")
    storm.listing().decision          # 'run SLUG ISSUE', 'review ...', 'wait ...', 'empty'
    storm.bump("e", reason="customer outage").outcome   # 'done', 'noop' or 'refused'
"""

from .desk import Listing, Outcome, Storm
from .errors import Busy, NoStorm, RecordFailed, StormError, UnknownOrder

__all__ = ["Storm", "Listing", "Outcome", "StormError", "UnknownOrder", "NoStorm", "Busy", "RecordFailed"]
__version__ = "0.1.0"

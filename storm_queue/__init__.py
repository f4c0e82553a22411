"""storm-queue: decides what a storm runs next, and keeps the priority lane.

The Python API (the command line is built on it)::

    from storm_queue import Storm, StormError

    storm = Storm.find("/path/to/storm")   # or Storm.find(): $STORM_QUEUE_ROOT, else search upwards
    listing = storm.listing()              # reads only: the plan, as `list` shows it
    listing.decision                       # 'run SLUG ISSUE', 'review SLUG...', 'wait [SLUG...]', 'empty'
    for row in listing.view.rows:          # Row: position, slug, issue, deps, prioritised, state, status
        ...
    out = storm.bump("e", reason="customer outage")   # also push(slug, issue, deps=...), unbump(slug)
    out.outcome                            # 'done', 'noop' or 'refused' (a refusal is recorded, not raised)
    out.code, out.moved, out.removed, out.recorded, out.exit_code
    storm.unbump("e").check()              # check() raises Refused (with .code) instead

A runner (docs/python-api.md, "A runner in Python")::

    from storm_queue import NothingLeased

    try:
        with storm.lease(ttl=60, wait=300) as lane:   # claims; renews every ttl/3 in the background
            work(lane.slug, lane.issue, stop=lane.stopped)   # lane.cancelled: the lease ended under it
    except NothingLeased as nothing:       # the claim leased nothing: nothing.decision, nothing.final
        ...
    # the block's end finished the lane: ok, or failed (the exception's type as the note, raised again)
    storm.claim(holder, ttl, wait, key), storm.renew(slug, token, ttl), storm.finish(slug, token, result, note),
    storm.release(slug, token), storm.tenure(slug, token, wait): Outcomes (to_json(): the --json), a Tenure

Errors are raised as ``StormError`` subclasses, each with the CLI's
``exit_code``: ``NoStorm``, ``StormUnreadable`` and ``BadArgument`` (2;
``BadArgument``: an argument the call cannot take, such as a wait that
is not 0 to 86,400 seconds; nothing was done), ``UnknownOrder`` (3),
``RecordFailed`` (4), ``Busy`` (5: nothing changed, a retry is safe; a
database storm's server that cannot be reached too); ``Refused`` (1 or
2) only from ``Outcome.check()``.

The names below load on first use, so that a command importing one module
of the package does not pay for all of them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .core.errors import (BadArgument, Busy, NoStorm, RecordFailed, Refused, StormError, StormUnreadable,
                              UnknownOrder)
    from .core.resolver import Row
    from .service.runner import Lease, NothingLeased
    from .service.storm import Listing, Outcome, Storm

__all__ = ["Storm", "Listing", "Outcome", "Row", "StormError", "UnknownOrder", "NoStorm", "Busy", "RecordFailed",
           "StormUnreadable", "BadArgument", "Refused", "Lease", "NothingLeased"]
__version__ = "0.1.0"

_HOME = {"Storm": "service.storm", "Listing": "service.storm", "Outcome": "service.storm", "StormError": "core.errors",
         "UnknownOrder": "core.errors", "NoStorm": "core.errors", "Busy": "core.errors", "RecordFailed": "core.errors",
         "StormUnreadable": "core.errors", "BadArgument": "core.errors", "Refused": "core.errors",
         "Row": "core.resolver", "Lease": "service.runner", "NothingLeased": "service.runner"}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module 'storm_queue' has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{_HOME[name]}", fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

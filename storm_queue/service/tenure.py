"""A runner's wait for the end of its lease (``storm-queue lease``): what
became of the lease (``core.tenure``), read now, or once it ends, woken as
``claim --wait`` is woken (``Store.changes``: inotify or a poll of the
storm's files, a database's LISTEN) and at the moment its expiry passes.
Reads only: no lock, nothing written, so any account or role that may
read the storm may ask it (a database storm's runner and reader roles)."""

from __future__ import annotations

from ..core.clock import wait_seconds
from ..core.errors import BadArgument
from ..core.names import as_text, figure
from ..core.shapes import shape_names, shape_token
from ..core.tenure import Tenure
from ..core.tenure import tenure as found_tenure
from .leases import until_change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .storm import Storm


def tenure(storm: Storm, slug: str, token: int, wait: float = 0.0) -> Tenure:
    """What became of the lease on ``slug`` under ``token``: live still,
    or how it ended (``Tenure.ended``). With ``wait`` seconds, a live
    lease is not the answer yet: it waits until the lease ends (a cancel,
    a finish, a release, an expiry, a recover, a settle --force, all
    recorded; or its expiry passing) or ``wait`` seconds pass, and answers
    as it stands then. ``BadArgument`` (exit 2) for a slug that is not a
    name, a token that is not a positive whole number, or a lease that was
    never taken, or a ``wait`` that is not 0 to ``clock.WAIT_MOST`` seconds."""
    wait = wait_seconds(wait)
    slug = as_text(slug)
    bad = shape_names(slug, (), None) or shape_token(token)
    if bad is not None:
        raise BadArgument(f"{bad.message}; nothing was read")
    found = _look(storm, slug, token)
    if wait <= 0 or found.ended is not None:
        return found
    import time

    end = time.monotonic() + wait
    with storm.store.changes() as changes:
        while True:
            found = _look(storm, slug, token)  # again, watched: no change is missed
            if found.ended is not None or time.monotonic() >= end:
                return found
            until_change(changes, end, found.expires)


def _look(storm: Storm, slug: str, token: int) -> Tenure:
    """The lease as the storm records it now (one reading, no lock)."""
    store = storm.store
    snap = store.snapshot(store.read(store.declaration()))
    found = found_tenure(snap, slug, token)
    if found is None:
        last = snap.state.run(slug).token
        raise BadArgument(f"no lease of token {figure(token)} on {slug} was ever taken ("
                          + (f"its last token is {last}" if last else f"{slug} has never been claimed")
                          + f"); storm-queue why {slug} shows its lease; nothing was read")
    return found

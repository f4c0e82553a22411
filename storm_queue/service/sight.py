"""What a watcher of a storm sees at one moment (``look``): the listing
``list`` shows and the log's head (its seq, digest and the counts its lines
fold to), read together in one reading, with the time it was read. The
``metrics`` command and the web view (``storm_queue.web``) read the storm
through it: reads only, no lock, nothing written."""

from __future__ import annotations

from .. import wall
from ..core.clock import stamp
from ..core.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.logread import LogRead
    from ..core.metrics import Metric
    from ..core.outcome import Listing
    from .storm import Storm


@dataclass(frozen=True)
class Sight:
    """The storm as read at POSIX time ``t``: ``listing`` (every lane, in
    run order, with how long each ready one has waited) and ``log``, the
    log's reading it was made from (``seq``, ``digest``, ``state``)."""

    listing: Listing
    log: LogRead
    t: float

    @property
    def now(self) -> str:
        return stamp(self.t)

    def metrics(self) -> tuple[Metric, ...]:
        """Every metric of the storm as seen (``core.metrics.gather``)."""
        from ..core.metrics import gather

        return gather(self.listing, self.log.state, self.now, self.t)


def look(storm: Storm) -> Sight:
    """The storm now: one reading of its log (from the checkpoint or the
    state row: no replay), the listing made from it. Reads only."""
    decl = storm.declaration()
    log = storm.store.read(decl)
    listing = storm.listing(decl, log=log)
    return Sight(listing, log, wall.seconds())

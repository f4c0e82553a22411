"""Pure: the starving lane (issue 12 item 5). For each ready lane, when it
last became ready and how many lanes started (were claimed) ahead of it
since; with ``[priority] starving_after``, whether it has waited longer
than that while others started. It only looks: the run order is the
resolver's and nothing here changes it.

A lane becomes ready by an event: it is queued, a dependency is integrated
or waived, its last attempt ends, it is unparked, its ``not_before`` comes.
The log records those with their times (``LaneState.touched``, the
attempts of ``LaneState.runs``); what a hand edit did (a line written into
``queue.txt``, a slug into ``integrated.txt``) has no time of its own, so it
dates from the file's last change (``Snapshot.edits``): later than the
truth, never earlier, so a lane is never called starving too soon. Claims
are the attempts the log folds, each with its time; no file, clock or uid
is touched here: the time ``t`` is given."""

from __future__ import annotations

from bisect import bisect_right

from .clock import stamp
from .records import dataclass
from .resolver import READY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from .lane import Snapshot
    from .outcome import Listing
    from .resolver import Row


@dataclass(frozen=True)
class Wait:
    """How long a lane has waited: ``ready_since`` (when it last became
    ready; None when it is not ready), ``passed_over`` (how many claims of
    other lanes were made since then) and ``starving`` (ready for longer
    than ``starving_after`` while ``passed_over`` is above 0)."""

    ready_since: str | None = None
    passed_over: int = 0
    starving: bool = False


NOT_READY = Wait()


def ready_since(snap: Snapshot, slug: str) -> str:
    """When the lane ``slug`` (ready now) last became ready, as far as the
    log and the files' last changes tell: the latest of the moments that
    could have made it ready."""
    state, led = snap.state, snap.ledgers
    queued, integrated = snap.edits
    moments = [state.touched.get(slug) or queued]
    waived = state.waivers.get(slug, {})
    for dep in snap.lanes[slug].deps:
        if dep in waived:
            moments.append(waived[dep].at)
        elif dep in led.integrated:
            moments.append(state.touched.get(dep) or integrated)
    run = state.run(slug)
    if run.history and run.history[-1].ended:
        moments.append(run.history[-1].ended)
    if run.not_before is not None and run.not_before <= snap.now:
        moments.append(run.not_before)
    return max(moments) or snap.now


def claim_times(snap: Snapshot) -> list[str]:
    """The time of every claim the log records, in order."""
    return sorted(a.at for run in snap.state.runs.values() for a in run.history)


def waits(snap: Snapshot, rows: Iterable[Row], starving_after: int | None, t: float) -> dict[str, Wait]:
    """The ``Wait`` of each of ``rows`` (lanes not ready get ``NOT_READY``),
    at the POSIX time ``t``; ``starving_after`` in seconds (None: no lane
    is ever starving)."""
    times = claim_times(snap)
    limit = stamp(t - starving_after) if starving_after is not None else None
    out = {}
    for row in rows:
        if row.state != READY:
            out[row.slug] = NOT_READY
            continue
        since = ready_since(snap, row.slug)
        passed = len(times) - bisect_right(times, since)  # its own claims all came before it became ready again
        out[row.slug] = Wait(since, passed, limit is not None and passed > 0 and since < limit)
    return out


def starving_words(wait: Wait, starving_after: int) -> str:
    """Why a lane is starving, in words."""
    return (f"starving: ready since {wait.ready_since}, longer than [priority] starving_after ({duration_words(starving_after)}), "
            f"while {wait.passed_over} lane(s) started ahead of it")


def duration_words(seconds: int) -> str:
    """``seconds`` as storm.toml would say it (``6h``, ``90m``)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def starving_detail(listing: Listing, slug: str) -> str:
    """Why the lane of ``listing`` is starving, in words ('' when it is not)."""
    wait = listing.waits.get(slug)
    return starving_words(wait, listing.starving_after) if wait is not None and wait.starving else ""


def wait_json(wait: Wait | None) -> dict[str, Any]:
    """How long a lane has waited, as ``list --json`` gives it (None: not looked at)."""
    wait = wait or NOT_READY
    return {"ready_since": wait.ready_since, "passed_over": wait.passed_over, "starving": wait.starving}

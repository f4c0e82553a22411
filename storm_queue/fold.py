"""The fold: one pure step from a lane state and a log event to the next
state. Replay is ``reduce(apply, events, EMPTY)``."""

from __future__ import annotations

from functools import reduce

from .records import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Mapping


@dataclass(frozen=True)
class Mark:
    """The recorded request that last put a slug in the lane or named it:
    its ``seq``, time, principal, action, the slug it named and its reason."""

    seq: int
    at: str
    by: str
    action: str
    slug: str
    reason: str | None


@dataclass(frozen=True)
class LaneState:
    """The priority lane as the log says it: ``lane`` in entry order, the
    ``named`` slugs (prioritised by name, not since un-bumped), and for each
    slug in the lane the ``marks`` of the request that put it there."""

    lane: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    marks: Mapping[str, Mark] = field(default_factory=dict)


EMPTY = LaneState()


def apply(state: LaneState, event: Mapping) -> LaneState:
    """The lane after ``event``; refusals, resets and repairs change nothing."""
    action = event["action"]
    if action not in ("push", "bump", "unbump"):
        return state
    lane = dict.fromkeys(state.lane)
    for slug in event.get("moved", ()):
        lane.setdefault(slug)
    for slug in event.get("removed", ()):
        lane.pop(slug, None)
    named = dict.fromkeys(state.named)
    marks = {s: m for s, m in state.marks.items() if s in lane}
    mark = Mark(event.get("seq", 0), event.get("at", ""), event.get("by", ""), action, event["slug"], event.get("reason"))
    for slug in event.get("moved", ()):
        if slug in lane and slug not in marks:
            marks[slug] = mark
    if action == "unbump":
        named.pop(event["slug"], None)
    elif not event.get("noop"):
        if event["slug"] not in named and event["slug"] in lane:
            marks[event["slug"]] = mark
        named.setdefault(event["slug"])
    return LaneState(tuple(lane), tuple(named), marks)


def replay(events: Iterable[Mapping], start: LaneState = EMPTY) -> LaneState:
    """The lane state that ``events`` fold to from ``start``."""
    return reduce(apply, events, start)

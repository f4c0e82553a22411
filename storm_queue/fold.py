"""The fold: one pure step from a lane state and a log event to the next
state. Replay is ``reduce(apply, events, EMPTY)``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Iterable, Mapping


@dataclass(frozen=True)
class LaneState:
    """The priority lane as the log says it: ``lane`` in entry order, and the
    ``named`` slugs (prioritised by name, not since un-bumped)."""

    lane: tuple[str, ...] = ()
    named: tuple[str, ...] = ()


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
    if action == "unbump":
        named.pop(event["slug"], None)
    elif not event.get("noop"):
        named.setdefault(event["slug"])
    return LaneState(tuple(lane), tuple(named))


def replay(events: Iterable[Mapping], start: LaneState = EMPTY) -> LaneState:
    """The lane state that ``events`` fold to from ``start``."""
    return reduce(apply, events, start)

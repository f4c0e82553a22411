"""The fold: one pure step from a lane state and a log event to the next
state. Replay is ``reduce(apply, events, EMPTY)``, done in place by ``Fold``."""

from __future__ import annotations

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


class Fold:
    """The fold as an accumulator: ``step`` applies one event in place, in
    time proportional to what the event names (not to the lane's length),
    so a replay of a million lines over a long lane stays linear. ``apply``
    and ``replay`` are built on it, so the rules live in ``step`` alone."""

    def __init__(self, start: LaneState = EMPTY):
        self.start = start
        self.lane = dict.fromkeys(start.lane)
        self.named = dict.fromkeys(start.named)
        self.marks = {s: m for s, m in start.marks.items() if s in self.lane}
        self.changed = False

    def step(self, event: Mapping) -> None:
        """Fold one event; refusals, resets and repairs change nothing."""
        action = event["action"]
        if action not in ("push", "bump", "unbump"):
            return
        self.changed = True
        lane, marks = self.lane, self.marks
        moved = event.get("moved", ())
        for slug in moved:
            lane.setdefault(slug)
        for slug in event.get("removed", ()):
            lane.pop(slug, None)
            marks.pop(slug, None)
        mark = Mark(event.get("seq", 0), event.get("at", ""), event.get("by", ""), action, event["slug"], event.get("reason"))
        for slug in moved:
            if slug in lane and slug not in marks:
                marks[slug] = mark
        if action == "unbump":
            self.named.pop(event["slug"], None)
        elif not event.get("noop"):
            if event["slug"] not in self.named and event["slug"] in lane:
                marks[event["slug"]] = mark
            self.named.setdefault(event["slug"])

    def state(self) -> LaneState:
        """The lane state folded so far (``start`` itself when nothing changed)."""
        if not self.changed:
            return self.start
        return LaneState(tuple(self.lane), tuple(self.named), dict(self.marks))


def apply(state: LaneState, event: Mapping) -> LaneState:
    """The lane after ``event``; refusals, resets and repairs change nothing."""
    folder = Fold(state)
    folder.step(event)
    return folder.state()


def replay(events: Iterable[Mapping], start: LaneState = EMPTY) -> LaneState:
    """The lane state that ``events`` fold to from ``start``."""
    folder = Fold(start)
    for event in events:
        folder.step(event)
    return folder.state()

"""Pure planning of the priority lane: dependency closure, the derivation of
the lane from its named lanes, and the plans of bump, push and unbump.

Everything here takes plain data and returns plain data with reasons; no
file, clock or uid is touched.
"""

from __future__ import annotations

import heapq

from .fold import LaneState
from .ledgers import Ledgers
from .queuetext import Lane, Skipped
from .records import dataclass, field, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


@dataclass(frozen=True)
class Snapshot:
    """Everything a plan needs, read once: ``queue.txt`` lanes by slug (in file
    order), the ledgers, the lane the log replays to, and the time it was
    read (a stamp; empty: no lease ever counts as expired, no schedule as
    come)."""

    lanes: dict[str, Lane]
    ledgers: Ledgers
    state: LaneState
    now: str = ""
    #: for lanes that hold a lease and have a result.json: the token it carries
    results: Mapping[str, int | None] = field(default_factory=dict)
    #: the queue.txt lines that were skipped, and why
    skipped: tuple[Skipped, ...] = ()
    #: when the lanes and the integrated ledger last changed (stamps, '' unknown): a lane or an
    #: integration that no log line records dates from there at the latest (see ``starving``)
    edits: tuple[str, str] = ("", "")

    def position(self, slug: str) -> int:
        lane = self.lanes.get(slug)
        return lane.line if lane else 1 << 62


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What an admitted request does to the lane: ``moved`` joins the end of
    the lane in this order, ``removed`` leaves it; ``noop`` says why the lane
    named was not prioritised; ``already`` lists the closure already in the lane.
    ``swept`` names the lanes of ``removed`` that left whatever the request
    asked (the named set no longer required them before it), each with why:
    ``settled``, ``finished``, ``gone`` (``queue.txt`` no longer carries it)
    or ``unneeded``."""

    slug: str
    moved: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    already: tuple[str, ...] = ()
    noop: str | None = None
    swept: tuple[tuple[str, str], ...] = ()


def _closure(snap: Snapshot, slug: str, strict: bool) -> list[str] | Refusal:
    """``slug`` and its unfinished transitive dependencies, dependencies
    first, otherwise in ``queue.txt`` order; a waived dependency is not one
    (it is neither pulled forward nor walked past). Strict: a dependency
    that can never finish refuses; lenient: the walk stops there."""
    led = snap.ledgers
    waivers = snap.state.waivers
    members: dict[str, list[str]] = {}
    stack = [slug]
    abandoned, unknown = [], []
    while stack:
        node = stack.pop()
        if node in members:
            continue
        walk = []
        waived = waivers.get(node, ())
        for dep in snap.lanes[node].deps:
            if dep in led.integrated or (dep in led.finished and dep not in led.abandoned) or dep in waived:
                continue
            if dep in led.abandoned:
                abandoned.append(dep)
            elif dep not in snap.lanes:
                unknown.append(dep)
            else:
                walk.append(dep)
                stack.append(dep)
        members[node] = walk
    if strict and abandoned:
        names = tuple(dict.fromkeys(abandoned))
        return Refusal("dependency_abandoned", f"{slug} depends on abandoned {', '.join(names)}, which can never be integrated", names)
    if strict and unknown:
        names = tuple(dict.fromkeys(unknown))
        return Refusal("dependency_unknown", f"{slug} depends on {', '.join(names)}, which queue.txt and the ledgers do not know", names)
    return _dependencies_first(snap, slug, members, strict)


def _dependencies_first(snap: Snapshot, slug: str, members: dict[str, list[str]], strict: bool) -> list[str] | Refusal:
    needs = {node: len(deps) for node, deps in members.items()}
    needed_by: dict[str, list[str]] = {}
    for node, deps in members.items():
        for dep in deps:
            needed_by.setdefault(dep, []).append(node)
    ready = [(snap.position(n), n) for n, count in needs.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        for user in needed_by.get(node, ()):
            needs[user] -= 1
            if needs[user] == 0:
                heapq.heappush(ready, (snap.position(user), user))
    if len(order) < len(members):
        ring = tuple(sorted((n for n in members if needs[n] > 0), key=snap.position))
        if strict:
            return Refusal("dependency_cycle", f"{slug} is part of or depends on a cycle: {', '.join(ring)}", ring)
        order.extend(ring)
    return order


def live(snap: Snapshot, slug: str) -> bool:
    """A named lane still counts while ``queue.txt`` carries it and it has
    neither finished nor settled."""
    return slug in snap.lanes and not snap.ledgers.done(slug)


def derive(snap: Snapshot, named: tuple[str, ...]) -> tuple[str, ...]:
    """The lane that ``named`` requires: each live named lane and its
    unfinished transitive dependencies. Members already in the replayed lane
    keep their place; the rest follow, dependencies first."""
    required: dict[str, None] = {}
    for slug in named:
        if live(snap, slug):
            for member in _closure(snap, slug, strict=False):  # type: ignore[union-attr]
                required.setdefault(member)
    kept = tuple(s for s in snap.state.lane if s in required)
    kept_set = set(kept)
    return kept + tuple(s for s in required if s not in kept_set)


def _rederive(snap: Snapshot, slug: str, named: tuple[str, ...], noop: str | None = None) -> Plan:
    lane = derive(snap, named)
    old = set(snap.state.lane)
    new = set(lane)
    removed = tuple(s for s in snap.state.lane if s not in new)
    required = set(derive(snap, snap.state.named)) if removed else set()
    return Plan(
        slug,
        moved=tuple(s for s in lane if s not in old),
        removed=removed,
        noop=noop,
        swept=tuple((s, _swept_why(snap, s)) for s in removed if s not in required),
    )


def _swept_why(snap: Snapshot, slug: str) -> str:
    """Why a lane left the priority lane without the request asking."""
    if snap.ledgers.settled(slug):
        return "settled"
    if slug in snap.ledgers.finished:
        return "finished"
    return "unneeded" if slug in snap.lanes else "gone"


def _done_words(snap: Snapshot, slug: str) -> str | None:
    led = snap.ledgers
    if slug in led.integrated:
        return f"{slug} is already integrated"
    if slug in led.abandoned:
        return f"{slug} is abandoned"
    if slug in led.finished:
        return f"{slug} has finished and awaits review"
    return None


def plan_bump(snap: Snapshot, slug: str) -> Plan | Refusal:
    """Prioritise ``slug`` by name, pulling its dependencies forward."""
    done = _done_words(snap, slug)
    if slug not in snap.lanes and done is None:
        return Refusal("unknown_slug", f"queue.txt carries no lane {slug}; add it with: storm-queue push {slug} ISSUE")
    named = snap.state.named
    if done is not None:
        return _rederive(snap, slug, named, noop=done)
    closure = _closure(snap, slug, strict=True)
    if isinstance(closure, Refusal):
        return closure
    plan = _rederive(snap, slug, tuple(dict.fromkeys(named + (slug,))))
    in_lane = set(snap.state.lane)
    return replace(plan, already=tuple(s for s in closure if s in in_lane))


def with_lane(snap: Snapshot, lane: Lane) -> Snapshot:
    """The snapshot as it will be once ``lane`` is appended to ``queue.txt``."""
    lanes = dict(snap.lanes)
    lanes[lane.slug] = lane
    return replace(snap, lanes=lanes)


def plan_push(snap: Snapshot, slug: str, issue: str, deps: tuple[str, ...] | None) -> tuple[Plan | Refusal, bool]:
    """Enqueue ``slug`` already prioritised; the flag says whether
    ``queue.txt`` must gain its line."""
    queued = snap.lanes.get(slug)
    if queued is not None:
        if queued.issue != issue:
            return Refusal("issue_mismatch", f"{slug} is queued under issue {queued.issue}, not {issue}"), False
        if deps is not None and set(deps) != set(queued.deps):
            had = ",".join(queued.deps) or "none"
            return Refusal("deps_mismatch", f"{slug} is queued with dependencies {had}; push it without --deps, or edit queue.txt"), False
        return plan_bump(snap, slug), False
    done = _done_words(snap, slug)
    if done is not None:
        return _rederive(snap, slug, snap.state.named, noop=done), False
    after = with_lane(snap, Lane(slug, issue, deps or (), 1 << 61))
    plan = plan_bump(after, slug)
    return plan, not isinstance(plan, Refusal)


def keepers(snap: Snapshot) -> dict[str, tuple[str, ...]]:
    """For every lane that a live named lane requires, the live named lanes
    (other than itself, in the order they were named) that require it now:
    why it is kept in the priority lane, whoever first pulled it there."""
    kept: dict[str, list[str]] = {}
    for named in snap.state.named:
        if live(snap, named):
            for member in _closure(snap, named, strict=False):  # type: ignore[union-attr]
                if member != named:
                    kept.setdefault(member, []).append(named)
    return {slug: tuple(users) for slug, users in kept.items()}


def needed_by(snap: Snapshot, slug: str) -> tuple[str, ...]:
    """The live named lanes, other than ``slug``, that require ``slug``."""
    return keepers(snap).get(slug, ())


def plan_unbump(snap: Snapshot, slug: str) -> Plan | Refusal:
    """Take ``slug`` out of the named set; everything no remaining named lane
    requires leaves with it."""
    if slug not in snap.state.lane:
        return Refusal("not_prioritised", f"{slug} is not in the priority lane")
    users = needed_by(snap, slug)
    if users:
        return Refusal(
            "needed_by_named",
            f"{slug} is needed by prioritised {', '.join(users)}; unbump {'them' if len(users) > 1 else 'it'} first",
            users,
        )
    return _rederive(snap, slug, tuple(n for n in snap.state.named if n != slug))


def plan_waive(snap: Snapshot, slug: str, dep: str, undo: bool, by: str,
               marked_blocked: bool = False) -> tuple[Plan | Refusal, bool]:
    """Waive (``undo``: stop waiving) ``slug``'s dependency ``dep``, and
    re-derive the lane with the waivers that leaves: a waived dependency is
    not required, so one only ``slug`` pulled forward leaves the lane, and
    an undo pulls it forward again. Waiving a waived dependency, or undoing
    a waiver that does not exist, is a no-op; a ``dep`` that ``slug``'s
    line does not name is refused (``not_a_dependency``), unless an undo
    ends a waiver that exists. ``marked_blocked`` says that ``slug``'s
    result is the blocked mark ``next`` wrote: the flag returned says that
    the waiver lifts it (no abandoned dependency that is not waived is
    left), and the plan sees the lane unfinished."""
    from .fold import Waiver

    waived = dict(snap.state.waivers.get(slug, {}))
    lane = snap.lanes.get(slug)
    if lane is None and not (undo and dep in waived):
        return Refusal("unknown_slug", f"queue.txt carries no lane {slug}, so it has no dependency to waive"), False
    if (lane is None or dep not in lane.deps) and not (undo and dep in waived):
        named = ",".join(lane.deps) if lane is not None and lane.deps else "none"
        return Refusal("not_a_dependency", f"{slug} does not depend on {dep} (its dependencies: {named}); "
                       "only a dependency its queue.txt line names can be waived", (dep,)), False
    if not undo:
        waived[dep] = None
    lifts = marked_blocked and lane is not None and not any(
        d in snap.ledgers.abandoned for d in lane.deps if d not in waived)
    if lifts:
        snap = replace(snap, ledgers=replace(snap.ledgers, finished=snap.ledgers.finished - {slug}))
    waived = dict(snap.state.waivers.get(slug, {}))
    if undo != (dep in waived):
        noop = f"{dep} is not waived for {slug}" if undo else f"{dep} is already waived for {slug}"
        return _rederive(snap, slug, snap.state.named, noop=noop), lifts
    if undo:
        del waived[dep]
    else:
        waived[dep] = Waiver(0, snap.now, by, None)
    waivers = {s: d for s, d in snap.state.waivers.items() if s != slug}
    if waived:
        waivers[slug] = waived
    after = replace(snap, state=replace(snap.state, waivers=waivers))
    plan = _rederive(after, slug, snap.state.named)
    required = set(derive(snap, snap.state.named))  # what the lane required before: the rest left whatever was asked
    return replace(plan, swept=tuple((s, _swept_why(snap, s)) for s in plan.removed if s not in required)), lifts

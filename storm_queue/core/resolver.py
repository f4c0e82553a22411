"""Pure: the run order, each lane's state in words, and the decision.

Run order is the priority lane as the log replays it (only lanes that
``queue.txt`` carries), then every other lane in file order.
"""

from __future__ import annotations

from .fold import NO_RUN, Act, Run
from .lane import Snapshot, derive, live
from .records import dataclass

SETTLED, FINISHED, RUNNING, HELD, QUARANTINED, BLOCKED, WAITING, SCHEDULED, READY, CYCLE = (
    "settled", "finished", "running", "held", "quarantined", "blocked", "waiting", "scheduled", "ready", "cycle",
)
#: every state a lane of ``list`` is in, in the order a storm moves a lane through them
STATES = (READY, WAITING, CYCLE, BLOCKED, SCHEDULED, HELD, QUARANTINED, RUNNING, FINISHED, SETTLED)
#: how a lane is running: under a live lease, under a lease past its expiry
#: (an orphan), or by a marker with no lease behind it
LEASE, ORPHAN, MARKER = "lease", "orphan", "marker"


@dataclass(frozen=True)
class Row:
    position: int
    slug: str
    issue: str
    deps: tuple[str, ...]
    prioritised: bool
    state: str
    status: str
    waits_on: tuple[str, ...] = ()
    running: str = ""  # LEASE, ORPHAN or MARKER when the state is running
    run: Run = NO_RUN


@dataclass(frozen=True)
class View:
    rows: tuple[Row, ...]
    settled: tuple[Row, ...]
    stray: tuple[str, ...]
    decision: str
    to_block: tuple[Row, ...]
    stale: bool
    #: the operator's halt in force (who, when, why): while it lasts the decision is ``halted``
    halt: Act | None = None


def only(view: View, states: frozenset[str]) -> View:
    """``view`` with only the rows (and settled rows) in ``states``; its
    decision and the rest as they were."""
    from .records import replace

    return replace(view, rows=tuple(r for r in view.rows if r.state in states),
                   settled=tuple(r for r in view.settled if r.state in states))


def running(snap: Snapshot, slug: str) -> str:
    """How the lane is running (``LEASE``, ``ORPHAN``, ``MARKER``), or ''.
    A marker carrying a token no greater than the lane's last is what a
    lease that has ended left behind: it is not running."""
    run = snap.state.run(slug)
    if run.lease is not None:
        return ORPHAN if snap.now and run.lease.expires <= snap.now else LEASE
    if slug in snap.ledgers.running:
        token = snap.ledgers.running[slug]
        return "" if token is not None and token <= run.token else MARKER
    return ""


def _foreign_result(snap: Snapshot, slug: str) -> bool:
    """A ``result.json`` on a leased lane that the lease's own finish did not
    write (a lane that lost its lease wrote it): it does not finish the lane."""
    lease = snap.state.run(slug).lease
    return lease is not None and snap.results.get(slug) != lease.token


def _pending(snap: Snapshot, slug: str) -> tuple[str, ...]:
    """The dependencies a lane still waits for: not waived, not integrated."""
    waived = snap.state.waivers.get(slug, ())
    return tuple(d for d in snap.lanes[slug].deps if d not in waived and d not in snap.ledgers.integrated)


def cycles(snap: Snapshot) -> dict[str, tuple[str, ...]]:
    """Each lane that waits in a dependency cycle (a lane depending on
    itself included), and the cycle's members in queue.txt order: the
    strongly connected parts of the graph of lanes that wait for their
    dependencies (a lane settled, finished, running or quarantined waits for
    none), each edge a dependency still pending (Tarjan's, without recursion)."""
    waits = {}
    for slug in snap.lanes:
        deps = [d for d in _pending(snap, slug) if d in snap.lanes]
        if deps and _state(snap, slug, None)[0] in (WAITING, BLOCKED):  # a lane waiting for none is in no cycle
            waits[slug] = deps
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: dict[str, tuple[str, ...]] = {}
    for root in waits:
        if root in index:
            continue
        work = [(root, iter(waits[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for dep in edges:
                if dep not in waits:
                    continue
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on.add(dep)
                    work.append((dep, iter(waits[dep])))
                    break
                if dep in on:
                    low[node] = min(low[node], index[dep])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1 or node in waits[node]:
                        members = tuple(sorted(part, key=lambda s: snap.lanes[s].line))
                        found.update(dict.fromkeys(members, members))
    return found


def _state(snap: Snapshot, slug: str, cyc: dict[str, tuple[str, ...]] | None = None) -> tuple[str, tuple[str, ...]]:
    """A lane's state, and the dependencies it is blocked or waits on; it
    looks only at the lane's own line, its waivers, the ledgers and its run,
    and, given ``cyc`` (``cycles``), whether it waits in a cycle."""
    led = snap.ledgers
    if led.settled(slug):
        return SETTLED, ()
    if slug in led.finished and not _foreign_result(snap, slug):
        return FINISHED, ()
    if running(snap, slug):
        return RUNNING, ()
    run = snap.state.run(slug)
    if run.held is not None:  # the hold decides what starts: whatever else holds the lane back comes after it
        return HELD, ()
    if run.quarantined is not None:
        return QUARANTINED, ()
    waived = snap.state.waivers.get(slug, ())
    deps = tuple(d for d in snap.lanes[slug].deps if d not in waived)  # a waived dependency counts as integrated
    gone = tuple(d for d in deps if d in led.abandoned)
    if gone:
        return BLOCKED, gone
    pending = tuple(d for d in deps if d not in led.integrated)
    if pending:
        return (CYCLE if cyc is not None and slug in cyc else WAITING), pending
    if run.not_before is not None and not (snap.now and run.not_before <= snap.now):
        return SCHEDULED, ()
    return READY, ()


#: how many of the dependencies a waiting lane waits on its status names (``Row.waits_on`` and ``why`` keep
#: every one): a lane waiting on n lanes would otherwise say n names, and a storm of such lanes n*n
WAITS_NAMED = 10


def _status(snap: Snapshot, slug: str, state: str, waits: tuple[str, ...],
            cyc: dict[str, tuple[str, ...]] | None = None, known: dict[str, tuple[str, tuple[str, ...]]] | None = None) -> str:
    """The state in plain words, naming what the lane waits on (the first
    ``WAITS_NAMED``, and how many more); ``known``: the lanes' states
    already found (``_state``), so a dependency's is not found again."""
    if state == SETTLED:
        return "integrated" if slug in snap.ledgers.integrated else "abandoned"
    if state == FINISHED:
        return "finished, awaits review"
    run = snap.state.run(slug)
    if state == RUNNING:
        how = running(snap, slug)
        if how == MARKER:
            return "running by a marker with no lease (a runner that takes no leases runs it)"
        lease = run.lease
        if how == ORPHAN:
            return (f"orphaned: the lease of {lease.holder} (token {lease.token}) expired at {lease.expires}; "
                    "the next claim or recover takes it back")
        return f"running now: held by {lease.holder}, token {lease.token}, lease until {lease.expires}"
    if state == HELD:
        from .hold import hold_note

        return hold_note(slug, run.held)
    if state == QUARANTINED:
        return f"quarantined after {run.attempts} attempts (the operator's unpark {slug} --reason TEXT returns it)"
    if state == SCHEDULED:
        return f"scheduled: not before {run.not_before}"
    if state == BLOCKED:
        return f"blocked: depends on abandoned {', '.join(waits)}"
    if state == CYCLE:
        return cycle_words(snap, cyc[slug])
    if state == WAITING:
        named = ", ".join(f"{d} ({_dep_word(snap, d, cyc, known)})" for d in waits[:WAITS_NAMED])
        more = len(waits) - WAITS_NAMED
        return f"waits on {named}" + (f" and {more:,} more (storm-queue why {slug} names them all)" if more > 0 else "")
    return "ready"


#: how many of a cycle's members each of its lanes names (``doctor`` names every one): a cycle of n
#: lanes would otherwise say n names n times
CYCLE_NAMED = 8


def cycle_words(snap: Snapshot, members: tuple[str, ...], every: bool = False) -> str:
    """A cycle's members and their queue.txt lines (the first
    ``CYCLE_NAMED`` of a longer one, unless ``every``), and what to do."""
    shown = members if every or len(members) <= CYCLE_NAMED else members[:CYCLE_NAMED]
    named = ", ".join(f"{m} (line {snap.lanes[m].line})" for m in shown)
    if len(shown) < len(members):
        named = (f"{named} and {len(members) - len(shown):,} more of its {len(members):,} lanes (storm-queue doctor "
                 "names them all)")
    if len(members) == 1:
        return f"in a dependency cycle: {named} depends on itself; it runs once its line no longer names it"
    return f"in a dependency cycle: {named}; none runs until one of their lines no longer names another"


def cycle_note(snap: Snapshot, view: View) -> str:
    """When nothing can run and lanes wait in a cycle: the one line saying so ('' otherwise)."""
    if not view.decision.startswith("wait") or view.halt is not None:
        return ""
    met = {row.slug for row in view.rows if row.state == CYCLE}
    if not met or any(row.state in (RUNNING, SCHEDULED, HELD) for row in view.rows):
        return ""
    cyc = cycles(snap)
    parts = list(dict.fromkeys(cyc[s] for s in sorted(met, key=lambda s: snap.lanes[s].line)))
    return "nothing can run: " + "; ".join(cycle_words(snap, p).removeprefix("in a ") for p in parts)


def held_note(view: View) -> str:
    """When the decision is ``wait`` (not under a halt) and lanes are held:
    the one line naming them, and the way on ('' otherwise)."""
    if not view.decision.startswith("wait") or view.halt is not None:
        return ""
    held = [row.slug for row in view.rows if row.state == HELD]
    if not held:
        return ""
    return (f"held, so not started: {', '.join(held)} (storm-queue unhold SLUG --reason TEXT lets one start; "
            "storm-queue why SLUG says who held it and why)")


def _dep_word(snap: Snapshot, dep: str, cyc: dict[str, tuple[str, ...]] | None = None,
              known: dict[str, tuple[str, tuple[str, ...]]] | None = None) -> str:
    if dep not in snap.lanes:
        return "unknown to queue.txt"
    state, _ = known[dep] if known is not None and dep in known else _state(snap, dep, cyc)
    return {FINISHED: "finished, awaits review", READY: "not yet run", SCHEDULED: "scheduled"}.get(state, state)


def decide(rows: tuple[Row, ...], unattended: bool, halted: bool = False) -> str:
    """The one decision line ``next`` prints for lanes in run order; while
    the storm is ``halted`` it is ``halted``, whatever the lanes."""
    if halted:
        return "halted"
    finished = [r.slug for r in rows if r.state == FINISHED]
    if finished and not unattended:
        return "review " + " ".join(finished)
    for row in rows:
        if row.state == READY:
            return f"run {row.slug} {row.issue}"
    if finished or any(r.state in (RUNNING, HELD, QUARANTINED, WAITING, CYCLE, BLOCKED, SCHEDULED) for r in rows):
        return " ".join(["wait"] + finished)
    return "empty"


@dataclass(frozen=True)
class Decided:
    """What ``resolve`` decides, without the rest of the view: the decision
    line, the blocked rows met before the first ready lane (``to_block``),
    the lanes running or holding a lease (``busy``) and the finished lanes
    (``finished``, in no order: ``in_run_order`` orders them)."""

    decision: str
    to_block: tuple[Row, ...]
    busy: frozenset[str]
    finished: frozenset[str]


def in_run_order(snap: Snapshot, slugs: frozenset[str] | set[str]) -> tuple[str, ...]:
    """``slugs`` (lanes of the storm) in run order: the priority lane's
    places first, then the order of their lines."""
    if not slugs:
        return ()
    place = {s: i for i, s in enumerate(snap.state.lane) if s in slugs}
    lanes = snap.lanes
    return tuple(sorted(slugs, key=lambda s: (0, place[s]) if s in place else (1, lanes[s].line)))


def decided(snap: Snapshot) -> Decided:
    """``resolve(snap)``'s ``decision`` and ``to_block`` (and the running
    and finished lanes), found by walking the run order only as far as the
    first ready lane: a settled lane costs two set lookups, and no status
    words are made but for the rows to block. Equal to ``resolve`` for every
    snapshot (a property test holds it to that)."""
    led = snap.ledgers
    lanes = snap.lanes
    lane = [s for s in snap.state.lane if s in lanes]
    in_lane = set(lane)
    finished_set = {s for s in led.finished - led.integrated - led.abandoned if s in lanes and not _foreign_result(snap, s)}
    leased = {s for s, r in snap.state.runs.items() if r.lease is not None}
    busy = {s for s in leased | set(led.running) if s in lanes and not led.settled(s) and s not in finished_set
            and running(snap, s)}
    ready, pending, to_block, position = None, False, [], 0
    settled = led.integrated | led.abandoned
    for slug in lane + [s for s in lanes if s not in in_lane] if lane else lanes:
        if slug in settled:
            continue
        position += 1
        if slug in finished_set or slug in busy:
            pending = True
            continue
        state, waits = _state(snap, slug)
        if state == READY:
            ready = slug
            break
        pending = True
        if state == BLOCKED:
            q = lanes[slug]
            to_block.append(Row(position, slug, q.issue, q.deps, slug in in_lane, state, _status(snap, slug, state, waits),
                                waits, "", snap.state.run(slug)))
    if finished_set and not led.unattended:
        decision = "review " + " ".join(in_run_order(snap, finished_set))
    elif ready is not None:
        decision = f"run {ready} {lanes[ready].issue}"
    elif pending:
        decision = " ".join(["wait", *in_run_order(snap, finished_set)])
    else:
        decision = "empty"
    if snap.state.halt is not None:  # as ``decide`` says it: nothing starts while halted
        decision = "halted"
    return Decided(decision, tuple(to_block), frozenset(busy | leased), frozenset(finished_set))


def stale(snap: Snapshot) -> bool:
    """True when a hand edit (or a lane finishing) left the replayed lane
    different from its derivation among lanes still to run."""
    derived = set(derive(snap, snap.state.named))
    replayed = {s for s in snap.state.lane if live(snap, s)}
    return derived != replayed


def resolve(snap: Snapshot) -> View:
    """Order the storm's lanes, give each its state, and decide."""
    lane = [s for s in snap.state.lane if s in snap.lanes]
    in_lane = set(lane)
    order = lane + [s for s in snap.lanes if s not in in_lane]
    rows, settled = [], []
    cyc = cycles(snap)
    known = {slug: _state(snap, slug, cyc) for slug in order}
    for slug in order:
        state, waits = known[slug]
        status = _status(snap, slug, state, waits, cyc, known)
        target = settled if state == SETTLED else rows
        q = snap.lanes[slug]
        target.append(Row(len(rows) + 1 if state != SETTLED else 0, slug, q.issue, q.deps, slug in in_lane, state, status,
                          waits, running(snap, slug) if state == RUNNING else "", snap.state.run(slug)))
    stray = tuple(s for s in snap.state.lane if s not in snap.lanes and not snap.ledgers.settled(s))
    rows_t = tuple(rows)
    to_block = []
    for row in rows_t:
        if row.state == READY:
            break
        if row.state == BLOCKED:
            to_block.append(row)
    halt = snap.state.halt
    return View(rows_t, tuple(settled), stray, decide(rows_t, snap.ledgers.unattended, halt is not None), tuple(to_block),
                stale(snap), halt)

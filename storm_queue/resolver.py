"""Pure: the run order, each lane's state in words, and the decision.

Run order is the priority lane as the log replays it (only lanes that
``queue.txt`` carries), then every other lane in file order.
"""

from __future__ import annotations


from .lane import Snapshot, derive, live
from .records import dataclass

SETTLED, FINISHED, RUNNING, BLOCKED, WAITING, READY = (
    "settled", "finished", "running", "blocked", "waiting", "ready",
)


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


@dataclass(frozen=True)
class View:
    rows: tuple[Row, ...]
    settled: tuple[Row, ...]
    stray: tuple[str, ...]
    decision: str
    to_block: tuple[Row, ...]
    stale: bool


def _state(snap: Snapshot, slug: str) -> tuple[str, tuple[str, ...]]:
    """A lane's state, and the dependencies it is blocked or waits on; it
    looks only at the lane's own line and the ledgers."""
    led = snap.ledgers
    if led.settled(slug):
        return SETTLED, ()
    if slug in led.finished:
        return FINISHED, ()
    if slug in led.running:
        return RUNNING, ()
    deps = snap.lanes[slug].deps
    gone = tuple(d for d in deps if d in led.abandoned)
    if gone:
        return BLOCKED, gone
    pending = tuple(d for d in deps if d not in led.integrated)
    return (WAITING, pending) if pending else (READY, ())


def _status(snap: Snapshot, slug: str, state: str, waits: tuple[str, ...]) -> str:
    """The state in plain words, naming what the lane waits on."""
    if state == SETTLED:
        return "integrated" if slug in snap.ledgers.integrated else "abandoned"
    if state == FINISHED:
        return "finished, awaits review"
    if state == RUNNING:
        return "running now"
    if state == BLOCKED:
        return f"blocked: depends on abandoned {', '.join(waits)}"
    if state == WAITING:
        return "waits on " + ", ".join(f"{d} ({_dep_word(snap, d)})" for d in waits)
    return "ready"


def _dep_word(snap: Snapshot, dep: str) -> str:
    if dep not in snap.lanes:
        return "unknown to queue.txt"
    state, _ = _state(snap, dep)
    return {FINISHED: "finished, awaits review", READY: "not yet run"}.get(state, state)


def decide(rows: tuple[Row, ...], unattended: bool) -> str:
    """The one decision line ``next`` prints for lanes in run order."""
    finished = [r.slug for r in rows if r.state == FINISHED]
    if finished and not unattended:
        return "review " + " ".join(finished)
    for row in rows:
        if row.state == READY:
            return f"run {row.slug} {row.issue}"
    if finished or any(r.state in (RUNNING, WAITING, BLOCKED) for r in rows):
        return " ".join(["wait"] + finished)
    return "empty"


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
    for slug in order:
        state, waits = _state(snap, slug)
        status = _status(snap, slug, state, waits)
        target = settled if state == SETTLED else rows
        q = snap.lanes[slug]
        target.append(Row(len(rows) + 1 if state != SETTLED else 0, slug, q.issue, q.deps, slug in in_lane, state, status, waits))
    stray = tuple(s for s in snap.state.lane if s not in snap.lanes and not snap.ledgers.settled(s))
    rows_t = tuple(rows)
    to_block = []
    for row in rows_t:
        if row.state == READY:
            break
        if row.state == BLOCKED:
            to_block.append(row)
    return View(rows_t, tuple(settled), stray, decide(rows_t, snap.ledgers.unattended), tuple(to_block), stale(snap))

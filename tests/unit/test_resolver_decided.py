"""``resolver.decided`` (the decision found by walking the run order only
to the first ready lane, which a claim uses) against ``resolver.resolve``
(the whole view, from scratch), by Hypothesis over random storms: every
lane state (settled, finished, a result.json a lost lease wrote, running
by a live or an expired lease or by a marker, held, quarantined, blocked,
waiting, scheduled, ready), prioritised and stray slugs, unattended or
not. ``plan_claim`` decides from ``decided``, so it is also checked
against the decision the whole view gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from storm_queue.core import resolver
from storm_queue.core.clock import stamp
from storm_queue.core.config import Policy
from storm_queue.core.fold import Act, Lease, LaneState, Run
from storm_queue.core.lane import Snapshot
from storm_queue.core.ledgers import Ledgers
from storm_queue.core.queuetext import Lane
from storm_queue.core.runs import plan_claim

SLUGS = ("a", "b", "c", "d", "e", "f")
T = 1_800_000_000.0
NOW = stamp(T)
times = st.sampled_from([stamp(T - 60), stamp(T + 60), None])


@st.composite
def storms(draw) -> Snapshot:
    queued = draw(st.lists(st.sampled_from(SLUGS), unique=True, max_size=6))
    lanes = {s: Lane(s, str(i + 1), tuple(draw(st.lists(st.sampled_from(SLUGS + ("gone",)), unique=True, max_size=2))), i + 1)
             for i, s in enumerate(queued)}
    some = st.frozensets(st.sampled_from(SLUGS + ("gone",)), max_size=4)
    running = draw(st.dictionaries(st.sampled_from(SLUGS), st.none() | st.integers(0, 4), max_size=2))
    led = Ledgers(draw(some), draw(some), draw(some), running, draw(st.booleans()))
    runs = {}
    for s in draw(st.lists(st.sampled_from(SLUGS), unique=True, max_size=6)):
        token = draw(st.integers(0, 4))
        expires = draw(times)
        lease = None if expires is None else Lease("h", token, "by", stamp(T - 100), expires, 30)
        held = draw(st.sampled_from([None, None, Act(1, NOW, "operator:op", "r")]))
        runs[s] = Run(token, lease, draw(st.integers(0, 3)), (), draw(st.none() | st.just(stamp(T - 5))), draw(times),
                      held=held)
    lane = tuple(draw(st.lists(st.sampled_from(SLUGS + ("stray",)), unique=True, max_size=4)))
    results = {s: draw(st.none() | st.integers(0, 4)) for s in runs if runs[s].lease is not None and s in led.finished}
    return Snapshot(lanes, led, LaneState(lane, lane, runs=runs), draw(st.sampled_from([NOW, ""])), results)


@settings(max_examples=600, deadline=None)
@given(storms())
def test_decided_is_what_the_whole_view_decides(snap: Snapshot) -> None:
    view = resolver.resolve(snap)
    seen = resolver.decided(snap)
    assert seen.decision == view.decision
    assert seen.to_block == view.to_block
    assert resolver.in_run_order(snap, seen.finished) == tuple(r.slug for r in view.rows if r.state == resolver.FINISHED)
    assert seen.busy == frozenset({r.slug for r in view.rows if r.state == resolver.RUNNING}
                                  | {s for s, r in snap.state.runs.items() if r.lease is not None})


@settings(max_examples=300, deadline=None)
@given(storms(), st.integers(1, 3))
def test_a_claim_decides_as_the_whole_view_does(snap: Snapshot, slots: int) -> None:
    claim = plan_claim(snap, Policy(slots=slots), "h", 30, T)
    view = claim.view  # the whole view of the storm the claim decided on (after its expiries)
    busy = {r.slug for r in view.rows if r.state == resolver.RUNNING} | {
        s for s, r in claim.after.state.runs.items() if r.lease is not None}
    finished = [r.slug for r in view.rows if r.state == resolver.FINISHED]
    if view.decision.startswith("run ") and len(busy) < slots:
        slug, issue = view.decision.split(" ")[1:]
        assert claim.slug == slug and claim.decision == f"run {slug} {issue} {claim.token}"
    elif view.decision.startswith("run "):
        assert claim.slug is None and claim.decision == " ".join(["wait"] + finished)
    else:
        assert claim.slug is None and claim.decision == view.decision
    assert claim.to_block == view.to_block
    assert claim.slug is None or claim.after.state.run(claim.slug).held is None  # a held lane is never started

"""Unit tests of storm_queue.core.resolver: lane states, run order, the decision."""

from __future__ import annotations

from storm_queue.core.records import replace


from storm_queue.core import lane, resolver
from storm_queue.core import queuetext
from storm_queue.core.fold import LaneState
from storm_queue.core.lane import Snapshot
from storm_queue.core.ledgers import Ledgers


def snap(queue: str, lane_=(), named=None, integrated=(), abandoned=(), finished=(), running=(),
         unattended=False) -> Snapshot:
    q = queuetext.parse(queue)
    assert q.skipped == ()
    state = LaneState(tuple(lane_), tuple(lane_ if named is None else named))
    led = Ledgers(frozenset(integrated), frozenset(abandoned), frozenset(finished), dict.fromkeys(running), unattended)
    return Snapshot({l.slug: l for l in q.lanes}, led, state)


def states(view) -> dict[str, str]:
    return {r.slug: r.state for r in view.rows + view.settled}


# -- states and their precedence ------------------------------------------------

def test_precedence_settled_over_everything():
    s = snap("a 1 gone\nb 2 gone\n", integrated=["a"], abandoned=["b", "gone"], finished=["a", "b"], running=["a", "b"])
    v = resolver.resolve(s)
    assert states(v) == {"a": "settled", "b": "settled"}
    assert v.rows == ()
    assert {r.slug: r.status for r in v.settled} == {"a": "integrated", "b": "abandoned"}
    assert all(r.position == 0 for r in v.settled)
    assert v.decision == "empty"


def test_precedence_finished_over_running_and_deps():
    s = snap("a 1 gone\n", abandoned=["gone"], finished=["a"], running=["a"])
    assert states(resolver.resolve(s))["a"] == "finished"


def test_precedence_running_over_blocked_and_waiting():
    s = snap("a 1 gone\nb 2 later\nlater 3\n", abandoned=["gone"], running=["a", "b"])
    st = states(resolver.resolve(s))
    assert st["a"] == "running" and st["b"] == "running"


def test_precedence_blocked_over_waiting():
    s = snap("w 1\na 2 w,gone\n", abandoned=["gone"])
    v = resolver.resolve(s)
    row = {r.slug: r for r in v.rows}["a"]
    assert row.state == "blocked"
    assert row.waits_on == ("gone",)
    assert "gone" in row.status


def test_waiting_on_unintegrated_finished_running_or_unknown():
    s = snap("f 1\nr 2\np 3\na 4 f\nb 5 r\nc 6 p\nd 7 nowhere\n", finished=["f"], running=["r"])
    v = resolver.resolve(s)
    rows = {r.slug: r for r in v.rows}
    for slug, dep in (("a", "f"), ("b", "r"), ("c", "p"), ("d", "nowhere")):
        assert rows[slug].state == "waiting", slug
        assert rows[slug].waits_on == (dep,)
        assert dep in rows[slug].status
    assert "unknown" in rows["d"].status


def test_only_integrated_satisfies_a_dependency():
    s = snap("a 1 d,e\n", integrated=["d", "e"])
    assert states(resolver.resolve(s))["a"] == "ready"
    s = snap("a 1 d,e\n", integrated=["d"], finished=["e"])
    assert states(resolver.resolve(s))["a"] == "waiting"


def test_ready_and_positions():
    s = snap("a 1\nb 2\nc 3\n", integrated=["b"])
    v = resolver.resolve(s)
    assert [(r.position, r.slug, r.state) for r in v.rows] == [(1, "a", "ready"), (2, "c", "ready")]


# -- run order ------------------------------------------------------------------

def test_run_order_priority_lane_then_file_order():
    s = snap("a 1\nb 2\nc 3\nd 4 b\ne 5\n", lane_=("e", "c"))
    v = resolver.resolve(s)
    assert [r.slug for r in v.rows] == ["e", "c", "a", "b", "d"]
    assert [r.prioritised for r in v.rows] == [True, True, False, False, False]
    assert v.decision == "run e 5"


# -- the decision ---------------------------------------------------------------

def test_decision_run_first_ready():
    v = resolver.resolve(snap("w 1 x\nx 2\n"))
    assert v.decision == "run x 2"


def test_decision_run_issue_dash():
    assert resolver.resolve(snap("a -\n")).decision == "run a -"


def test_decision_review_holds_the_storm_without_unattended():
    v = resolver.resolve(snap("a 1\nb 2\nc 3\n", finished=["a", "c"]))
    assert v.decision == "review a c"


def test_decision_review_lists_finished_in_run_order():
    v = resolver.resolve(snap("a 1\nb 2\nc 3\n", lane_=("c",), finished=["a", "c"]))
    assert v.decision == "review c a"


def test_decision_unattended_runs_past_finished():
    v = resolver.resolve(snap("a 1\nb 2\n", finished=["a"], unattended=True))
    assert v.decision == "run b 2"


def test_decision_unattended_wait_names_finished():
    v = resolver.resolve(snap("a 1\nb 2 a\n", finished=["a"], unattended=True))
    assert v.decision == "wait a"


def test_decision_unattended_only_finished_is_wait_not_empty():
    v = resolver.resolve(snap("a 1\nb 2\n", finished=["a", "b"], unattended=True, integrated=[]))
    assert v.decision == "wait a b"


def test_decision_wait_when_only_running():
    v = resolver.resolve(snap("a 1\nb 2\n", running=["a"], integrated=["b"]))
    assert v.decision == "wait"
    assert [r.slug for r in v.rows] == ["a"]


def test_decision_wait_when_only_waiting():
    v = resolver.resolve(snap("a 1 x\nx 2\n", running=["x"]))
    assert v.decision == "wait"


def test_decision_wait_when_only_blocked():
    v = resolver.resolve(snap("a 1 gone\n", abandoned=["gone"]))
    assert v.decision == "wait"


def test_decision_empty():
    assert resolver.resolve(snap("")).decision == "empty"
    assert resolver.resolve(snap("a 1\nb 2\n", integrated=["a"], abandoned=["b"])).decision == "empty"


def test_decide_directly():
    Row = resolver.Row
    rows = (Row(1, "a", "1", (), False, "finished", ""), Row(2, "b", "2", (), False, "ready", ""))
    assert resolver.decide(rows, False) == "review a"
    assert resolver.decide(rows, True) == "run b 2"
    assert resolver.decide((), False) == "empty"


def test_running_is_never_chosen_again_even_first_in_lane():
    s = snap("a 1\nb 2\n", lane_=("a",), running=["a"])
    v = resolver.resolve(s)
    assert v.rows[0].slug == "a" and v.rows[0].state == "running"
    assert v.decision == "run b 2"


def test_running_dependency_keeps_user_waiting():
    s = snap("d 1\na 2 d\n", lane_=("d", "a"), running=["d"])
    assert resolver.resolve(s).decision == "wait"


# -- stray ----------------------------------------------------------------------

def test_stray_prioritised_slug_not_in_queue():
    s = snap("a 1\n", lane_=("gone", "a"))
    v = resolver.resolve(s)
    assert v.stray == ("gone",)
    assert [r.slug for r in v.rows] == ["a"]
    assert v.decision == "run a 1"


def test_settled_and_gone_from_queue_is_not_stray():
    s = snap("a 1\n", lane_=("i", "x", "a"), integrated=["i"], abandoned=["x"])
    assert resolver.resolve(s).stray == ()


def test_finished_and_gone_from_queue_is_still_stray():
    s = snap("a 1\n", lane_=("f",), finished=["f"])
    assert resolver.resolve(s).stray == ("f",)


def test_stray_is_never_run():
    s = snap("", lane_=("gone",))
    v = resolver.resolve(s)
    assert v.stray == ("gone",) and v.decision == "empty"


# -- to_block -------------------------------------------------------------------

def test_to_block_only_lanes_before_the_chosen_one():
    s = snap("a 2 z\nr 3\nb 4 z\n", abandoned=["z"])
    v = resolver.resolve(s)
    assert v.decision == "run r 3"
    assert [r.slug for r in v.to_block] == ["a"]
    assert v.to_block[0].waits_on == ("z",)


def test_to_block_follows_run_order():
    s = snap("a 2 z\nr 3\nb 4 z\n", lane_=("b",), abandoned=["z"])
    v = resolver.resolve(s)
    assert v.decision == "run r 3"
    assert [r.slug for r in v.to_block] == ["b", "a"]


def test_to_block_all_blocked_when_nothing_ready():
    s = snap("a 2 z\nw 3 p\np 4\nb 5 z\n", abandoned=["z"], running=["p"])
    v = resolver.resolve(s)
    assert v.decision == "wait"
    assert [r.slug for r in v.to_block] == ["a", "b"]


def test_to_block_empty_when_first_is_ready():
    s = snap("r 3\na 2 z\n", abandoned=["z"])
    assert resolver.resolve(s).to_block == ()


# -- stale ----------------------------------------------------------------------

def test_not_stale_when_lane_matches_derivation():
    s = snap("d 1\na 2 d\n", lane_=("d", "a"), named=("a",))
    assert resolver.stale(s) is False
    assert resolver.resolve(s).stale is False
    assert resolver.resolve(snap("a 1\n")).stale is False


def test_stale_after_hand_edit_adding_a_dependency():
    s = snap("d 1\na 2 d,e\ne 3\n", lane_=("d", "a"), named=("a",))
    v = resolver.resolve(s)
    assert v.stale is True
    # list runs the replayed lane as it stands
    assert [r.slug for r in v.rows] == ["d", "a", "e"]


def test_stale_after_hand_edit_dropping_a_dependency():
    s = snap("d 1\na 2\n", lane_=("d", "a"), named=("a",))
    assert resolver.resolve(s).stale is True


def test_not_stale_when_lane_member_merely_finished_or_settled_with_its_named_lane():
    # the named lane and its dependency are done: nothing left to run is out of place
    s = snap("d 1\na 2 d\n", lane_=("d", "a"), named=("a",), integrated=["d"], finished=["a"])
    assert resolver.resolve(s).stale is False


# -- depth ----------------------------------------------------------------------

def test_dependency_chain_5000_deep_resolves_without_recursion_error():
    n = 5000
    queue = "l0 0\n" + "".join(f"l{i} {i} l{i - 1}\n" for i in range(1, n))
    s = snap(queue)
    plan = lane.plan_bump(s, f"l{n - 1}")
    assert isinstance(plan, lane.Plan)
    assert plan.moved == tuple(f"l{i}" for i in range(n))
    s = replace(s, state=LaneState(plan.moved, (f"l{n - 1}",)))
    assert lane.derive(s, s.state.named) == plan.moved
    v = resolver.resolve(s)
    assert v.decision == "run l0 0"
    assert len(v.rows) == n and v.rows[-1].state == "waiting"
    assert v.stale is False
    # un-bumping the bottom is refused (the named top needs it), the top is exact
    r = lane.plan_unbump(s, "l0")
    assert isinstance(r, lane.Refusal) and r.code == "needed_by_named"
    u = lane.plan_unbump(s, f"l{n - 1}")
    assert isinstance(u, lane.Plan) and len(u.removed) == n


def test_dependency_chain_5000_deep_in_reverse_file_order():
    n = 5000
    queue = "".join(f"l{i} {i} l{i - 1}\n" for i in range(n - 1, 0, -1)) + "l0 0\n"
    s = snap(queue)
    plan = lane.plan_bump(s, f"l{n - 1}")
    assert isinstance(plan, lane.Plan)
    assert plan.moved[0] == "l0" and plan.moved[-1] == f"l{n - 1}"
    v = resolver.resolve(replace(s, state=LaneState(plan.moved, (f"l{n - 1}",))))
    assert v.decision == "run l0 0"


def test_dependency_cycle_5000_long_refused_without_recursion_error():
    n = 5000
    queue = f"l0 0 l{n - 1}\n" + "".join(f"l{i} {i} l{i - 1}\n" for i in range(1, n))
    r = lane.plan_bump(snap(queue), "l0")
    assert isinstance(r, lane.Refusal) and r.code == "dependency_cycle"


def test_a_lanes_state_is_found_once_however_many_lanes_wait_on_it(monkeypatch):
    """Each waiting lane's status names its dependencies' states: each was
    found again for every lane naming it, reading its own dependencies, so
    2,000 lanes of 300 dependencies each took 9.9 s to list. Each lane's
    state is now found once a resolve (and once more by ``cycles``)."""
    n, width = 60, 20
    queue = "base 1\n" + "".join(f"l{i} {i + 2} base" + "".join(f",l{j}" for j in range(max(0, i - width), i)) + "\n"
                                 for i in range(n))
    calls = []
    real = resolver._state
    monkeypatch.setattr(resolver, "_state", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    view = resolver.resolve(snap(queue))
    assert len(view.rows) == n + 1 and len(calls) <= 2 * (n + 1), len(calls)


def test_a_lane_waiting_on_many_names_the_first_ten_and_counts_the_rest():
    """A lane's status names the first ``WAITS_NAMED`` dependencies it waits
    on and how many more (its ``waits_on`` keeps every one): a storm of n
    lanes each waiting on n printed n*n names (9.3 MB for 2,000 lanes of
    300 dependencies)."""
    deps = [f"d{i}" for i in range(25)]
    view = resolver.resolve(snap("".join(f"{d} {i + 1}\n" for i, d in enumerate(deps)) + f"z 99 {','.join(deps)}\n"))
    z = next(r for r in view.rows if r.slug == "z")
    assert z.waits_on == tuple(deps)
    named = ", ".join(f"d{i} (not yet run)" for i in range(resolver.WAITS_NAMED))
    assert z.status == f"waits on {named} and 15 more (storm-queue why z names them all)"
    few = next(r for r in resolver.resolve(snap("a 1\nb 2\nc 3 a,b\n")).rows if r.slug == "c")
    assert few.status == "waits on a (not yet run), b (not yet run)"

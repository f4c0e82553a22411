"""Unit tests of storm_queue.lane (pure planning), named after the seven
promises of contract section 3. Snapshots are built directly; every admitted
plan is turned into the event the desk would record and folded with
``fold.apply`` to get the next snapshot, exactly as replay would."""

from __future__ import annotations

from storm_queue.core.records import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.core import fold, lane, resolver
from storm_queue.core import queuetext
from storm_queue.core.fold import EMPTY, LaneState
from storm_queue.core.lane import Plan, Refusal, Snapshot
from storm_queue.core.ledgers import Ledgers


def uncounted(state: LaneState) -> LaneState:
    """``state`` without its count of recorded requests (which every line moves): the lane as it stands."""
    return replace(state, requests={})


def ledgers(integrated=(), abandoned=(), finished=(), running=(), unattended=False):
    return Ledgers(frozenset(integrated), frozenset(abandoned), frozenset(finished),
                   dict.fromkeys(running), unattended)


def snap(queue: str, state: LaneState = EMPTY, **led) -> Snapshot:
    q = queuetext.parse(queue)
    assert q.skipped == (), q.skipped
    return Snapshot({l.slug: l for l in q.lanes}, ledgers(**led), state)


def event(action: str, plan: Plan, **extra) -> dict:
    e = {"action": action, "slug": plan.slug, "moved": list(plan.moved), "removed": list(plan.removed), **extra}
    if plan.noop:
        e["noop"] = plan.noop
    return e


def admit(s: Snapshot, action: str, plan: Plan | Refusal) -> Snapshot:
    assert isinstance(plan, Plan), plan
    return replace(s, state=fold.apply(s.state, event(action, plan)))


def bump(s: Snapshot, slug: str) -> tuple[Snapshot, Plan]:
    plan = lane.plan_bump(s, slug)
    return admit(s, "bump", plan), plan


def unbump(s: Snapshot, slug: str) -> tuple[Snapshot, Plan]:
    plan = lane.plan_unbump(s, slug)
    return admit(s, "unbump", plan), plan


def order(s: Snapshot) -> list[str]:
    return [r.slug for r in resolver.resolve(s).rows]


def consistent(s: Snapshot) -> bool:
    return s.state.lane == lane.derive(s, s.state.named)


# -- promise 1: next means next after whatever is running -------------------

def test_promise1_bumping_a_running_lane_is_admitted_but_never_chosen_again():
    s = snap("a 1\nb 2\nr 3\n", running=["r"])
    s, plan = bump(s, "r")
    assert plan.moved == ("r",) and plan.noop is None
    assert s.state.lane == ("r",)
    view = resolver.resolve(s)
    assert view.rows[0].slug == "r" and view.rows[0].state == "running"
    assert view.decision == "run a 1"


def test_promise1_bump_changes_only_what_starts_after_running():
    s = snap("r 1\na 2\nb 3\n", running=["r"])
    s, _ = bump(s, "b")
    view = resolver.resolve(s)
    assert [(r.slug, r.state) for r in view.rows] == [("b", "ready"), ("r", "running"), ("a", "ready")]
    assert view.decision == "run b 3"


# -- promise 2: priority lanes first, FIFO ----------------------------------

def test_promise2_fifo_by_bump_time():
    s = snap("a 1\nb 2\nc 3\nd 4 b\ne 5\n")
    s, p1 = bump(s, "e")
    s, p2 = bump(s, "c")
    assert (p1.moved, p2.moved) == (("e",), ("c",))
    assert (s.state.lane, s.state.named) == (("e", "c"), ("e", "c"))
    assert order(s) == ["e", "c", "a", "b", "d"]
    assert resolver.resolve(s).decision == "run e 5"


def test_promise2_rebump_keeps_its_place_and_moves_nothing():
    s = snap("a 1\nb 2\nc 3\nd 4 b\ne 5\n")
    s, _ = bump(s, "e")
    s, _ = bump(s, "c")
    s2, plan = bump(s, "e")
    assert plan.moved == () and plan.removed == () and plan.noop is None
    assert "e" in plan.already
    assert uncounted(s2.state) == uncounted(s.state)
    assert order(s2) == ["e", "c", "a", "b", "d"]


def test_promise2_unprioritised_keep_exact_file_order():
    s = snap("q 1\np 2\nz 3\na 4\nm 5\n")
    assert order(s) == ["q", "p", "z", "a", "m"]
    s, _ = bump(s, "a")
    assert order(s) == ["a", "q", "p", "z", "m"]


def test_promise2_bumping_a_dependency_already_pulled_makes_it_named_without_moving():
    s = snap("d 1\na 2 d\n")
    s, _ = bump(s, "a")
    s, plan = bump(s, "d")
    assert plan.moved == ()
    assert s.state.lane == ("d", "a")
    assert s.state.named == ("a", "d")


# -- promise 3: dependencies pulled forward ----------------------------------

def test_promise3_transitive_pull_forward_dependencies_first():
    s = snap("a 1\nb 2\nc 3 b\nd 4 c\ne 5\n")
    s, plan = bump(s, "d")
    assert plan.moved == ("b", "c", "d")
    assert order(s) == ["b", "c", "d", "a", "e"]
    assert resolver.resolve(s).decision == "run b 2"


def test_promise3_independent_dependencies_keep_their_relative_file_order():
    # c is listed before b in a's line, but b comes first in queue.txt
    s = snap("x 0\nb 1\nc 2\na 3 c,b\n")
    _, plan = bump(s, "a")
    assert plan.moved == ("b", "c", "a")


def test_promise3_diamond_dependencies_each_once_dependencies_first():
    s = snap("base 1\nleft 2 base\nright 3 base\ntop 4 right,left\n")
    _, plan = bump(s, "top")
    assert plan.moved == ("base", "left", "right", "top")


def test_promise3_dependency_listed_after_its_user_still_comes_first():
    s = snap("a 1 z\nz 2\n")
    _, plan = bump(s, "a")
    assert plan.moved == ("z", "a")


def test_promise3_already_prioritised_dependency_not_moved_again():
    s = snap("d 1\ne 2 d\na 3 e\n")
    s, _ = bump(s, "e")
    s, plan = bump(s, "a")
    assert plan.moved == ("a",)
    assert set(plan.already) == {"d", "e"}
    assert s.state.lane == ("d", "e", "a")


@pytest.mark.parametrize("queue", ["a 1\ngone 2\nc 3 gone\n", "a 1\nc 3 gone\n"])
def test_promise3_refuses_abandoned_naming_it(queue):
    s = snap(queue, abandoned=["gone"])
    r = lane.plan_bump(s, "c")
    assert isinstance(r, Refusal)
    assert r.code == "dependency_abandoned"
    assert r.names == ("gone",)
    assert "gone" in r.message


def test_promise3_refuses_transitively_abandoned_naming_it():
    s = snap("gone 1\nmid 2 gone\ntop 3 mid\n", abandoned=["gone"])
    r = lane.plan_bump(s, "top")
    assert isinstance(r, Refusal) and r.code == "dependency_abandoned"
    assert r.names == ("gone",) and "gone" in r.message


def test_promise3_refuses_unknown_naming_it():
    s = snap("a 1\nmid 2 nowhere\ntop 3 mid\n")
    r = lane.plan_bump(s, "top")
    assert isinstance(r, Refusal)
    assert r.code == "dependency_unknown"
    assert r.names == ("nowhere",)
    assert "nowhere" in r.message


def test_promise3_refuses_cycle_naming_it():
    s = snap("a 1\nx 7 y\ny 8 x\n")
    r = lane.plan_bump(s, "x")
    assert isinstance(r, Refusal)
    assert r.code == "dependency_cycle"
    assert set(r.names) == {"x", "y"}
    assert "x" in r.message and "y" in r.message


def test_promise3_refuses_dependency_on_a_cycle_naming_the_cycle():
    s = snap("p 1 q\nq 2 p\ntop 3 p\n")
    r = lane.plan_bump(s, "top")
    assert isinstance(r, Refusal) and r.code == "dependency_cycle"
    assert {"p", "q"} <= set(r.names)
    assert "p" in r.message and "q" in r.message


def test_promise3_refuses_self_dependency():
    s = snap("a 1 a\n")
    r = lane.plan_bump(s, "a")
    assert isinstance(r, Refusal) and r.code == "dependency_cycle"
    assert "a" in r.names


def test_promise3_refusal_moves_nothing():
    s = snap("a 1\nb 2\nc 3 gone\n", abandoned=["gone"])
    s, _ = bump(s, "b")
    before = s.state
    assert isinstance(lane.plan_bump(s, "c"), Refusal)
    assert s.state == before


def test_promise3_integrated_and_finished_deps_not_moved():
    s = snap("d 1\ne 2\na 3 d,e\n", integrated=["d"], finished=["e"])
    s, plan = bump(s, "a")
    assert plan.moved == ("a",)
    # a waits for e's review: priority never makes it runnable early
    view = resolver.resolve(s)
    assert view.rows[0].slug == "a" and view.rows[0].state == "waiting"


def test_promise3_integrated_dependency_not_moved_chain():
    s = snap("a 1\nb 2\nc 3 b\nd 4 c\ne 5\n", integrated=["b"])
    s, plan = bump(s, "d")
    assert plan.moved == ("c", "d")
    assert order(s) == ["c", "d", "a", "e"]


def test_promise3_walk_stops_at_a_finished_dependency():
    # f is behind a finished e: not pulled forward, and not a refusal either
    s = snap("f 1\ne 2 f\na 3 e\n", finished=["e"])
    _, plan = bump(s, "a")
    assert plan.moved == ("a",)
    s2 = snap("e 2 gone\na 3 e\n", finished=["e"], abandoned=["gone"])
    _, plan2 = bump(s2, "a")
    assert plan2.moved == ("a",)


def test_promise3_finished_dependency_case_runs_other_lanes_under_unattended():
    s = snap("a 1\nb 2\nc 3 b\n", finished=["b"], unattended=True)
    s, plan = bump(s, "c")
    assert plan.moved == ("c",)
    assert order(s) == ["c", "a", "b"]
    assert resolver.resolve(s).decision == "run a 1"


def test_promise3_unknown_slug_refused():
    r = lane.plan_bump(snap("a 1\n"), "nope")
    assert isinstance(r, Refusal) and r.code == "unknown_slug"
    assert "nope" in r.message


# -- promise 6: un-prioritising is exact, by derivation ----------------------

def test_promise6_derived_unbump_orphan_sequence():
    s0 = snap("x 1\nd 2\na 3 d\nb 4 d\n")
    s, p = bump(s0, "a")
    assert p.moved == ("d", "a")
    s, p = bump(s, "b")
    assert p.moved == ("b",)
    assert consistent(s)
    s, p = unbump(s, "a")
    assert p.removed == ("a",)
    assert (s.state.lane, s.state.named) == (("d", "b"), ("b",))
    assert consistent(s)
    s, p = unbump(s, "b")
    assert set(p.removed) == {"d", "b"} and len(p.removed) == 2
    assert uncounted(s.state) == EMPTY
    assert order(s) == order(s0) == ["x", "d", "a", "b"]
    assert resolver.resolve(s).decision == "run x 1"


def test_promise6_unbump_takes_back_what_the_bump_pulled_forward():
    s = snap("a 1\nb 2\nc 3 b\nd 4 c\ne 5\n")
    s, _ = bump(s, "d")
    s, p = unbump(s, "d")
    assert p.removed == ("b", "c", "d")
    assert uncounted(s.state) == EMPTY
    assert order(s) == ["a", "b", "c", "d", "e"]


def test_promise6_unbump_keeps_a_dependency_another_named_lane_needs():
    s = snap("a 1\nb 2\nc 3 b\nd 4 b\n")
    s, _ = bump(s, "c")
    s, _ = bump(s, "d")
    s, p = unbump(s, "c")
    assert p.removed == ("c",)
    assert order(s) == ["b", "d", "a", "c"]


def test_promise6_unbump_keeps_a_dependency_bumped_by_name():
    s = snap("a 1\nb 2\nc 3 b\n")
    s, _ = bump(s, "c")
    s, _ = bump(s, "b")
    # b is named, but nobody else needs c: unbumping c leaves b
    s, p = unbump(s, "c")
    assert p.removed == ("c",)
    assert (s.state.lane, s.state.named) == (("b",), ("b",))


def test_promise6_unbump_refused_while_needed_by_named():
    s = snap("a 1\nbase 2\nmid 3 base\ntop 4 mid\n")
    s, _ = bump(s, "top")
    before = s.state
    for target in ("base", "mid"):
        r = lane.plan_unbump(s, target)
        assert isinstance(r, Refusal)
        assert r.code == "needed_by_named"
        assert r.names == ("top",)
        assert "top" in r.message
    assert s.state == before


def test_promise6_unbump_refused_names_every_named_user():
    s = snap("d 1\na 2 d\nb 3 d\n")
    s, _ = bump(s, "a")
    s, _ = bump(s, "b")
    s, _ = bump(s, "d")
    r = lane.plan_unbump(s, "d")
    assert isinstance(r, Refusal) and r.code == "needed_by_named"
    assert set(r.names) == {"a", "b"}


def test_promise6_unbump_not_prioritised():
    s = snap("a 1\nb 2\n")
    r = lane.plan_unbump(s, "b")
    assert isinstance(r, Refusal) and r.code == "not_prioritised"
    assert "b" in r.message
    r = lane.plan_unbump(s, "ghost")
    assert isinstance(r, Refusal) and r.code == "not_prioritised"


def test_promise6_unbump_of_a_finished_named_user_does_not_block():
    # a named lane that has finished is no longer live: it needs nothing
    s = snap("d 1\na 2 d\nx 3\n")
    s, _ = bump(s, "a")
    s = replace(s, ledgers=ledgers(finished=["a"]))
    s, p = unbump(s, "d")
    assert "d" in p.removed
    assert "d" not in s.state.lane


def test_promise6_sweep_of_a_named_lane_that_finished():
    s = snap("d 1\na 2 d\nx 3\n")
    s, _ = bump(s, "a")
    assert s.state.lane == ("d", "a")
    # the reviewer integrates d, the runner finishes a
    s = replace(s, ledgers=ledgers(integrated=["d"], finished=["a"]))
    s, p = bump(s, "x")
    assert p.moved == ("x",)
    assert set(p.removed) == {"d", "a"}
    assert s.state.lane == ("x",)
    assert consistent(s)


def test_promise6_sweep_of_a_named_lane_that_settled_on_noop():
    s = snap("d 1\na 2 d\nx 3\n")
    s, _ = bump(s, "a")
    s = replace(s, ledgers=ledgers(integrated=["d", "a"]))
    plan = lane.plan_bump(s, "a")
    assert plan.noop and "integrated" in plan.noop
    s = admit(s, "bump", plan)
    assert s.state.lane == ()
    assert consistent(s)


def test_promise6_rederive_after_hand_edit_adds_new_dependency():
    s = snap("d 1\na 2 d\nx 3\n")
    s, _ = bump(s, "a")
    # hand edit: a now also needs e, a new line
    s = replace(s, lanes=snap("d 1\na 2 d,e\nx 3\ne 4\n").lanes)
    assert resolver.resolve(s).stale
    assert not consistent(s)
    s, p = bump(s, "x")
    assert p.moved == ("e", "x")
    assert p.removed == ()
    assert consistent(s)
    assert not resolver.resolve(s).stale


def test_promise6_rederive_after_hand_edit_sweeps_dropped_dependency():
    s = snap("d 1\na 2 d\nx 3\n")
    s, _ = bump(s, "a")
    s = replace(s, lanes=snap("d 1\na 2\nx 3\n").lanes)
    assert resolver.resolve(s).stale
    s, p = bump(s, "x")
    assert p.removed == ("d",)
    assert s.state.lane == ("a", "x")
    assert consistent(s)


def test_promise6_rederive_after_hand_edit_removing_named_lane_line():
    s = snap("d 1\na 2 d\nx 3\n")
    s, _ = bump(s, "a")
    s = replace(s, lanes=snap("d 1\nx 3\n").lanes)
    s, p = bump(s, "x")
    assert set(p.removed) == {"d", "a"}
    assert s.state.lane == ("x",)
    assert consistent(s)


def test_promise6_unbump_record_lists_exactly_what_it_removed():
    s = snap("p 1\nq 2 p\nr 3 q\nz 4\n")
    s, _ = bump(s, "z")
    s, _ = bump(s, "r")
    before = set(s.state.lane)
    s, p = unbump(s, "r")
    assert set(p.removed) == before - set(s.state.lane) == {"p", "q", "r"}
    assert s.state.lane == ("z",)


# -- promise 7: push ----------------------------------------------------------

def test_promise7_push_new_lane_appends_and_prioritises_with_deps():
    s = snap("a 1\nb 2\nc 3\ne 5\n")
    plan, append = lane.plan_push(s, "z", "26", ("c", "e"))
    assert append is True
    assert isinstance(plan, Plan)
    assert plan.moved == ("c", "e", "z")
    assert plan.noop is None


def test_promise7_push_then_queue_line_reads_back_the_same_lane():
    s = snap("a 1\nb 2")
    plan, append = lane.plan_push(s, "z", "26", ("b",))
    assert append
    text = "a 1\nb 2" + "\n" + queuetext.format_line("z", "26", ("b",))
    s2 = replace(snap(text), state=fold.apply(EMPTY, event("push", plan, appended=True)))
    assert order(s2) == ["b", "z", "a"]
    assert consistent(s2)


def test_promise7_push_issue_mismatch():
    s = snap("a 1\ne 5\n")
    r, append = lane.plan_push(s, "e", "99", None)
    assert append is False
    assert isinstance(r, Refusal) and r.code == "issue_mismatch"
    assert "5" in r.message and "99" in r.message


def test_promise7_push_deps_mismatch():
    s = snap("d 1\nf 2\ne 5 d\n")
    r, append = lane.plan_push(s, "e", "5", ("f",))
    assert append is False
    assert isinstance(r, Refusal) and r.code == "deps_mismatch"
    r, _ = lane.plan_push(s, "e", "5", ())
    assert isinstance(r, Refusal) and r.code == "deps_mismatch"


def test_promise7_push_of_queued_line_without_deps_prioritises_it_as_is():
    s = snap("d 1\ne 5 d\n")
    plan, append = lane.plan_push(s, "e", "5", None)
    assert append is False
    assert isinstance(plan, Plan) and plan.moved == ("d", "e")


def test_promise7_push_of_queued_line_with_same_deps_is_admitted():
    s = snap("d 1\nf 2\ne 5 d,f\n")
    plan, append = lane.plan_push(s, "e", "5", ("f", "d"))
    assert append is False
    assert isinstance(plan, Plan) and plan.moved == ("d", "f", "e")


@pytest.mark.parametrize("where", ["integrated", "abandoned", "finished"])
def test_promise7_push_settled_or_finished_is_noop(where):
    # not in queue.txt any more
    s = snap("a 1\n", **{where: ["e"]})
    plan, append = lane.plan_push(s, "e", "5", None)
    assert append is False
    assert isinstance(plan, Plan)
    assert plan.noop and "e" in plan.noop
    assert plan.moved == () and plan.removed == ()
    s2 = admit(s, "push", plan)
    assert uncounted(s2.state) == EMPTY
    # still in queue.txt
    s = snap("a 1\ne 5\n", **{where: ["e"]})
    plan, append = lane.plan_push(s, "e", "5", None)
    assert append is False and isinstance(plan, Plan) and plan.noop
    assert plan.moved == ()


@pytest.mark.parametrize("where", ["integrated", "abandoned", "finished"])
def test_promise7_bump_settled_or_finished_is_noop(where):
    s = snap("a 1\ne 5\n", **{where: ["e"]})
    s2, plan = bump(s, "e")
    assert plan.noop and "e" in plan.noop
    assert plan.moved == () and plan.removed == ()
    assert uncounted(s2.state) == EMPTY
    assert "e" not in s2.state.named


def test_promise7_push_new_lane_with_unknown_or_abandoned_dep_refused_not_appended():
    s = snap("a 1\n", abandoned=["gone"])
    r, append = lane.plan_push(s, "z", "26", ("nowhere",))
    assert append is False and isinstance(r, Refusal) and r.code == "dependency_unknown"
    assert r.names == ("nowhere",)
    r, append = lane.plan_push(s, "z", "26", ("gone",))
    assert append is False and isinstance(r, Refusal) and r.code == "dependency_abandoned"


def test_promise7_push_self_dependency_refused():
    r, append = lane.plan_push(snap("a 1\n"), "z", "26", ("z",))
    assert append is False and isinstance(r, Refusal) and r.code == "dependency_cycle"


def test_promise7_push_of_a_running_lane_is_admitted():
    s = snap("a 1\nr 2\n", running=["r"])
    plan, append = lane.plan_push(s, "r", "2", None)
    assert append is False and isinstance(plan, Plan) and plan.moved == ("r",)
    s = admit(s, "push", plan)
    assert resolver.resolve(s).decision == "run a 1"


# -- promise 6 as a property ---------------------------------------------------

SLUGS = [f"s{i}" for i in range(7)]


@st.composite
def storms(draw):
    n = draw(st.integers(2, 7))
    lines = []
    for i in range(n):
        deps = draw(st.lists(st.sampled_from(SLUGS[:i]), max_size=3, unique=True)) if i else []
        lines.append(f"{SLUGS[i]} {i + 1}" + (" " + ",".join(deps) if deps else ""))
    order_ = draw(st.permutations(range(n)))  # file order need not follow dependency order
    queue = "\n".join(lines[j] for j in order_) + "\n"
    pick = st.sampled_from(SLUGS[:n] + ["ghost"])
    ops = draw(st.lists(
        st.one_of(
            st.tuples(st.just("bump"), pick),
            st.tuples(st.just("unbump"), pick),
            st.tuples(st.just("push"), st.sampled_from(["n1", "n2"]),
                      st.lists(st.sampled_from(SLUGS[:n]), max_size=2, unique=True)),
            st.tuples(st.just("integrate"), pick),
            st.tuples(st.just("finish"), pick),
            st.tuples(st.just("abandon"), pick),
            # hand edits of queue.txt: a lane's dependencies rewritten (cycles possible), a line dropped
            st.tuples(st.just("edit"), st.sampled_from(SLUGS[:n]),
                      st.lists(st.sampled_from(SLUGS[:n] + ["ghost"]), max_size=2, unique=True)),
            st.tuples(st.just("drop"), st.sampled_from(SLUGS[:n])),
        ),
        max_size=14,
    ))
    return queue, ops


def reaches(s: Snapshot, start: str, goal: str) -> bool:
    seen, stack = set(), [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        if node in seen or node not in s.lanes:
            continue
        seen.add(node)
        stack.extend(s.lanes[node].deps)
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(storms())
def test_promise6_property_replayed_lane_equals_derivation_after_every_admitted_plan(case):
    queue, ops = case
    s = snap(queue)
    integrated, finished, abandoned = set(), set(), set()
    for op in ops:
        kind = op[0]
        if kind in ("integrate", "finish", "abandon"):
            target = {"integrate": integrated, "finish": finished, "abandon": abandoned}[kind]
            target.add(op[1])
            s = replace(s, ledgers=ledgers(integrated=integrated, finished=finished, abandoned=abandoned))
            continue
        if kind == "edit" and op[1] in s.lanes:
            lanes = dict(s.lanes)
            lanes[op[1]] = replace(lanes[op[1]], deps=tuple(op[2]))
            s = replace(s, lanes=lanes)
            continue
        if kind in ("edit", "drop"):
            s = replace(s, lanes={k: v for k, v in s.lanes.items() if k != op[1]})
            continue
        if kind == "bump":
            plan = lane.plan_bump(s, op[1])
        elif kind == "unbump":
            plan = lane.plan_unbump(s, op[1])
        else:
            plan, append = lane.plan_push(s, op[1], "9", tuple(op[2]))
            if append:
                s = lane.with_lane(s, queuetext.Lane(op[1], "9", tuple(op[2]), 1000 + len(s.lanes)))
        if isinstance(plan, Refusal):
            assert plan.code in {"unknown_slug", "dependency_abandoned", "dependency_unknown",
                                 "dependency_cycle", "needed_by_named", "not_prioritised",
                                 "issue_mismatch", "deps_mismatch"}
            continue
        old = s.state
        s = admit(s, kind, plan)
        assert s.state.lane == lane.derive(s, s.state.named), (queue, ops, op)
        # the record is the whole difference
        assert set(plan.moved) == set(s.state.lane) - set(old.lane)
        assert set(plan.removed) == set(old.lane) - set(s.state.lane)
        # dependencies first among what this plan added
        pos = {slug: i for i, slug in enumerate(s.state.lane)}
        for slug in plan.moved:
            for dep in s.lanes[slug].deps:
                if dep in plan.moved and not reaches(s, dep, slug):  # a hand-made cycle has no order
                    assert pos[dep] < pos[slug], (queue, ops, op)
        # nothing in the lane is done, or unknown to queue.txt
        for slug in s.state.lane:
            assert slug in s.lanes and not s.ledgers.done(slug)
        if kind == "unbump":
            assert op[1] not in s.state.named
        elif not plan.noop:
            assert op[1] in s.state.named

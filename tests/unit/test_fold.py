"""Unit tests of storm_queue.core.fold: the replay rules of contract section 4."""

from __future__ import annotations

from storm_queue.core import fold
from storm_queue.core.fold import EMPTY, LaneState
from storm_queue.core.records import replace


def uncounted(state: LaneState) -> LaneState:
    """``state`` without its count of recorded requests (which every line moves): the lane as it stands."""
    return replace(state, requests={})


def ev(action, slug=None, moved=(), removed=(), **extra):
    e = {"action": action, **extra}
    if slug is not None:
        e["slug"] = slug
    if action in ("push", "bump", "unbump"):
        e["moved"] = list(moved)
        e["removed"] = list(removed)
    return e


def test_bump_adds_slug_to_named_and_moved_to_lane():
    s = fold.apply(EMPTY, ev("bump", "a", moved=["d", "a"]))
    assert (s.lane, s.named) == (("d", "a"), ("a",))


def test_push_adds_slug_to_named_and_moved_to_lane():
    s = fold.apply(EMPTY, ev("push", "z", moved=["z"], appended=True))
    assert (s.lane, s.named) == (("z",), ("z",))


def test_push_with_appended_false_still_names():
    s = fold.apply(EMPTY, ev("push", "z", moved=["z"], appended=False))
    assert s.named == ("z",)


def test_noop_bump_and_push_do_not_name():
    for action in ("bump", "push"):
        s = fold.apply(LaneState(("x",), ("x",)), ev(action, "e", noop="e is already integrated"))
        assert (s.lane, s.named) == (("x",), ("x",))


def test_noop_still_applies_moved_and_removed():
    start = LaneState(("x", "y"), ("x",))
    s = fold.apply(start, ev("bump", "e", moved=["w"], removed=["y"], noop="e has finished"))
    assert (s.lane, s.named) == (("x", "w"), ("x",))


def test_moved_already_in_lane_keeps_its_place():
    start = LaneState(("d", "a"), ("a",))
    s = fold.apply(start, ev("bump", "b", moved=["d", "b"]))
    assert s.lane == ("d", "a", "b")
    assert s.named == ("a", "b")


def test_rebump_of_named_keeps_its_place():
    start = LaneState(("e", "c"), ("e", "c"))
    s = fold.apply(start, ev("bump", "e"))
    assert uncounted(s) == start


def test_lane_loses_removed():
    start = LaneState(("d", "a", "b"), ("a", "b"))
    s = fold.apply(start, ev("bump", "x", moved=["x"], removed=["a"]))
    assert s.lane == ("d", "b", "x")
    # removed touches the lane only; the named set changes by the request's slug
    assert s.named == ("a", "b", "x")


def test_unbump_removes_from_named_and_lane():
    start = LaneState(("d", "a", "b"), ("a", "b"))
    s = fold.apply(start, ev("unbump", "a", removed=["a"]))
    assert (s.lane, s.named) == (("d", "b"), ("b",))
    s = fold.apply(s, ev("unbump", "b", removed=["d", "b"]))
    assert uncounted(s) == EMPTY


def test_unbump_of_slug_not_named_changes_named_nothing():
    start = LaneState(("d", "a"), ("a",))
    s = fold.apply(start, ev("unbump", "d", removed=[]))
    assert uncounted(s) == start


def test_removed_not_in_lane_is_harmless():
    start = LaneState(("a",), ("a",))
    assert fold.apply(start, ev("bump", "a", removed=["ghost"])).lane == ("a",)


def test_refused_reset_repair_change_nothing():
    start = LaneState(("d", "a"), ("a",))
    events = [
        {"action": "refused", "requested": "bump", "slug": "a", "code": "not_operator",
         "message": "m", "authorised": False, "moved": ["x"], "removed": ["a"]},
        {"action": "refused", "requested": "unbump", "slug": "a", "code": "needed_by_named",
         "message": "m", "authorised": True},
        {"action": "reset", "reason": "r", "abandons": 10, "moved": ["x"]},
        {"action": "repair", "torn": 3, "side": "priority.log.torn-1"},
    ]
    for e in events:
        after = fold.apply(start, e)
        assert (after.lane, after.named, after.marks, after.runs) == (start.lane, start.named, start.marks, start.runs)
        # a reset raises the floor of fencing tokens above any its abandoned log could hold
        assert after.token_floor == (10 if e["action"] == "reset" else 0)


def test_unknown_future_action_changes_nothing():
    start = LaneState(("a",), ("a",))
    after = fold.apply(start, {"action": "checkpoint", "slug": "b", "moved": ["b"]})
    assert uncounted(after) == start and after.requests == {"checkpoint": {"done": 1}}


def test_apply_does_not_mutate_input():
    start = LaneState(("a",), ("a",))
    fold.apply(start, ev("bump", "b", moved=["b"], removed=["a"]))
    assert (start.lane, start.named) == (("a",), ("a",))


def test_replay_is_fold_of_apply():
    events = [
        ev("bump", "e", moved=["e"]),
        ev("bump", "c", moved=["c"]),
        {"action": "refused", "requested": "bump", "slug": "b", "code": "undeclared_source",
         "message": "m", "authorised": False},
        ev("bump", "e"),
        ev("push", "z", moved=["b", "z"], appended=True),
        ev("unbump", "e", removed=["e"]),
    ]
    assert (fold.replay(events).lane, fold.replay(events).named) == (("c", "b", "z"), ("c", "z"))
    assert fold.replay([]) == EMPTY
    mid = fold.replay(events[:2])
    assert fold.replay(events[2:], mid) == fold.replay(events)


def test_marks_name_the_request_that_put_each_slug_in_the_lane():
    bump_a = ev("bump", "a", moved=["d", "a"], seq=1, at="T1", by="operator:op", reason="outage")
    bump_d = ev("bump", "d", moved=[], seq=2, at="T2", by="source:cron")
    s = fold.replay([bump_a, bump_d])
    assert s.marks["a"] == fold.Mark(1, "T1", "operator:op", "bump", "a", "outage")
    # d entered with a's bump; naming it later marks the request that named it
    assert s.marks["d"] == fold.Mark(2, "T2", "source:cron", "bump", "d", None)


def test_marks_leave_with_their_slug():
    s = fold.replay([ev("bump", "a", moved=["d", "a"], seq=1), ev("unbump", "a", removed=["d", "a"], seq=2)])
    assert s.marks == {}


def test_every_line_is_counted_by_action_and_outcome():
    """issue 34: the fold counts the log's lines, a refusal under the verb it
    refused, a no-op as one, so ``metrics`` reads them without a replay."""
    events = [
        ev("bump", "a", moved=["a"]),
        ev("bump", "a", noop="a is already integrated"),
        {"action": "refused", "requested": "bump", "slug": "zz", "code": "unknown_slug", "message": "m",
         "authorised": True},
        {"action": "refused", "requested": "unbump", "slug": "a", "code": "not_operator", "message": "m",
         "authorised": False},
        ev("unbump", "a", removed=["a"]),
        {"action": "halt", "reason": "r"},
    ]
    state = fold.replay(events)
    assert state.requests == {"bump": {"done": 1, "noop": 1, "refused": 1}, "unbump": {"refused": 1, "done": 1},
                              "halt": {"done": 1}}
    assert fold.replay(events[3:], fold.replay(events[:3])) == state  # a checkpoint's counts carry on
    assert [fold.outcome(e) for e in events] == ["done", "noop", "refused", "refused", "done", "done"]

"""Waivers in the pure core (issue 12 item 4): the fold keeps them, the
resolver counts a waived dependency as integrated (an abandoned one no
longer blocks), the lane neither pulls a waived dependency forward nor
refuses for it, and ``plan_waive`` refuses what is not a dependency and
re-derives the lane exactly."""

from __future__ import annotations

from storm_queue.core import fold, resolver
from storm_queue.core import queuetext
from storm_queue.core.fold import LaneState
from storm_queue.core.lane import Refusal, Snapshot, derive, plan_bump, plan_unbump, plan_waive
from storm_queue.core.ledgers import Ledgers
from storm_queue.core import statebody
from storm_queue.core.records import replace

NOW = "2026-12-01T09:00:00.000000Z"


def snap(queue: str, state: LaneState = fold.EMPTY, integrated=(), abandoned=(), finished=()) -> Snapshot:
    q = queuetext.parse(queue)
    led = Ledgers(frozenset(integrated), frozenset(abandoned), frozenset(finished), {}, False)
    return Snapshot({l.slug: l for l in q.lanes}, led, state, NOW)


def waive_event(slug: str, dep: str, undo: bool = False, seq: int = 5, **extra) -> dict:
    return {"action": "waive", "slug": slug, "dep": dep, "undo": undo, "moved": [], "removed": [], "seq": seq,
            "at": f"2026-12-01T08:00:0{seq % 10}.000000Z", "by": "operator:alice", "reason": "ships later", **extra}


def carried(s: Snapshot, plan, slug: str, dep: str, undo: bool = False) -> Snapshot:
    """The snapshot once the plan's event is folded, as the desk records it."""
    event = waive_event(slug, dep, undo, moved=list(plan.moved), removed=list(plan.removed))
    if plan.noop:
        event["noop"] = plan.noop
    return replace(s, state=fold.apply(s.state, event))


def test_the_fold_keeps_a_waiver_until_its_undo_and_a_noop_changes_nothing():
    state = fold.apply(fold.EMPTY, waive_event("ui", "api"))
    w = state.waivers["ui"]["api"]
    assert (w.seq, w.by, w.reason) == (5, "operator:alice", "ships later")
    assert state.touched["ui"] == w.at  # a waiver may make the lane ready: its time is kept
    same = fold.apply(state, waive_event("ui", "api", seq=6, noop="api is already waived for ui"))
    assert same.waivers == state.waivers
    gone = fold.apply(state, waive_event("ui", "api", undo=True, seq=7))
    assert gone.waivers == {}
    assert fold.apply(gone, waive_event("ui", "api", undo=True, seq=8, noop="not waived")).waivers == {}


def test_waivers_and_touched_survive_the_checkpoint():
    state = fold.replay([waive_event("ui", "api"), waive_event("ui", "schema", seq=6),
                         {"action": "settle", "slug": "schema", "ledger": "integrated", "seq": 7,
                          "at": "2026-12-01T08:10:00.000000Z", "by": "operator:alice"}])
    again = statebody.load_state(statebody.dump_state(state))
    assert again == state and again.waivers["ui"]["schema"].seq == 6
    assert again.touched == {"ui": "2026-12-01T08:00:06.000000Z", "schema": "2026-12-01T08:10:00.000000Z"}


def test_a_waived_abandoned_dependency_no_longer_blocks_and_a_waived_pending_one_no_longer_waits():
    queue = "api 1\nschema 2\nui 3 api,schema\n"
    blocked = snap(queue, abandoned=["api"])
    assert resolver._state(blocked, "ui") == (resolver.BLOCKED, ("api",))
    waived = replace(blocked, state=fold.apply(fold.EMPTY, waive_event("ui", "api")))
    assert resolver._state(waived, "ui") == (resolver.WAITING, ("schema",))  # schema is not waived
    both = replace(waived, state=fold.apply(waived.state, waive_event("ui", "schema", seq=6)))
    assert resolver._state(both, "ui") == (resolver.READY, ())
    view = resolver.resolve(both)
    assert view.to_block == () and view.decision == "run schema 2"  # the order is queue.txt's, unchanged


def test_not_a_dependency_and_an_unknown_slug_are_refused():
    s = snap("api 1\nui 3 api\n")
    refusal, lifts = plan_waive(s, "ui", "schema", False, "operator:alice")
    assert isinstance(refusal, Refusal) and refusal.code == "not_a_dependency" and not lifts
    assert "ui does not depend on schema" in refusal.message
    assert plan_waive(s, "nosuch", "api", False, "operator:alice")[0].code == "unknown_slug"
    # an undo ends a waiver that exists, even once the line no longer names the dependency
    later = snap("api 1\nui 3\n", state=fold.apply(fold.EMPTY, waive_event("ui", "api")))
    plan, _ = plan_waive(later, "ui", "api", True, "operator:alice")
    assert not isinstance(plan, Refusal) and plan.noop is None


def test_waiving_twice_or_undoing_what_is_not_waived_is_a_noop():
    s = snap("api 1\nui 3 api\n")
    assert plan_waive(s, "ui", "api", True, "operator:alice")[0].noop == "api is not waived for ui"
    plan, _ = plan_waive(s, "ui", "api", False, "operator:alice")
    s = carried(s, plan, "ui", "api")
    assert plan_waive(s, "ui", "api", False, "operator:alice")[0].noop == "api is already waived for ui"


def test_a_waived_dependency_is_not_pulled_forward_and_an_undo_pulls_it_again():
    queue = "schema 1\napi 2 schema\nui 3 api\nbilling 4 api\n"
    s = snap(queue)
    bump = plan_bump(s, "ui")
    s = replace(s, state=fold.apply(s.state, {"action": "bump", "slug": "ui", "moved": list(bump.moved),
                                               "removed": [], "at": NOW, "by": "operator:alice", "seq": 1}))
    assert s.state.lane == ("schema", "api", "ui")
    plan, _ = plan_waive(s, "ui", "api", False, "operator:alice")
    assert plan.removed == ("schema", "api") and plan.moved == () and plan.swept == ()
    s = carried(s, plan, "ui", "api")
    assert s.state.lane == ("ui",) and s.state.lane == derive(s, s.state.named)
    assert resolver.resolve(s).decision == "run ui 3"
    # a later bump of another lane that needs api pulls it: the waiver is ui's alone
    assert plan_bump(s, "billing").moved == ("schema", "api", "billing")
    # api may be unbumped now that ui does not need it (it is not in the lane: not_prioritised)
    assert plan_unbump(s, "api").code == "not_prioritised"
    plan, _ = plan_waive(s, "ui", "api", True, "operator:alice")
    assert plan.moved == ("schema", "api") and plan.removed == ()
    s = carried(s, plan, "ui", "api", undo=True)
    assert s.state.lane == ("ui", "schema", "api") and set(s.state.lane) == set(derive(s, s.state.named))


def test_bumping_a_lane_with_a_waived_abandoned_dependency_is_admitted():
    s = snap("api 1\nui 3 api\n", abandoned=["api"])
    assert plan_bump(s, "ui").code == "dependency_abandoned"
    s = replace(s, state=fold.apply(s.state, waive_event("ui", "api")))
    assert plan_bump(s, "ui").moved == ("ui",)


def test_the_waiver_that_lifts_the_last_abandoned_dependency_lifts_nexts_blocked_mark():
    s = snap("api 1\nold 2\nui 3 api,old\n", abandoned=["api", "old"], finished=["ui"])
    plan, lifts = plan_waive(s, "ui", "api", False, "operator:alice", marked_blocked=True)
    assert not lifts  # old still blocks it
    s = carried(s, plan, "ui", "api")
    plan, lifts = plan_waive(s, "ui", "old", False, "operator:alice", marked_blocked=True)
    assert lifts
    # a lane's own result is never lifted
    assert plan_waive(s, "ui", "old", False, "operator:alice", marked_blocked=False)[1] is False

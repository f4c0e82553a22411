"""Issue 33 item 3 in the pure core: the fold keeps each lane's hold (who,
when, why, its line) until an unhold, a no-op changes nothing, and the
checkpoint and the state body keep it; the plans refuse a settled or an
unknown lane and make a repeat a no-op; the resolver gives a held lane the
state ``held`` after settled, finished and running and before everything
else, keeps its place, makes its dependents wait, and never decides to run
it, nor does a claim lease it."""

from __future__ import annotations

import pytest

from storm_queue.core import fold, statebody
from storm_queue.core.config import Policy
from storm_queue.core.fold import EMPTY, Act
from storm_queue.core.hold import hold_words, plan_hold, plan_unhold
from storm_queue.core.lane import Refusal, Snapshot, plan_bump
from storm_queue.core.ledgers import Ledgers
from storm_queue.core.queuetext import Lane
from storm_queue.core.records import replace
from storm_queue.core.resolver import HELD, decided, held_note, resolve
from storm_queue.core.runs import plan_claim

T1, T2 = "2026-12-01T10:00:00.000000Z", "2026-12-01T11:00:00.000000Z"


def ev(action: str, seq: int, at: str = T1, by: str = "operator:op", **extra) -> dict:
    return {"action": action, "seq": seq, "at": at, "by": by, **extra}


def snap(queue: dict[str, tuple[str, ...]], state=EMPTY, integrated=(), abandoned=(), finished=(), running=None) -> Snapshot:
    lanes = {slug: Lane(slug, str(i + 1), deps, i + 1) for i, (slug, deps) in enumerate(queue.items())}
    led = Ledgers(frozenset(integrated), frozenset(abandoned), frozenset(finished), running or {}, False)
    return Snapshot(lanes, led, state, T2)


def test_a_hold_is_kept_with_who_when_and_why_until_an_unhold():
    held = fold.replay([ev("hold", 1, slug="a", reason="vendor")])
    assert held.run("a").held == Act(1, T1, "operator:op", "vendor")
    again = fold.apply(held, ev("hold", 2, at=T2, slug="a", reason="again", noop="already held"))
    assert again.run("a").held == held.run("a").held  # a no-op keeps the first hold
    assert fold.apply(held, ev("unhold", 3, slug="a", reason="ok")).run("a").held is None
    nothing = fold.apply(EMPTY, ev("unhold", 1, slug="a", reason="x", noop="a is not held"))
    assert replace(nothing, requests={}) == EMPTY and "a" not in nothing.runs  # nothing but the count
    assert fold.apply(held, ev("refused", 4, requested="unhold", slug="a", code="not_operator")).run("a").held \
        == held.run("a").held
    assert held.requests == {"hold": {"done": 1}} and again.requests == {"hold": {"done": 1, "noop": 1}}
    # an unhold may make the lane ready: starving counts from it
    assert fold.apply(held, ev("unhold", 3, at=T2, slug="a", reason="ok")).touched == {"a": T2}


def test_the_state_body_keeps_the_hold_and_refuses_one_the_fold_could_not_make():
    s = fold.replay([ev("claim", 1, slug="a", issue="1", holder="h", token=1, ttl=60, expires=T2, attempt=1),
                     ev("hold", 2, slug="a", reason='a "b"'), ev("hold", 3, slug="b", reason="c")])
    assert statebody.load_state(statebody.dump_state(s)) == s
    bad = replace(s, runs={**s.runs, "b": replace(s.run("b"), held=Act("3", T1, "operator:op", "c"))})
    with pytest.raises(ValueError, match="run the fold could not have made"):
        statebody.load_state(statebody.dump_state(bad))


def test_the_plans_refuse_settled_and_unknown_lanes_and_make_repeats_no_ops():
    queue = {"a": (), "b": ()}
    assert plan_hold(snap(queue), "a") == {"action": "hold", "slug": "a"}
    for kwargs, word in (({"integrated": ["a"]}, "integrated"), ({"abandoned": ["a"]}, "abandoned")):
        refused = plan_hold(snap(queue, **kwargs), "a")
        assert isinstance(refused, Refusal) and refused.code == "lane_settled" and word in refused.message
    settled_gone = plan_hold(snap({"b": ()}, integrated=["a"]), "a")  # settled, no longer in queue.txt
    assert isinstance(settled_gone, Refusal) and settled_gone.code == "lane_settled"
    unknown = plan_hold(snap(queue), "z")
    assert isinstance(unknown, Refusal) and unknown.code == "unknown_slug"
    # a finished or running lane may be held: the hold decides only what starts
    assert plan_hold(snap(queue, finished=["a"]), "a") == {"action": "hold", "slug": "a"}
    assert plan_hold(snap(queue, running={"a": None}), "a") == {"action": "hold", "slug": "a"}
    held = fold.replay([ev("hold", 1, slug="a", reason='a "b"')])
    noop = plan_hold(snap(queue, held), "a")["noop"]
    assert noop == f"a is already {hold_words(held.run('a').held)}"
    assert noop.startswith(f"a is already held by operator:op at {T1}") and 'reason "a \\"b\\""' in noop
    assert plan_unhold(snap(queue, held), "a") == {"action": "unhold", "slug": "a"}
    assert plan_unhold(snap(queue), "a") == {"action": "unhold", "slug": "a", "noop": "a is not held"}
    assert plan_unhold(snap(queue), "z")["noop"] == "z is not held"  # not held, whatever else it is


def test_a_held_lane_keeps_its_place_its_dependents_wait_and_nothing_starts_it():
    queue = {"a": (), "b": ("a",), "c": ()}
    held = fold.replay([ev("hold", 1, slug="a", reason="r")])
    view = resolve(snap(queue, held))
    rows = {r.slug: r for r in view.rows}
    assert [r.slug for r in view.rows] == ["a", "b", "c"] and rows["a"].position == 1
    assert rows["a"].state == HELD and rows["a"].status.startswith(f"held by operator:op at {T1}, reason \"r\"")
    assert "storm-queue unhold a --reason TEXT" in rows["a"].status
    assert (rows["b"].state, rows["b"].status) == ("waiting", "waits on a (held)")
    assert view.decision == decided(snap(queue, held)).decision == "run c 3"
    claim = plan_claim(snap(queue, held), Policy(), "r1", 60, 0.0)
    assert (claim.slug, claim.decision) == ("c", "run c 3 1")
    # only held lanes left: wait, saying which and the way on
    only = snap({"a": (), "b": ("a",)}, held)
    view = resolve(only)
    assert view.decision == "wait" and plan_claim(only, Policy(), "r1", 60, 0.0).slug is None
    assert held_note(view).startswith("held, so not started: a (storm-queue unhold SLUG --reason TEXT")
    assert held_note(resolve(snap(queue, held))) == ""  # something runs: no note


@pytest.mark.parametrize("other, state", [
    ({"integrated": ["a"]}, "settled"), ({"finished": ["a"]}, "finished"), ({"running": {"a": None}}, "running"),
    ({"abandoned": ["x"]}, HELD),  # blocked otherwise: the hold comes first
])
def test_a_hold_comes_after_settled_finished_and_running_and_before_the_rest(other, state):
    queue = {"a": ("x",), "x": ()}
    held = fold.replay([ev("hold", 1, slug="a", reason="r")])
    view = resolve(snap(queue, held, **other))
    assert {r.slug: r.state for r in view.rows + view.settled}["a"] == state


def test_a_held_lane_quarantined_or_scheduled_is_held_and_an_unhold_gives_the_rest_back():
    queue = {"a": (), "b": ()}
    state = fold.replay([ev("quarantine", 1, slug="a", attempts=3, budget=3), ev("hold", 2, slug="a", reason="r"),
                         ev("schedule", 3, slug="b", not_before="2099-01-01T00:00:00.000000Z"),
                         ev("hold", 4, slug="b", reason="r")])
    assert [r.state for r in resolve(snap(queue, state)).rows] == [HELD, HELD]
    state = fold.apply(fold.apply(state, ev("unhold", 5, slug="a", reason="ok")), ev("unhold", 6, slug="b", reason="ok"))
    assert [r.state for r in resolve(snap(queue, state)).rows] == ["quarantined", "scheduled"]


def test_a_bump_of_a_held_lane_puts_it_in_the_priority_lane_held():
    queue = {"a": (), "b": ("a",), "c": ()}
    held = fold.replay([ev("hold", 1, slug="a", reason="r")])
    plan = plan_bump(snap(queue, held), "b")
    assert not isinstance(plan, Refusal) and plan.moved == ("a", "b")
    bumped = fold.apply(held, ev("bump", 2, slug="b", issue="2", deps=["a"], moved=list(plan.moved), removed=[]))
    view = resolve(snap(queue, bumped))
    assert [(r.slug, r.prioritised, r.state) for r in view.rows] == [
        ("a", True, HELD), ("b", True, "waiting"), ("c", False, "ready")]
    assert view.decision == "run c 3"
    unheld = fold.apply(bumped, ev("unhold", 3, slug="a", reason="ok"))
    assert resolve(snap(queue, unheld)).decision == "run a 1"  # first, in its place

"""Unit tests of how a lease ends before its lane's work does (issue 20,
items 6 and 7), in the pure core: ``plan_release``, ``plan_recover`` with
``force`` and ``plan_cancel`` (storm_queue.core.runs), the one fence of
renew, finish and release, the fold of ``release`` and ``cancel`` lines,
their schema, and the state body that keeps who cancelled a lane."""

from __future__ import annotations

import pytest

from storm_queue.core import fold, runs, statebody
from storm_queue.core.framing import Malformed, decode, encode
from storm_queue.core.lane import Refusal
from tests.unit.test_runs import POLICY, World, actions, refused


def release(w: World, slug: str, token: int) -> list[dict] | Refusal:
    es = runs.plan_release(w.snap(), w.policy, slug, token)
    if isinstance(es, Refusal):
        return w.refused("release", slug, es)
    w.record(es)
    w._unmark(slug, token)
    return es


def cancel(w: World, slug: str, reason: str = "not wanted") -> list[dict] | Refusal:
    es = runs.plan_cancel(w.snap(), slug)
    if isinstance(es, Refusal):
        return w.refused("cancel", slug, es)
    if not es[0].get("noop") and slug not in w.integrated:
        w.abandoned.add(slug)  # the ledger, before the line
    w.record([{**es[0], "reason": reason}])
    return es


def fenced(w: World, slug: str, token: int) -> set[str]:
    """The codes renew, finish and release of ``token`` are refused with."""
    snap = w.snap()
    answers = [runs.plan_renew(snap, w.policy, slug, token, None, w.t),
               runs.plan_finish(snap, w.policy, slug, token, "ok", None),
               runs.plan_release(snap, w.policy, slug, token)]
    assert all(isinstance(a, Refusal) for a in answers), answers
    return {a.code for a in answers}


def test_release_ends_the_lease_keeps_the_attempt_spent_and_the_lane_ready() -> None:
    w = World("a 1\nb 2\n")
    c = w.claim(holder="r1")
    es = release(w, "a", c.token)
    assert es == [{"action": "release", "slug": "a", "token": 1, "holder": "r1"}]
    run = w.run("a")
    assert (run.lease, run.attempts, run.history[-1].end) == (None, 1, "released")
    assert w.states()["a"] == "ready"
    assert fenced(w, "a", 1) == {"stale_fence"}
    assert w.claim().decision == "run a 1 2"


def test_a_release_of_the_last_attempt_quarantines_and_a_stale_one_changes_nothing() -> None:
    w = World("a 1\n")
    for token in (1, 2):
        w.claim()
        release(w, "a", token)
    refused(release(w, "a", 2), "stale_fence")
    c = w.claim()
    assert actions(release(w, "a", c.token)) == [("release", "a", 3), ("quarantine", "a", None)]
    assert w.states()["a"] == "quarantined"


def test_recover_force_ends_only_a_live_lease_and_its_token_is_stale_afterwards() -> None:
    w = World("a 1\nb 2\n", POLICY)
    w.claim(ttl=10)
    refused(runs.plan_recover(w.snap(), w.policy, "a"), "lease_live")
    es = runs.plan_recover(w.snap(), w.policy, "a", force=True)
    assert es == [{"action": "recover", "slug": "a", "token": 1, "marker": False, "force": True}]
    w.record(es)
    assert (w.run("a").lease, w.run("a").history[-1].end) == (None, "recovered")
    assert fenced(w, "a", 1) == {"stale_fence"}
    refused(runs.plan_recover(w.snap(), w.policy, "b", force=True), "not_running")
    w.claim(ttl=10)
    w.advance(11)  # an orphan: --force takes it back as an expiry, as without it
    assert actions(runs.plan_recover(w.snap(), w.policy, "a", force=True)) == [("expire", "a", 2)]


def test_cancel_of_a_running_lane_revokes_its_lease_and_its_token_is_lane_cancelled() -> None:
    w = World("a 1\nb 2\n", POLICY)
    w.claim()
    es = cancel(w, "a")
    assert es == [{"action": "cancel", "slug": "a", "token": 1}]
    run = w.run("a")
    assert (run.lease, run.history[-1].end) == (None, "cancelled")
    assert (run.cancelled.by, run.cancelled.reason, run.cancelled.seq) == ("operator:op", "not wanted", 2)
    assert fenced(w, "a", 1) == {"lane_cancelled"}
    refusal = runs.plan_renew(w.snap(), w.policy, "a", 1, None, w.t)
    assert "cancelled by operator:op" in refusal.message and "not wanted" in refusal.message
    assert fenced(w, "a", 7) == {"stale_fence"}  # a token that was never the cancelled lease's
    assert w.claim().decision == "run b 2 1"  # a is settled abandoned: never claimed again


def test_cancel_of_a_waiting_lane_of_a_settled_one_and_of_an_unknown_one() -> None:
    w = World("a 1\nb 2 a\n", integrated=["x"])
    assert cancel(w, "b") == [{"action": "cancel", "slug": "b", "token": None}]
    assert w.run("b").cancelled is not None and w.run("b").history == ()
    assert cancel(w, "b")[0]["noop"] == "b is already abandoned"
    assert cancel(w, "x")[0]["noop"] == "x is already integrated"
    refused(cancel(w, "zz"), "unknown_slug")
    assert [e.get("noop") is None for e in w.events if e["action"] == "cancel"] == [True, False, False]


def test_cancel_of_a_lane_settled_by_hand_while_leased_still_revokes_the_lease() -> None:
    w = World("a 1\n")
    w.claim()
    w.abandoned.add("a")  # abandoned.txt edited while the runner works
    es = runs.plan_cancel(w.snap(), "a")
    assert es == [{"action": "cancel", "slug": "a", "token": 1}]


def test_the_schema_of_release_cancel_and_a_forced_recover() -> None:
    head = {"v": 1, "seq": 1, "at": "2026-12-02T00:00:00.000000Z", "by": "operator:op", "prev": None}
    good = [{"action": "release", "slug": "a", "token": 1, "holder": "r1"},
            {"action": "cancel", "slug": "a", "token": None, "reason": "x"},
            {"action": "cancel", "slug": "a", "token": 3},
            {"action": "recover", "slug": "a", "token": 2, "marker": False, "force": True}]
    for body in good:
        assert decode(encode({**head, **body}))["action"] == body["action"]
    bad = [{"action": "release", "slug": "a", "token": 0, "holder": "r1"},
           {"action": "release", "slug": "a", "token": 1},
           {"action": "release", "slug": "a", "token": 1, "holder": "../x"},
           {"action": "cancel", "slug": "a"},
           {"action": "recover", "slug": "a", "token": 2, "marker": False, "force": "yes"}]
    for body in bad:
        with pytest.raises(Malformed):
            decode(encode({**head, **body}))


def test_the_state_body_keeps_who_cancelled_a_lane() -> None:
    w = World("a 1\n")
    w.claim()
    cancel(w, "a")
    state = w.state
    assert state.run("a").cancelled is not None
    assert statebody.load_state(statebody.dump_state(state)) == state
    bad = fold.replace(state, runs={"a": fold.replace(state.run("a"), cancelled="someone")})
    assert statebody.unsound(bad)

"""Unit tests of the pure core of runners (issue 6): the fold of runner
events (storm_queue.core.fold), the plans of claim, renew, finish, recover,
unpark and schedule (storm_queue.core.runs), the states they give lanes
(storm_queue.core.resolver) and the clock a person types (storm_queue.core.clock).

No file, lock or clock is touched: a ``World`` holds queue.txt, the ledgers,
the running markers and the log as a list of events, and applies every plan
the way the desk does (the events of a plan get ``seq``, ``at`` and ``by``;
a refusal is recorded as a ``refused`` line; markers are written and removed
after the log line, result.json before it)."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storm_queue.core import clock, fold, resolver, runs
from storm_queue.core import queuetext
from storm_queue.core.clock import seconds, stamp
from storm_queue.core.config import Policy
from storm_queue.core.fold import EMPTY, LaneState
from storm_queue.core.lane import Refusal, Snapshot
from storm_queue.core.ledgers import Ledgers
from storm_queue.core.records import replace

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
POLICY = Policy(slots=1, attempts=3, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100)


class World:
    """A storm in memory: lanes, ledgers, markers, the log and the clock."""

    def __init__(self, queue: str, policy: Policy = POLICY, *, unattended: bool = False, finished=(),
                 integrated=(), abandoned=(), running=None, t: float = T0) -> None:
        parsed = queuetext.parse(queue)
        assert parsed.skipped == (), parsed.skipped
        self.lanes = {lane.slug: lane for lane in parsed.lanes}
        self.policy = policy
        self.unattended = unattended
        self.finished = set(finished)
        self.integrated = set(integrated)
        self.abandoned = set(abandoned)
        self.running: dict[str, int | None] = dict(running or {})
        self.events: list[dict] = []
        self.t = t

    # -- reading --------------------------------------------------------
    @property
    def now(self) -> str:
        return stamp(self.t)

    @property
    def state(self) -> LaneState:
        return fold.replay(self.events)

    def snap(self) -> Snapshot:
        led = Ledgers(frozenset(self.integrated), frozenset(self.abandoned), frozenset(self.finished),
                      dict(self.running), self.unattended)
        return Snapshot(self.lanes, led, self.state, self.now)

    def view(self) -> resolver.View:
        return resolver.resolve(self.snap())

    def states(self) -> dict[str, str]:
        return {r.slug: r.state for r in self.view().rows}

    def run(self, slug: str) -> fold.Run:
        return self.state.run(slug)

    # -- the clock and hands --------------------------------------------
    def advance(self, dt: float) -> None:
        self.t += dt

    def mark(self, slug: str, token: int | None) -> None:
        """A running marker written by hand (or by an older runner)."""
        self.running[slug] = token

    # -- recording ------------------------------------------------------
    def record(self, bodies, by: str = "operator:op") -> list[dict]:
        out = []
        for body in bodies:
            event = {**body, "seq": len(self.events) + 1, "at": self.now, "by": by}
            self.events.append(event)
            out.append(event)
        return out

    def refused(self, verb: str, slug: str | None, refusal: Refusal, by: str = "operator:op") -> Refusal:
        self.record([{"action": "refused", "requested": verb, "slug": slug, "code": refusal.code,
                      "message": refusal.message, "authorised": True}], by)
        return refusal

    def _unmark(self, slug: str, token: int | None) -> None:
        if slug in self.running and (token is None or self.running[slug] == token):
            del self.running[slug]

    # -- the requests, as the desk carries them out ---------------------
    def claim(self, holder: str = "r1", ttl: int | None = None, by: str = "source:runner") -> runs.Claim:
        c = runs.plan_claim(self.snap(), self.policy, holder, self.policy.ttl if ttl is None else ttl, self.t)
        self.record(c.events, by)
        for slug, token in c.ended:
            self._unmark(slug, token)
        if c.slug is not None:
            self.running[c.slug] = c.token
        return c

    def renew(self, slug: str, token: int, ttl: int | None = None) -> dict | Refusal:
        e = runs.plan_renew(self.snap(), self.policy, slug, token, self.policy.ttl if ttl is None else ttl, self.t)
        if isinstance(e, Refusal):
            return self.refused("renew", slug, e)
        self.record([e])
        return e

    def finish(self, slug: str, token: int, result: str = "ok", note: str | None = None) -> list[dict] | Refusal:
        es = runs.plan_finish(self.snap(), self.policy, slug, token, result, note)
        if isinstance(es, Refusal):
            return self.refused("finish", slug, es)
        if result == "ok":
            self.finished.add(slug)  # result.json before the log line
        self.record(es)
        self._unmark(slug, token)
        return es

    def recover(self, slug: str | None = None, force: bool = False) -> list[dict] | Refusal:
        es = runs.plan_recover(self.snap(), self.policy, slug, force)
        if isinstance(es, Refusal):
            return self.refused("recover", slug, es)
        self.record(es)
        for e in es:
            if e["action"] in ("expire", "recover"):
                self._unmark(e["slug"], e["token"])
        return es

    def unpark(self, slug: str) -> dict | Refusal:
        e = runs.plan_unpark(self.snap(), slug)
        if isinstance(e, Refusal):
            return self.refused("unpark", slug, e)
        self.record([e])
        return e

    def schedule(self, slug: str, not_before: str) -> dict | Refusal:
        e = runs.plan_schedule(self.snap(), slug, not_before)
        if isinstance(e, Refusal):
            return self.refused("schedule", slug, e)
        self.record([e])
        return e


def actions(events) -> list[tuple]:
    return [(e["action"], e["slug"], e.get("token")) for e in events]


def refused(result, code: str) -> Refusal:
    assert isinstance(result, Refusal), result
    assert result.code == code, result
    return result


# -- fencing tokens -------------------------------------------------------


def test_tokens_strictly_increase_across_claim_expire_claim_finish_claim() -> None:
    w = World("a 1\n", Policy(slots=1, attempts=9, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    c1 = w.claim()
    assert (c1.decision, c1.slug, c1.token, c1.expires) == ("run a 1 1", "a", 1, stamp(T0 + 10))
    w.advance(10)  # expires <= now: an orphan
    c2 = w.claim()
    assert actions(c2.events) == [("expire", "a", 1), ("claim", "a", 2)]
    assert c2.decision == "run a 1 2" and c2.ended == (("a", 1),)
    assert actions(w.finish("a", 2, "failed")) == [("finish", "a", 2)]
    c3 = w.claim()
    assert c3.decision == "run a 1 3"
    assert w.finish("a", 3, "ok") == [{"action": "finish", "slug": "a", "token": 3, "result": "ok"}]
    run = w.run("a")
    assert run.token == 3 and run.lease is None
    assert [(a.token, a.end) for a in run.history] == [(1, "expired"), (2, "failed"), (3, "ok")]
    claims = [e["token"] for e in w.events if e["action"] == "claim"]
    assert claims == sorted(set(claims)) == [1, 2, 3]


def test_tokens_are_per_lane_and_folded_from_the_log_not_the_clock() -> None:
    w = World("a 1\nb 2\n", Policy(slots=2, attempts=9, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    assert w.claim().decision == "run a 1 1"
    assert w.claim().decision == "run b 2 1"
    w.t = T0 - 86400  # a clock set back changes no token
    w.finish("a", 1, "failed")
    assert w.claim().decision == "run a 1 2"
    assert fold.replay(w.events).run("a").token == 2 and fold.replay(w.events).run("b").token == 1


def test_recover_of_a_marker_raises_the_lanes_token_floor() -> None:
    w = World("a 1\nb 2\n")
    w.mark("a", 7)  # an older runner's marker, with no lease behind it
    assert resolver.running(w.snap(), "a") == resolver.MARKER
    c = w.claim()
    assert c.decision == "wait" and c.events == ()  # a marker counts as running: the one slot is taken
    refused(runs.plan_recover(w.snap(), w.policy, "b"), "not_running")
    # a runner that takes no leases marks every lane it runs so: only --force takes it back (issue 33, item 10)
    refused(runs.plan_recover(w.snap(), w.policy, "a"), "marker_running")
    es = w.recover("a", force=True)
    assert es == [{"action": "recover", "slug": "a", "token": 7, "marker": True}]
    assert w.run("a").token == 7 and w.run("a").lease is None and w.run("a").attempts == 0
    assert "a" not in w.running
    assert w.claim().decision == "run a 1 8"


def test_a_marker_no_newer_than_the_lanes_last_token_is_not_running() -> None:
    w = World("a 1\nb 2\n", Policy(slots=1, attempts=9, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    w.finish("a", 1, "failed")
    w.mark("a", 1)  # left behind by the lease that ended
    assert resolver.running(w.snap(), "a") == ""
    assert w.claim().decision == "run a 1 2"


def test_recover_of_a_marker_without_a_token_ends_it_and_keeps_the_floor() -> None:
    w = World("a 1\n")
    w.mark("a", None)
    assert w.states() == {"a": "running"}
    assert "marker with no lease" in w.view().rows[0].status
    assert w.recover("a", force=True) == [{"action": "recover", "slug": "a", "token": None, "marker": True}]
    assert w.run("a").token == 0
    assert w.claim().decision == "run a 1 1"


@pytest.mark.parametrize("verb", ["renew", "finish"])
@pytest.mark.parametrize("case", ["absent", "never", "older", "newer", "expired", "finished"])
def test_renew_and_finish_need_the_live_leases_token(verb: str, case: str) -> None:
    w = World("a 1\nb 2\n", Policy(slots=1, attempts=9, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    w.finish("a", 1, "failed")
    w.claim()  # token 2 is live on a
    slug, token, words = {
        "absent": ("b", 1, "b holds no lease"),
        "never": ("zz", 1, "zz holds no lease"),
        "older": ("a", 1, "token 1 is older than the live lease's token 2 on a"),
        "newer": ("a", 3, "token 3 is newer than the live lease's token 2 on a"),
        "expired": ("a", 2, f"the lease of token 2 on a expired at {stamp(T0 + 10)}"),
        "finished": ("a", 2, "a holds no lease (its last token was 2)"),
    }[case]
    if case == "expired":
        w.advance(10)
    if case == "finished":
        w.finish("a", 2, "ok")
    before = w.state
    r = w.renew(slug, token) if verb == "renew" else w.finish(slug, token, "ok")
    refused(r, "stale_fence")
    assert words in r.message and f"may not {verb}" in r.message
    assert w.events[-1]["action"] == "refused" and w.events[-1]["code"] == "stale_fence"
    assert replace(w.state, requests={}) == replace(before, requests={})  # recorded, changes nothing ...
    assert w.state.requests[verb]["refused"] == before.requests.get(verb, {}).get("refused", 0) + 1  # ... but its count
    if case != "finished":
        assert "a" not in w.finished


def test_the_fold_ignores_runner_events_whose_token_is_not_the_live_leases() -> None:
    w = World("a 1\n", Policy(slots=1, attempts=9, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    w.finish("a", 1, "failed")
    w.claim()
    live = w.state
    lease = live.run("a").lease
    assert lease is not None and lease.token == 2
    for action, extra in (("renew", {"expires": stamp(T0 + 999)}), ("finish", {"result": "ok"}),
                          ("finish", {"result": "failed"}), ("expire", {"expired": lease.expires})):
        older = {"action": action, "slug": "a", "token": 1, "seq": 99, "at": stamp(T0 + 1), "by": "x", **extra}
        assert replace(fold.apply(live, older), requests=live.requests) == live  # counted, and nothing more
        newer = {**older, "token": 5}
        got = fold.apply(live, newer).run("a")
        # a newer token is only observed: it raises the floor, ends nothing
        assert got == replace(live.run("a"), token=5)
    # with no lease at all, a finish creates none
    w.finish("a", 2, "ok")
    ended = w.state
    late = {"action": "finish", "slug": "a", "token": 2, "result": "failed", "seq": 99, "at": w.now, "by": "x"}
    assert replace(fold.apply(ended, late), requests=ended.requests) == ended  # counted, and nothing more


def test_the_fold_of_a_claim_and_how_each_attempt_ends() -> None:
    w = World("a 1\n", Policy(slots=1, attempts=9, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim(holder="h1", by="source:cron")
    run = w.run("a")
    assert run.lease == fold.Lease("h1", 1, "source:cron", stamp(T0), stamp(T0 + 10), 10)
    assert run.attempts == 1 and run.history == (fold.Attempt(1, "h1", stamp(T0)),)
    w.advance(1)
    w.finish("a", 1, "failed", note="boom")
    assert w.run("a").history == (fold.Attempt(1, "h1", stamp(T0), "failed", stamp(T0 + 1), "boom"),)
    w.claim(holder="h2")
    w.advance(10)
    w.recover()
    w.mark("a", 5)
    w.recover("a", force=True)
    w.claim(holder="h3")
    w.finish("a", 6, "ok")
    run = w.run("a")
    assert [(a.token, a.holder, a.end) for a in run.history] == [
        (1, "h1", "failed"), (2, "h2", "expired"), (6, "h3", "ok")]
    assert run.attempts == 3 and run.token == 6 and run.quarantined is None


# -- slots ------------------------------------------------------------------


def test_claim_answers_wait_while_slots_lanes_hold_leases() -> None:
    w = World("a 1\nb 2\nc 3\n", Policy(slots=2, attempts=3, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    assert w.claim().decision == "run a 1 1"
    assert w.claim().decision == "run b 2 1"
    n = len(w.events)
    c = w.claim()
    assert (c.decision, c.slug, c.token, c.events) == ("wait", None, None, ())
    assert len(w.events) == n
    assert c.view is not None and [r.state for r in c.view.rows] == ["running", "running", "ready"]
    w.finish("b", 1, "failed")
    assert w.claim().decision == "run b 2 2"  # b is first in run order among the ready
    w.finish("a", 1, "ok")
    assert w.claim().decision == "review a"  # not unattended: a finished lane holds the storm, as next


def test_an_orphan_is_expired_first_so_it_frees_its_slot() -> None:
    w = World("a 1\nb 2\n")
    w.claim()
    w.schedule("a", stamp(T0 + 3600))  # when a comes back it waits its time
    assert w.claim().decision == "wait"
    w.advance(10)
    assert resolver.running(w.snap(), "a") == resolver.ORPHAN
    c = w.claim()
    assert actions(c.events) == [("expire", "a", 1), ("claim", "b", 1)]
    assert c.decision == "run b 2 1"
    assert w.states() == {"a": "scheduled", "b": "running"}


def test_an_expired_lane_first_in_run_order_is_claimed_again_by_the_same_claim() -> None:
    w = World("a 1\nb 2\n")
    w.claim(holder="dead")
    w.advance(25)
    c = w.claim(holder="alive")
    assert actions(c.events) == [("expire", "a", 1), ("claim", "a", 2)]
    assert c.events[0]["expired"] == stamp(T0 + 10)
    assert w.run("a").lease.holder == "alive" and w.running == {"a": 2}


@pytest.mark.parametrize("slots,decision", [(1, "wait"), (2, "run a 1 1"), (3, "run a 1 1")])
def test_a_marker_only_lane_counts_as_running(slots: int, decision: str) -> None:
    w = World("a 1\nc 3\n", Policy(slots=slots, attempts=3, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.mark("c", None)
    assert w.claim().decision == decision


def test_the_wait_line_lists_finished_lanes_under_unattended_as_next_does() -> None:
    w = World("f 1\na 2\nb 3\n", unattended=True, finished=["f"])
    assert w.view().decision == "run a 2"
    assert w.claim().decision == "run a 2 1"
    c = w.claim()  # b is ready, but the one slot is taken
    assert c.decision == "wait f" and c.events == ()
    # next itself says wait f when nothing is ready
    w2 = World("f 1\na 2\n", unattended=True, finished=["f"], running={"a": None})
    assert w2.view().decision == "wait f" == w2.claim().decision


def test_claim_answers_what_next_answers_when_nothing_runs() -> None:
    assert World("", POLICY).claim().decision == "empty"
    assert World("a 1\n", integrated=["a"]).claim().decision == "empty"
    assert World("a 1 gone\n", abandoned=["gone"]).claim().decision == "wait"
    c = World("a 1\nb 2\n", finished=["a"]).claim()
    assert (c.decision, c.events) == ("review a", ())


# -- orphans ------------------------------------------------------------------


def test_a_lease_whose_expiry_has_come_is_an_orphan() -> None:
    w = World("a 1\n")
    w.claim(holder="h")
    w.advance(9.999999)
    assert resolver.running(w.snap(), "a") == resolver.LEASE
    assert "running now: held by h, token 1" in w.view().rows[0].status
    assert runs.expiries(w.snap(), w.policy) == []
    w.advance(0.000001)  # expires == now
    assert resolver.running(w.snap(), "a") == resolver.ORPHAN
    row = w.view().rows[0]
    assert (row.state, row.running) == ("running", "orphan")
    assert "orphaned" in row.status
    assert runs.expiries(w.snap(), w.policy) == [{"action": "expire", "slug": "a", "token": 1, "expired": stamp(T0 + 10)}]
    # a snapshot without a time never counts a lease as expired
    assert resolver.running(replace(w.snap(), now=""), "a") == resolver.LEASE


def test_recover_expires_every_orphan_and_refuses_what_it_cannot_take_back() -> None:
    w = World("a 1\nb 2\nc 3\n", Policy(slots=3, attempts=3, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    w.claim(ttl=100)
    assert w.recover() == []  # nothing orphaned yet
    refused(w.recover("a"), "lease_live")
    refused(w.recover("c"), "not_running")
    refused(w.recover("nowhere"), "unknown_slug")
    w.advance(10)
    assert actions(w.recover()) == [("expire", "a", 1)]
    assert w.running == {"b": 1}
    w.advance(100)
    assert actions(w.recover("b")) == [("expire", "b", 1)]
    assert w.running == {} and w.states() == {"a": "ready", "b": "ready", "c": "ready"}


def test_an_expire_guarded_by_an_old_token_ends_nothing() -> None:
    """Two requests that both saw an orphan: the second expire, replayed
    after a new claim, names the old token and leaves the new lease alone."""
    w = World("a 1\n")
    w.claim()
    w.advance(10)
    stale = runs.expiries(w.snap(), w.policy)
    w.claim()
    live = w.state
    again = fold.replay([{**e, "seq": 50, "at": w.now, "by": "x"} for e in stale], live)
    assert replace(again, requests=live.requests) == live  # counted, and nothing more


# -- retry budget and quarantine ----------------------------------------------


def test_every_claim_spends_an_attempt_and_a_failure_at_the_budget_quarantines() -> None:
    w = World("a 1\nb 2\n", Policy(slots=1, attempts=2, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    assert w.run("a").attempts == 1
    assert actions(w.finish("a", 1, "failed")) == [("finish", "a", 1)]
    w.claim()
    assert w.run("a").attempts == 2
    es = w.finish("a", 2, "failed")
    assert es[1] == {"action": "quarantine", "slug": "a", "attempts": 2, "budget": 2}
    run = w.run("a")
    assert run.quarantined == w.now and run.attempts == 2
    row = w.view().rows[0]
    assert row.state == "quarantined" and "quarantined after 2 attempts" in row.status
    assert w.claim().decision == "run b 2 1"
    w.finish("b", 1, "failed")
    w.claim()
    w.finish("b", 2, "failed")
    c = w.claim()
    assert c.decision == "wait" and c.events == ()  # quarantined lanes are never the decision


# -- the storm's own backoff (issue 33, item 1) ------------------------------

BACKOFF = Policy(slots=1, attempts=5, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100, retry_delay=30,
                 retry_max=100)


@pytest.mark.parametrize(("delay", "most", "attempts", "seconds_"), [
    (30, 100, 1, 30), (30, 100, 2, 60), (30, 100, 3, 100), (30, 100, 4, 100), (1, 600, 10, 512),
    (1, 600, 11, 600), (0, 600, 1, 0), (0, 600, 7, 0), (700, 600, 1, 600), (5, 316_224_000, 10 ** 6, 316_224_000)])
def test_the_backoff_doubles_with_each_attempt_up_to_retry_max(delay, most, attempts, seconds_) -> None:
    assert runs.backoff(replace(BACKOFF, retry_delay=delay, retry_max=most), attempts) == seconds_


@settings(max_examples=200)
@given(delay=st.integers(0, 316_224_000), most=st.integers(1, 316_224_000), attempts=st.integers(1, 10 ** 9))
def test_the_backoff_is_the_formula_capped_at_retry_max(delay, most, attempts) -> None:
    """retry_delay * 2**(attempts-1), at most retry_max (the doubling stops early, changing nothing)."""
    got = runs.backoff(replace(BACKOFF, retry_delay=delay, retry_max=most), attempts)
    assert got == (0 if delay == 0 else min(most, delay * 2 ** min(attempts - 1, 64)))


def test_a_failed_finish_carries_the_backoff_and_the_lane_is_scheduled_until_then() -> None:
    w = World("a 1\nb 2\n", BACKOFF, unattended=True)
    w.claim()
    [finish] = w.finish("a", 1, "failed", note="exit 1")
    assert finish["not_before"] == stamp(T0 + 30) and w.run("a").not_before == stamp(T0 + 30)
    assert list(finish) == ["action", "slug", "token", "result", "note", "not_before"]  # the line's field order
    assert w.states() == {"a": "scheduled", "b": "ready"}
    assert w.claim().decision == "run b 2 1"  # passed over
    w.finish("b", 1, "ok")
    w.advance(29.999999)
    assert w.claim().decision == "wait b"
    w.advance(0.000001)
    assert w.claim().decision == "run a 1 2"  # due: claimed again
    [again] = w.finish("a", 2, "failed")
    assert again["not_before"] == stamp(w.t + 60)  # doubled
    w.advance(60)
    w.claim()
    assert w.finish("a", 3, "failed")[0]["not_before"] == stamp(w.t + 100)  # capped at retry_max


def test_no_backoff_at_retry_delay_0_after_an_ok_or_on_the_failure_that_quarantines() -> None:
    w = World("a 1\nb 2\n", replace(BACKOFF, retry_delay=0))
    w.claim()
    [finish] = w.finish("a", 1, "failed")
    assert "not_before" not in finish and w.run("a").not_before is None
    assert w.claim().decision == "run a 1 2"  # at once, as before the backoff
    w = World("a 1\nb 2\n", replace(BACKOFF, attempts=2))
    w.claim()
    assert "not_before" in w.finish("a", 1, "failed")[0]
    w.advance(30)
    w.claim()
    es = w.finish("a", 2, "failed")  # the last attempt: quarantined, no schedule on top
    assert [e["action"] for e in es] == ["finish", "quarantine"] and "not_before" not in es[0]
    assert w.run("a").not_before == stamp(T0 + 30)  # the earlier backoff's, long past
    assert w.claim().decision == "run b 2 1"
    assert "not_before" not in w.finish("b", 1, "ok")[0]


def test_unpark_starts_the_backoff_again_from_retry_delay() -> None:
    w = World("a 1\n", replace(BACKOFF, attempts=2))
    for token in (1, 2):
        w.claim()
        w.finish("a", token, "failed")
        w.advance(30)
    assert w.states() == {"a": "quarantined"}
    w.unpark("a")
    w.claim()
    assert w.finish("a", 3, "failed")[0]["not_before"] == stamp(w.t + 30)  # attempts start again at 1


def test_the_fold_takes_a_finish_lines_not_before_as_a_schedule_lines() -> None:
    base = [{"action": "claim", "slug": "a", "issue": "1", "holder": "h", "token": 1, "ttl": 10,
             "expires": stamp(T0 + 10), "attempt": 1, "at": stamp(T0), "by": "runner:r"}]
    finish = {"action": "finish", "slug": "a", "token": 1, "result": "failed", "not_before": stamp(T0 + 99),
              "at": stamp(T0 + 1), "by": "runner:r"}
    schedule = {"action": "schedule", "slug": "a", "not_before": stamp(T0 + 99), "at": stamp(T0 + 1), "by": "operator:o"}
    by_finish = fold.replay([*base, finish]).run("a")
    assert by_finish.not_before == fold.replay([*base, schedule]).run("a").not_before == stamp(T0 + 99)
    assert by_finish.lease is None and by_finish.history[-1].end == "failed"


def test_an_expiry_that_spends_the_last_attempt_quarantines() -> None:
    w = World("a 1\nb 2\n", Policy(slots=1, attempts=1, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    w.advance(10)
    c = w.claim()
    assert actions(c.events) == [("expire", "a", 1), ("quarantine", "a", None), ("claim", "b", 1)]
    assert w.states()["a"] == "quarantined"
    w.advance(10)
    assert actions(w.recover("b")) == [("expire", "b", 1), ("quarantine", "b", None)]


def test_unpark_resets_the_attempts_and_keeps_the_history() -> None:
    w = World("a 1\n", Policy(slots=1, attempts=1, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    refused(w.unpark("a"), "not_quarantined")
    w.claim()
    w.finish("a", 1, "failed")
    parked = w.run("a")
    assert parked.quarantined is not None
    assert w.unpark("a") == {"action": "unpark", "slug": "a"}
    run = w.run("a")
    assert (run.attempts, run.quarantined, run.history, run.token) == (0, None, parked.history, 1)
    assert w.claim().decision == "run a 1 2"
    assert len(w.run("a").history) == 2
    refused(w.unpark("a"), "not_quarantined")


def test_a_finished_lane_is_never_quarantined() -> None:
    pol = Policy(slots=1, attempts=1, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100)
    w = World("a 1\nb 2\n", pol, unattended=True)
    w.claim()
    assert w.finish("a", 1, "ok") == [{"action": "finish", "slug": "a", "token": 1, "result": "ok"}]
    assert runs.expiries(w.snap(), w.policy) == []
    # result.json written, the runner died before its finish line: the expiry does not quarantine
    w.claim()  # b
    w.finished.add("b")
    w.advance(10)
    assert actions(w.recover()) == [("expire", "b", 1)]
    assert w.run("b").quarantined is None and w.run("a").quarantined is None
    assert w.claim().decision == "wait a b"


def test_lowering_the_budget_quarantines_an_idle_lane_that_spent_it() -> None:
    w = World("a 1\nb 2\nc 3\n", Policy(slots=3, attempts=3, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    for slug in "abc":
        w.claim()
    w.finish("a", 1, "failed")
    w.finish("b", 1, "failed")
    w.finish("c", 1, "ok")
    w.finished.discard("c")  # a lane whose last attempt ended ok is not re-quarantined without its result.json
    w.claim()  # a again: held, so not idle
    lowered = replace(w.policy, attempts=1)
    assert runs.expiries(w.snap(), lowered) == [{"action": "quarantine", "slug": "b", "attempts": 1, "budget": 1}]
    w.policy = lowered
    c = w.claim()
    assert actions(c.events) == [("quarantine", "b", None), ("claim", "c", 2)]
    assert c.decision == "run c 3 2"
    assert w.states() == {"a": "running", "b": "quarantined", "c": "running"}


def test_a_lane_gone_from_the_queue_is_not_quarantined_when_idle() -> None:
    w = World("a 1\n", Policy(slots=1, attempts=1, ttl=10, ttl_min=1, ttl_max=1000, max_lease_age=100))
    w.claim()
    w.finish("a", 1, "ok")
    w.finished.discard("a")
    w.lanes = {}
    assert runs.expiries(w.snap(), w.policy) == []


# -- renew and TTLs -----------------------------------------------------------


def test_renew_extends_the_lease_from_now() -> None:
    w = World("a 1\n")
    w.claim()
    w.advance(5)
    assert w.renew("a", 1, ttl=20) == {"action": "renew", "slug": "a", "token": 1, "ttl": 20, "expires": stamp(T0 + 25)}
    lease = w.run("a").lease
    assert (lease.claimed, lease.expires) == (stamp(T0), stamp(T0 + 25))
    w.advance(15)
    assert resolver.running(w.snap(), "a") == resolver.LEASE  # past the first expiry, held by the renewal
    assert w.claim().events == ()


def test_a_lease_is_not_renewed_past_max_lease_age_from_its_claim() -> None:
    w = World("a 1\n")  # max_lease_age 100
    w.claim()
    for _ in range(9):
        w.advance(9)
        assert w.renew("a", 1)["action"] == "renew"
    w.advance(9)  # 90 s after the claim: 90 + 10 == 100 is still allowed
    assert w.renew("a", 1)["expires"] == stamp(T0 + 100)
    w.advance(1)
    r = refused(w.renew("a", 1), "lease_age_exceeded")
    assert stamp(T0 + 100) in r.message and "max_lease_age 100" in r.message
    assert w.renew("a", 1, ttl=9)["expires"] == stamp(T0 + 100)


def test_ttl_refusal() -> None:
    pol = Policy(slots=1, attempts=3, ttl=10, ttl_min=5, ttl_max=1000, max_lease_age=100)
    assert runs.ttl_refusal(pol, 5) is None and runs.ttl_refusal(pol, 100) is None
    for ttl in (0, 4, 1001, -1):
        r = refused(runs.ttl_refusal(pol, ttl), "lease_ttl_out_of_range")
        assert f"{ttl} s" in r.message and "5..1000" in r.message
    refused(runs.ttl_refusal(pol, 101), "lease_age_exceeded")
    w = World("a 1\n", pol)
    w.claim()
    refused(w.renew("a", 1, ttl=4), "lease_ttl_out_of_range")
    refused(w.renew("a", 1, ttl=1001), "lease_ttl_out_of_range")
    refused(w.renew("a", 2, ttl=1001), "stale_fence")  # the fence is judged first
    assert w.run("a").lease.expires == stamp(T0 + 10)


# -- schedules -------------------------------------------------------------------


def test_a_scheduled_lane_keeps_its_place_and_is_passed_over() -> None:
    w = World("a 1\nb 2\nc 3\n")
    w.schedule("a", stamp(T0 + 60))
    view = w.view()
    assert [(r.position, r.slug, r.state) for r in view.rows] == [(1, "a", "scheduled"), (2, "b", "ready"), (3, "c", "ready")]
    assert view.rows[0].status == f"scheduled: not before {stamp(T0 + 60)}"
    assert view.decision == "run b 2"
    w.schedule("b", stamp(T0 + 30))
    assert w.view().decision == "run c 3"
    w.schedule("c", stamp(T0 + 90))
    assert w.view().decision == "wait" and w.claim().decision == "wait"
    w.advance(30)  # not_before == now: its time has come
    assert w.states() == {"a": "scheduled", "b": "ready", "c": "scheduled"}
    w.advance(30)
    assert w.claim().decision == "run a 1 1"


def test_a_scheduled_prioritised_lane_keeps_its_place_in_the_lane() -> None:
    w = World("a 1\nb 2\nc 3\n")
    w.record([{"action": "bump", "slug": "c", "moved": ["c"], "removed": []},
              {"action": "bump", "slug": "b", "moved": ["b"], "removed": []}])
    w.schedule("c", stamp(T0 + 60))
    rows = w.view().rows
    assert [(r.slug, r.prioritised, r.state) for r in rows] == [
        ("c", True, "scheduled"), ("b", True, "ready"), ("a", False, "ready")]
    assert w.claim().decision == "run b 2 1"
    w.advance(60)
    w.finish("b", 1, "failed")
    assert w.claim().decision == "run c 3 1"


def test_push_with_not_before_sets_it_and_schedule_plans() -> None:
    push = {"action": "push", "slug": "z", "issue": "9", "deps": [], "moved": ["z"], "removed": [], "appended": True,
            "not_before": stamp(T0 + 60)}
    s = fold.apply(EMPTY, push)
    assert s.lane == ("z",) and s.run("z").not_before == stamp(T0 + 60)
    assert fold.apply(EMPTY, {**push, "noop": "z is already integrated"}).run("z").not_before is None
    snap = Snapshot(World("z 9\n").lanes, Ledgers(frozenset(), frozenset(), frozenset(), {}, False), s, stamp(T0))
    assert resolver.resolve(snap).rows[0].state == "scheduled"
    assert resolver.resolve(replace(snap, now=stamp(T0 + 60))).rows[0].state == "ready"
    assert resolver.resolve(replace(snap, now="")).rows[0].state == "scheduled"  # no time: never come
    assert runs.plan_schedule(snap, "z", stamp(T0 + 60))["noop"] == f"z is already scheduled not before {stamp(T0 + 60)}"
    assert runs.plan_schedule(snap, "z", stamp(T0)) == {"action": "schedule", "slug": "z", "not_before": stamp(T0)}
    refused(runs.plan_schedule(snap, "q", stamp(T0)), "unknown_slug")


def test_a_schedule_in_the_past_is_ready_now() -> None:
    w = World("a 1\nb 2\n")
    w.schedule("a", stamp(T0 - 1))
    assert w.states() == {"a": "ready", "b": "ready"}


# -- idempotency keys in the fold -------------------------------------------------


def keyed(action: str, seq: int, by: str, key: str, fingerprint: str, **extra) -> dict:
    return {"action": action, "seq": seq, "at": stamp(T0 + seq), "by": by, "key": key, "fingerprint": fingerprint, **extra}


def test_the_first_event_per_principal_and_key_binds() -> None:
    first = keyed("schedule", 1, "source:cron", "k1", "f1", slug="a", not_before=stamp(T0))
    conflict = keyed("refused", 2, "source:cron", "k1", "f2", requested="schedule", slug="a",
                     code="idempotency_conflict", message="m", authorised=True)
    other = keyed("schedule", 3, "operator:op", "k1", "f3", slug="b", not_before=stamp(T0))
    unkeyed = {"action": "unpark", "slug": "a", "seq": 4, "at": stamp(T0), "by": "source:cron"}
    s = fold.replay([first, conflict, other, unkeyed])
    assert s.keys == {"source:cron": {"k1": fold.Keyed("f1", 1, first)},
                      "operator:op": {"k1": fold.Keyed("f3", 3, other)}}


def test_a_refusal_made_under_a_new_key_binds_it() -> None:
    r = keyed("refused", 1, "source:cron", "k", "f", requested="finish", slug="a", code="stale_fence", message="m",
              authorised=True)
    later = keyed("finish", 2, "source:cron", "k", "f", slug="a", token=1, result="ok")
    s = fold.replay([r, later])
    assert s.keys["source:cron"]["k"] == fold.Keyed("f", 1, r)
    assert s.runs == {"a": fold.Run(token=1)}  # the stray finish ended nothing, it was only observed


# -- the clock a person types ----------------------------------------------------

AT = T0 + 0.25


@pytest.mark.parametrize("text,expected", [
    ("now", stamp(AT)),
    (" now ", stamp(AT)),
    ("+0s", stamp(AT)),
    ("+90s", stamp(AT + 90)),
    ("+90m", stamp(AT + 5400)),
    ("+2h", stamp(AT + 7200)),
    ("+1d", stamp(AT + 86400)),
    ("2026-12-01", "2026-12-01T00:00:00.000000Z"),
    ("1970-01-01", "1970-01-01T00:00:00.000000Z"),
    ("2026-12-01T08:00:00Z", "2026-12-01T08:00:00.000000Z"),
    ("2026-12-01T09:00:00+01:00", "2026-12-01T08:00:00.000000Z"),
    ("2026-12-01T03:30:00-04:30", "2026-12-01T08:00:00.000000Z"),
    ("2026-12-01T08:00:00.123456Z", "2026-12-01T08:00:00.123456Z"),
    ("2026-12-01T08:00:00.5+00:00", "2026-12-01T08:00:00.500000Z"),
    ("2026-12-01t08:00:00Z", "2026-12-01T08:00:00.000000Z"),
    ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59.000000Z"),
])
def test_parse_accepts(text: str, expected: str) -> None:
    assert clock.parse(text, AT) == expected


@pytest.mark.parametrize("text", [
    "", "later", "NOW", "+90", "+m", "+-5m", "+ 5m", "+5M", "+5w", "+1.5h", "90m",
    "+\u0661\u0662m",  # Arabic-Indic digits
    "+\uff11\uff10m",  # fullwidth digits
    "\uff12\uff10\uff12\uff16-12-01",
    "2026-12-01T08:00:00",  # no zone
    "2026-12-01T08:00:00.000000",
    "2026-12-01 08:00:00Z",
    "2026-12-01 08:00:00",
    "2026-02-30", "2026-13-01", "2026-12-01T24:00:01Z", "2026-12-31T23:59:60Z",
    "2026-12-0\u0661", "2026-12-01T08:00:0\u0661Z",
    "1969-12-31", "1969-12-31T23:59:59Z", "0001-01-01", "9999-12-31T23:59:59-01:00",
    "+99999999999d", "+" + "9" * 30 + "s",
])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError) as err:
        clock.parse(text, AT)
    assert repr(text.strip()) in str(err.value)


def test_parse_accepts_a_lowercase_z_as_rfc_3339_allows() -> None:
    """RFC 3339 section 5.6: "T" and "Z" may be lower case. clock.parse
    accepts a lowercase t, and checks for a lowercase z, but replaces only
    an uppercase Z before fromisoformat, so a lowercase z is refused."""
    assert clock.parse("2026-12-01T08:00:00z", AT) == "2026-12-01T08:00:00.000000Z"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 253402300799 * 10**6 + 999000))
def test_stamp_and_seconds_round_trip(micros: int) -> None:
    """A stamp read back gives the same stamp (within the float's precision
    the instant is the same), for every instant the log can hold."""
    t = micros / 10**6
    s = stamp(t)
    assert len(s) == 27 and s.endswith("Z")
    assert abs(seconds(s) - t) < 1e-4
    assert stamp(seconds(s)) == s or abs(seconds(stamp(seconds(s))) - t) < 1e-4


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4102444800 * 10**6))  # 1970 to 2100: exact to the microsecond
def test_stamps_of_this_century_round_trip_exactly(micros: int) -> None:
    s = stamp(micros / 10**6)
    assert stamp(seconds(s)) == s
    assert s[20:26] == f"{micros % 10**6:06d}"


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1970, 1, 1),
                    max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)),
       st.datetimes(min_value=datetime(1970, 1, 1),
                    max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)))
def test_stamps_compare_as_strings_in_time_order(d1, d2) -> None:
    s1, s2 = (d.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for d in (d1, d2))
    assert (s1 < s2) == (d1 < d2) and (s1 == s2) == (d1 == d2)
    t1, t2 = seconds(s1), seconds(s2)
    assert (stamp(t1) <= stamp(t2)) == (t1 <= t2)  # stamp is monotone


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**6), st.sampled_from("smhd"))
def test_parse_relative_is_a_stamp_after_at(base: int, n: int, unit: str) -> None:
    at = float(base)
    got = clock.parse(f"+{n}{unit}", at)
    assert got == stamp(at + n * clock.UNITS[unit]) and got >= stamp(at)


def test_keys_are_forgotten_a_week_after_the_day_they_were_bound() -> None:
    """Deterministic from the log: at the first line of a day, keys bound
    more than KEY_DAYS days before it are dropped; a checkpoint carries the
    day, so a replay from it agrees with the whole replay."""
    from storm_queue.store.directory.log import checkpoint

    def refused(seq: int, at: str, key: str | None = None, by: str = "operator:r") -> dict:
        event = {"v": 1, "seq": seq, "at": at, "action": "refused", "by": by, "requested": "bump", "slug": "a",
                 "code": "unknown_slug", "message": "m", "authorised": True}
        return {**event, "key": key, "fingerprint": "f"} if key else event

    events = [refused(1, "2026-11-01T23:59:59.000000Z", "k1"), refused(2, "2026-11-05T00:00:00.000000Z", "k2", "source:bot"),
              refused(3, "2026-11-08T12:00:00.000000Z"), refused(4, "2026-11-09T00:00:00.000000Z"),
              refused(5, "2026-11-13T00:00:00.000000Z")]
    assert fold.KEY_DAYS == 7
    kept = [{by: sorted(keys) for by, keys in fold.replay(events[:n]).keys.items()} for n in range(1, 6)]
    assert kept == [{"operator:r": ["k1"]}, {"operator:r": ["k1"], "source:bot": ["k2"]},
                    {"operator:r": ["k1"], "source:bot": ["k2"]},  # seven days on: still remembered
                    {"source:bot": ["k2"]}, {}]
    for n in range(1, 5):
        head = fold.replay(events[:n])
        back = checkpoint.parse("/s/priority.log", checkpoint.encode("/s/priority.log", checkpoint.Checkpoint(9, n, "0" * 64, head)))
        assert back.state == head
        assert fold.replay(events[n:], back.state) == fold.replay(events)

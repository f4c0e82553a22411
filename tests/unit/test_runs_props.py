"""Properties of the runners' pure core (issue 6), by Hypothesis: random
sequences of requests (claim, renew, finish ok|failed, time passing so that
leases expire, recover, unpark, schedule, push, unbump, hold and unhold, each maybe under
an idempotency key; and by hand: a running marker, or a result.json left by
a runner that died before its finish line) are carried out through the
plans of storm_queue.core.runs on a small storm (``World``, as the desk carries
them out), and after every step:

- no claim is made on a lane that holds a lease, is quarantined, held,
  finished or not ready, nor while ``slots`` lanes run; the claimed lane is
  the first ready one in run order;
- per lane, fencing tokens strictly increase, above every token observed;
- ``attempts`` is the number of claims since the lane was last unparked,
  and never exceeds the budget;
- renew and finish are accepted exactly for the live lease's token;
- an expire names the token of a lease past its expiry;
- no finished lane (result.json, even with no finish line) is ever
  quarantined;
- the first event per (principal, key) is the one bound;
- ``replay(events)`` equals the state folded one event at a time, and the
  checkpoint's encode/parse gives back an equal state (runs and keys too)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.core import fold, lane, resolver, runs
from storm_queue.core.clock import seconds, stamp
from storm_queue.core.config import Policy
from storm_queue.core.lane import Refusal
from storm_queue.core.records import replace
from storm_queue.store.directory.log import checkpoint
from tests.unit.test_runs import World

SLUGS = ("a", "b", "c")
QUEUE = "a 1\nb 2\nc 3\n"
PRINCIPALS = ("operator:op", "source:cron")
KEYS = ("k1", "k2")
TTL_MIN, TTL_MAX, MAX_AGE = 1, 30, 40

# "held" is a lane holding a lease, "parked" a quarantined one (when there is one)
slug = st.sampled_from(SLUGS + ("held", "held", "parked"))
held = st.sampled_from(SLUGS + ("held",) * 6)
token_choice = st.sampled_from(["live", "live", "live", "older", "newer", "last"])
claim = st.tuples(st.just("claim"), st.sampled_from(["h0", "h1", "h2"]), st.sampled_from([3, 8, 20]))
finish = st.tuples(st.just("finish"), held, token_choice, st.sampled_from(["ok", "failed", "failed", "failed"]))
advance = st.tuples(st.just("advance"), st.sampled_from([0, 1, 2, 3, 5, 8, 13, 21]))
op = st.one_of(
    claim, claim, claim, claim, claim, claim, finish, finish, finish, finish, advance, advance, advance,
    st.tuples(st.just("renew"), held, token_choice, st.sampled_from([0, 2, 5, 10, 31])),
    st.tuples(st.just("recover"), st.none() | slug),
    st.tuples(st.just("unpark"), st.sampled_from(("parked", "parked", "a"))),
    st.tuples(st.just("schedule"), slug, st.integers(-20, 30)),
    st.tuples(st.just("mark"), slug, st.none() | st.integers(0, 3)),
    st.tuples(st.just("push"), slug, st.none() | st.integers(-20, 30)),
    st.tuples(st.just("unbump"), slug),
    st.tuples(st.just("written"), held),
    st.tuples(st.just("hold"), slug), st.tuples(st.just("unhold"), slug),
)
keyed = st.sampled_from([None] * 16 + [(by, k) for by in PRINCIPALS for k in KEYS])
request = st.tuples(op, keyed)


def token_of(run: fold.Run, choice: str) -> int:
    live = run.lease.token if run.lease is not None else run.token
    return max(1, {"live": live, "older": live - 1, "newer": live + 1, "last": run.token}[choice])


def lane_of(state: fold.LaneState, choice: str | None) -> str | None:
    if choice == "held":
        return next((s for s in SLUGS if state.run(s).lease is not None), "a")
    if choice == "parked":
        return next((s for s in SLUGS if state.run(s).quarantined is not None), "b")
    return choice


class Checked:
    """A World and the invariants checked after each request."""

    def __init__(self, policy: Policy, unattended: bool) -> None:
        self.w = World(QUEUE, policy, unattended=unattended)
        self.folded = fold.EMPTY  # folded one event at a time
        self.bound: dict[tuple[str, str], int] = {}  # (by, key) -> seq of the event that bound it
        self.floor: dict[str, int] = {}  # slug -> the highest token the log has named for it

    # -- one request ----------------------------------------------------
    def do(self, req) -> None:
        (name, *args), under = req
        w = self.w
        before, n = w.state, len(w.events)
        if name in ("renew", "finish", "recover", "unpark", "schedule", "mark", "push", "unbump", "written", "hold",
                    "unhold"):
            args[0] = lane_of(before, args[0])
        fingerprint = repr((name, *args))  # the request's arguments, as the desk fingerprints them
        if under is not None:
            by, key = under
            first = before.keys.get(by, {}).get(key)
            if first is not None and first.fingerprint == fingerprint:
                return  # a repeat: the first outcome, nothing recorded
            if first is not None:
                w.record([{"action": "refused", "requested": name, "slug": None, "code": "idempotency_conflict",
                           "message": "another request", "authorised": True, "key": key,
                           "fingerprint": fingerprint}], by)
                self.after(before, n, None)
                return
        own = getattr(self, name)(before, *args)
        if under is not None and own and len(w.events) > n:
            w.events[-1].update(by=under[0], key=under[1], fingerprint=fingerprint)
            self.bound.setdefault(under, w.events[-1]["seq"])
        self.after(before, n, name)

    def claim(self, before: fold.LaneState, holder: str, ttl: int) -> bool:
        w = self.w
        slots = runs.full_slots(w.snap(), w.policy)  # what why, watch and list say of the slots, just before
        c = w.claim(holder, ttl)
        claims = [e for e in c.events if e["action"] == "claim"]
        assert len(claims) == (c.slug is not None) <= 1
        assert c.events[:len(c.events) - len(claims)] == tuple(e for e in c.events if e["action"] != "claim")
        view = c.view
        # a slot is held by a running lane, and by a live lease on a lane whose result.json came first
        expired = fold.replay(w.events[len(w.events) - len(c.events):len(w.events) - len(claims)], before)
        running = len({r.slug for r in view.rows if r.state == resolver.RUNNING}
                      | {s for s, r in expired.runs.items() if r.lease is not None})
        ready = [r for r in view.rows if r.state == resolver.READY]
        finished = [r.slug for r in view.rows if r.state == resolver.FINISHED]
        if claims:
            e = claims[0]
            # the state the claim was decided on: after the expiries it made
            decided = fold.replay(w.events[-len(c.events):-1], before)
            run = decided.run(e["slug"])
            assert run.lease is None and run.quarantined is None and run.held is None
            assert e["slug"] not in w.finished and e["slug"] in w.lanes
            assert e["token"] == run.token + 1 > run.token
            assert e["attempt"] == run.attempts + 1 <= w.policy.attempts
            assert running < w.policy.slots
            assert ready and ready[0].slug == e["slug"]  # the first ready lane in run order
            assert not finished or w.unattended
            assert c.decision == f"run {e['slug']} {w.lanes[e['slug']].issue} {e['token']}"
            assert e["expires"] == stamp(w.t + ttl)
        elif ready and (w.unattended or not finished):
            assert running >= w.policy.slots
            assert c.decision == " ".join(["wait"] + finished)
        else:
            assert c.decision == view.decision and not c.decision.startswith("run")
        # issue 33 item 7: every slot is said to be held exactly when a claim that next would send to run waits
        waited = not claims and ready and (w.unattended or not finished) and c.decision != "halted"
        assert (slots is not None) == bool(waited), (slots, c.decision)
        if slots is not None:
            held = {r.slug for r in view.rows if r.state == resolver.RUNNING} | {
                s for s, r in expired.runs.items() if r.lease is not None}
            assert set(slots.held) == held and len(slots.held) >= slots.limit == w.policy.slots
        return c.slug is not None

    def renew(self, before: fold.LaneState, slug: str, choice: str, ttl: int) -> bool:
        w = self.w
        run = before.run(slug)
        token = token_of(run, choice)
        got = w.renew(slug, token, ttl)
        lease = run.lease
        if lease is None or lease.token != token or lease.expires <= w.now:
            code = "stale_fence"
        elif not TTL_MIN <= ttl <= TTL_MAX:
            code = "lease_ttl_out_of_range"
        elif w.t + ttl > seconds(lease.claimed) + MAX_AGE:
            code = "lease_age_exceeded"
        else:
            code = None
        if code is None:
            assert got == {"action": "renew", "slug": slug, "token": token, "ttl": ttl, "expires": stamp(w.t + ttl)}
        else:
            assert isinstance(got, Refusal) and got.code == code, (got, code)
        return True

    def finish(self, before: fold.LaneState, slug: str, choice: str, result: str) -> bool:
        w = self.w
        run = before.run(slug)
        token = token_of(run, choice)
        was_finished = slug in w.finished
        got = w.finish(slug, token, result)
        lease = run.lease
        if lease is None or lease.token != token or lease.expires <= w.now:
            assert isinstance(got, Refusal) and got.code == "stale_fence", got
            return True
        assert got[0] == {"action": "finish", "slug": slug, "token": token, "result": result}
        spent = result == "failed" and run.attempts >= w.policy.attempts and not was_finished
        assert [e["action"] for e in got[1:]] == (["quarantine"] if spent else [])
        return True

    def advance(self, before: fold.LaneState, dt: int) -> bool:
        self.w.advance(dt)
        return False

    def recover(self, before: fold.LaneState, slug: str | None) -> bool:
        w = self.w
        how = resolver.running(w.snap(), slug) if slug is not None else None
        got = w.recover(slug)
        if slug is not None:
            expected = {resolver.LEASE: "lease_live", resolver.MARKER: "marker_running", "": "not_running"}.get(how)
            if expected is not None:
                assert isinstance(got, Refusal) and got.code == expected, got
            if how == resolver.MARKER:  # a marker with no lease: only the operator's --force takes it back
                got = w.recover(slug, force=True)
                assert not isinstance(got, Refusal) and got[0]["action"] == "recover", got
            elif expected is None:
                assert not isinstance(got, Refusal) and got[0]["action"] == ("expire" if how == resolver.ORPHAN else "recover")
        return not isinstance(got, list) or bool(got)

    def unpark(self, before: fold.LaneState, slug: str) -> bool:
        got = self.w.unpark(slug)
        assert isinstance(got, Refusal) == (before.run(slug).quarantined is None)
        return True

    def schedule(self, before: fold.LaneState, slug: str, offset: int) -> bool:
        got = self.w.schedule(slug, stamp(self.w.t + offset))
        assert not isinstance(got, Refusal)
        return True

    def mark(self, before: fold.LaneState, slug: str, k: int | None) -> bool:
        """A marker by hand on a lane that holds neither a lease nor a marker."""
        run = before.run(slug)
        if run.lease is None and slug not in self.w.running:
            self.w.mark(slug, None if k is None else run.token + k)
        return False

    def written(self, before: fold.LaneState, slug: str) -> bool:
        """A result.json with no finish line: the lane's runner died between them."""
        if before.run(slug).lease is not None:
            self.w.finished.add(slug)
        return False

    def push(self, before: fold.LaneState, slug: str, offset: int | None) -> bool:
        """``push SLUG ISSUE [--not-before]`` of a queued lane: a bump
        event carrying lists, and maybe a time."""
        w = self.w
        plan, append = lane.plan_push(w.snap(), slug, w.lanes[slug].issue, None)
        assert not append
        if isinstance(plan, Refusal):
            w.refused("push", slug, plan)
            return True
        body = {"action": "push", "slug": slug, "issue": w.lanes[slug].issue, "deps": [],
                "moved": list(plan.moved), "removed": list(plan.removed), "appended": False}
        if offset is not None:
            body["not_before"] = stamp(w.t + offset)
        if plan.noop:
            body["noop"] = plan.noop
        w.record([body])
        if offset is not None and not plan.noop:
            assert w.state.run(slug).not_before == body["not_before"]
        return True

    def hold(self, before: fold.LaneState, slug: str) -> bool:
        """``hold SLUG``: a lane running runs on; a held lane is never claimed."""
        from storm_queue.core.hold import plan_hold

        w = self.w
        got = plan_hold(w.snap(), slug)
        assert not isinstance(got, Refusal)  # every lane here is queued, none settled
        assert ("noop" in got) == (before.run(slug).held is not None)
        w.record([{**got, "reason": "r"}])
        assert w.state.run(slug).held is not None and w.state.run(slug).lease == before.run(slug).lease
        assert w.state.lane == before.lane  # it keeps its place
        return True

    def unhold(self, before: fold.LaneState, slug: str) -> bool:
        from storm_queue.core.hold import plan_unhold

        w = self.w
        got = plan_unhold(w.snap(), slug)
        assert ("noop" in got) == (before.run(slug).held is None)
        w.record([{**got, "reason": "r"}])
        assert w.state.run(slug).held is None
        return True

    def unbump(self, before: fold.LaneState, slug: str) -> bool:
        w = self.w
        plan = lane.plan_unbump(w.snap(), slug)
        if isinstance(plan, Refusal):
            w.refused("unbump", slug, plan)
        else:
            w.record([{"action": "unbump", "slug": slug, "moved": [], "removed": list(plan.removed)}])
        return True

    # -- the invariants ---------------------------------------------------
    def after(self, before: fold.LaneState, n: int, name: str | None) -> None:
        w = self.w
        new = w.events[n:]
        state = before
        for e in new:
            assert (e["seq"], e["at"]) == (n + 1, w.now) and e["by"]
            n += 1
            run = state.run(e.get("slug"))
            if e["action"] == "expire":
                assert run.lease is not None and run.lease.token == e["token"] and run.lease.expires <= w.now
            if e["action"] == "claim":
                assert run.lease is None and run.quarantined is None  # one live lease a lane; never quarantined
                assert e["token"] > run.token
                # above every token the log ever named for the lane (claims, and markers recovered)
                assert e["token"] > self.floor.get(e["slug"], 0)
            if e.get("token") is not None and e["action"] in ("claim", "recover", "expire"):
                self.floor[e["slug"]] = max(self.floor.get(e["slug"], 0), e["token"])
            if e["action"] == "quarantine":
                assert e["slug"] not in w.finished and run.quarantined is None
            if e["action"] == "recover":
                assert run.lease is None
            state = fold.apply(state, e)
            self.folded = fold.apply(self.folded, e)
        assert state == self.folded == fold.replay(w.events)
        if name in (None, "advance", "mark", "written"):
            assert not new or name is None
        # per-lane tokens strictly increase; attempts are the claims since the last unpark
        for slug_ in SLUGS:
            claims = [e["token"] for e in w.events if e["action"] == "claim" and e["slug"] == slug_]
            assert claims == sorted(set(claims))
            since = 0
            for e in w.events:
                if e.get("slug") == slug_ and e["action"] == "claim":
                    since += 1
                elif e.get("slug") == slug_ and e["action"] == "unpark":
                    since = 0
            run = state.run(slug_)
            assert run.attempts == since <= w.policy.attempts
            assert len(run.history) == len(claims)
            assert run.token >= max(claims, default=0)
            if run.lease is not None:
                assert run.lease.token == run.token == claims[-1]
                assert seconds(run.lease.expires) - seconds(run.lease.claimed) <= MAX_AGE + 1e-3
            rows = {r.slug: r.state for r in resolver.resolve(w.snap()).rows}
            if run.held is not None:
                assert rows[slug_] in (resolver.HELD, resolver.RUNNING, resolver.FINISHED)
            elif run.quarantined is not None:
                assert rows[slug_] in (resolver.QUARANTINED, resolver.RUNNING)
        # idempotency keys: the first event per (by, key) is the one bound
        assert {(by, k): keyed.seq for by, keys in state.keys.items() for k, keyed in keys.items()} == self.bound
        # the checkpoint round trip keeps every field: runs and keys too
        cp = checkpoint.Checkpoint(1 + len(w.events), 1 + len(w.events), "0" * 64, state)
        assert checkpoint.parse("/storm/priority.log", checkpoint.encode("/storm/priority.log", cp)) == cp


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slots=st.integers(1, 2), attempts=st.integers(1, 3), unattended=st.booleans(),
       requests=st.lists(request, min_size=15, max_size=50))
def test_runner_requests_keep_every_invariant(slots: int, attempts: int, unattended: bool, requests) -> None:
    policy = Policy(slots=slots, attempts=attempts, ttl=10, ttl_min=TTL_MIN, ttl_max=TTL_MAX, max_lease_age=MAX_AGE)
    checked = Checked(policy, unattended)
    for req in requests:
        checked.do(req)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["claim", "claim", "failed", "ok", "die"]), st.integers(1, 3)),
                min_size=1, max_size=30))
def test_a_runner_that_lost_its_lease_never_writes_the_lanes_result(steps) -> None:
    """Runners claim, fail, finish, or stall past their leases (time passes)
    while others claim on: a lane never has two live leases, live leases
    never exceed the slots, and a finish is accepted exactly when its
    holder's token is still the live lease's, so only that runner writes
    the lane's result."""
    w = World("a 1\nb 2\nc 3\nd 4\n", Policy(slots=3, attempts=2, ttl=10, ttl_min=1, ttl_max=30, max_lease_age=40),
              unattended=True)
    believes: dict[str, list[tuple[str, int]]] = {}  # holder -> the (lane, token) it thinks it holds
    for what, who in steps:
        holder = f"h{who}"
        if what == "claim":
            live_before = {s for s, r in w.state.runs.items() if r.lease is not None and r.lease.expires > w.now}
            c = w.claim(holder)
            if c.slug is not None:
                assert c.slug not in live_before
                believes.setdefault(holder, []).append((c.slug, c.token))
        elif what == "die":
            w.advance(10)
        else:
            for slug, token in believes.pop(holder, []):
                lease = w.state.run(slug).lease
                live = lease is not None and lease.token == token and lease.expires > w.now
                finished_before, state_before = set(w.finished), w.state
                got = w.finish(slug, token, what)
                if live:
                    assert not isinstance(got, Refusal) and w.state.run(slug).lease is None
                    assert w.finished == finished_before | ({slug} if what == "ok" else set())
                else:
                    assert isinstance(got, Refusal) and got.code == "stale_fence"
                    assert w.finished == finished_before  # the refusal is recorded (and counted), nothing else changes
                    assert replace(w.state, requests={}) == replace(state_before, requests={})
        live = [s for s, r in w.state.runs.items() if r.lease is not None and r.lease.expires > w.now]
        assert len(live) <= 3
        assert sum(1 for r in w.view().rows if r.state == "running") <= 3
        tokens = [(e["slug"], e["token"]) for e in w.events if e["action"] == "claim"]
        assert len(tokens) == len(set(tokens))

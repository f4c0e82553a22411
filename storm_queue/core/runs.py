"""Pure planning of what runners ask: claim, renew, finish, release,
recover, cancel, unpark and schedule. Each plan takes a snapshot (its ``now`` is the time the
request is answered), the runner policy and the request, and returns the
events to record (without their common fields) or a ``Refusal``. No file,
clock or uid is touched; times are stamps, or POSIX seconds where a lease's
expiry is computed."""

from __future__ import annotations

from .clock import seconds, stamp
from .config import Policy
from .fold import Run, replay
from .lane import Refusal, Snapshot
from .names import figure
from .records import dataclass, replace
from .resolver import LEASE, MARKER, ORPHAN, Row, View, decided, in_run_order, resolve, running

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from .fold import Act
    from .outcome import Outcome


@dataclass(frozen=True)
class Claim:
    """A claim's plan: the events (expiries and quarantines first, then the
    claim itself when the decision is ``run``), the decision line, the
    lanes whose markers the events ended, and the storm as it was decided
    (``after``: after the expiries), whose blocked rows before the chosen
    lane are ``to_block``."""

    events: tuple[dict[str, Any], ...]
    decision: str
    slug: str | None = None
    token: int | None = None
    expires: str | None = None
    ended: tuple[tuple[str, int], ...] = ()
    after: Snapshot | None = None
    to_block: tuple[Row, ...] = ()

    @property
    def view(self) -> View | None:
        """The whole view of the storm as it was decided (resolved on demand)."""
        return None if self.after is None else resolve(self.after)


def ttl_refusal(policy: Policy, ttl: int) -> Refusal | None:
    """A TTL outside ``ttl_min``..``ttl_max``, or longer than a lease may live."""
    if not policy.ttl_min <= ttl <= policy.ttl_max:
        return Refusal("lease_ttl_out_of_range",
                       f"a lease TTL of {figure(ttl)} s is outside storm.toml [runner] ttl_min..ttl_max "
                       f"({policy.ttl_min}..{policy.ttl_max} s); ask for a TTL in that range")
    if ttl > policy.max_lease_age:
        return Refusal("lease_age_exceeded",
                       f"a lease TTL of {figure(ttl)} s is longer than storm.toml [runner] max_lease_age "
                       f"({policy.max_lease_age} s); ask for a shorter TTL")
    return None


def _ended(snap: Snapshot, policy: Policy, slug: str, run: Run, event: dict[str, Any]) -> list[dict[str, Any]]:
    """``event`` (which ends an attempt of ``slug``), then a quarantine when
    that attempt spent the lane's last one and the lane has not finished."""
    events = [event]
    if (run.quarantined is None and run.attempts >= policy.attempts and event.get("result") != "ok"
            and not snap.ledgers.done(slug)):
        events.append({"action": "quarantine", "slug": slug, "attempts": run.attempts, "budget": policy.attempts})
    return events


def expiries(snap: Snapshot, policy: Policy) -> list[dict[str, Any]]:
    """An ``expire`` for every lease past its expiry (guarded by the token
    observed), each followed by a quarantine when it spent the last
    attempt; and a quarantine for every lane not held that has spent its
    budget (the policy may have been lowered) and has not finished."""
    events: list[dict[str, Any]] = []
    for slug, run in snap.state.runs.items():
        if run.lease is not None and running(snap, slug) == ORPHAN:
            events += _ended(snap, policy, slug, run, {"action": "expire", "slug": slug, "token": run.lease.token,
                                                        "expired": run.lease.expires})
        elif (run.lease is None and run.quarantined is None and run.attempts >= policy.attempts
              and slug in snap.lanes and not snap.ledgers.done(slug) and not _last_ok(run)):
            events.append({"action": "quarantine", "slug": slug, "attempts": run.attempts, "budget": policy.attempts})
    return events


def _last_ok(run: Run) -> bool:
    return bool(run.history) and run.history[-1].end == "ok"


@dataclass(frozen=True)
class Slots:
    """Every one of ``[runner] slots`` (``limit``) is held: the lanes that
    hold them (``held``, in run order), running or holding a live lease."""

    limit: int
    held: tuple[str, ...]


def _taken_back(snap: Snapshot, policy: Policy) -> tuple[list[dict[str, Any]], Snapshot]:
    """The expiries and quarantines a claim records first, and the storm after them."""
    events = expiries(snap, policy)
    after = replace(snap, state=replay([{**e, "at": snap.now, "by": ""} for e in events], snap.state)) if events else snap
    return events, after


def _all_held(policy: Policy, busy: frozenset[str]) -> bool:
    """Whether the lanes ``busy`` (``Decided.busy``) hold every one of the slots: a claim then leases nothing."""
    return len(busy) >= policy.slots


def _full(after: Snapshot, policy: Policy, busy: frozenset[str]) -> Slots | None:
    """The slots, when ``busy`` (``Decided.busy``) holds every one of them."""
    if not _all_held(policy, busy):
        return None
    lanes = after.lanes
    known = in_run_order(after, frozenset(s for s in busy if s in lanes))
    return Slots(policy.slots, known + tuple(sorted(s for s in busy if s not in lanes)))


def full_slots(snap: Snapshot, policy: Policy) -> Slots | None:
    """When a claim now would answer ``wait`` only because every one of
    ``[runner] slots`` is held (the order's next lane is ready: ``next``
    answers ``run``): the slots and the lanes that hold them; else None.
    It decides as ``plan_claim`` does (orphans taken back first), and
    records nothing: what ``list``, ``why`` and ``watch`` show as next."""
    _, after = _taken_back(snap, policy)
    seen = decided(after)
    if after.state.halt is not None or not seen.decision.startswith("run "):
        return None
    return _full(after, policy, seen.busy)


def plan_claim(snap: Snapshot, policy: Policy, holder: str, ttl: int, t: float) -> Claim:
    """Take back orphaned leases, then decide as ``next`` does; when the
    decision is ``run`` and fewer than ``slots`` lanes are running or hold
    a live lease, lease that lane to ``holder`` under the next fencing
    token. Any other decision records only the expiries and quarantines it
    found. The decision walks the run order only to the first ready lane
    (``resolver.decided``); while the operator's halt is in force the
    decision is ``halted`` and no lane is leased."""
    events, after = _taken_back(snap, policy)
    seen = decided(after)
    ended = tuple((e["slug"], e["token"]) for e in events if e["action"] == "expire")
    decision = seen.decision
    if after.state.halt is not None:  # the operator's halt: nothing starts, and the answer says so
        return Claim(tuple(events), "halted", ended=ended, after=after, to_block=seen.to_block)
    if not decision.startswith("run "):
        return Claim(tuple(events), decision, ended=ended, after=after, to_block=seen.to_block)
    # a lease holds its slot until it ends, even on a lane whose result.json came first (a finish cut short)
    if _all_held(policy, seen.busy):
        return Claim(tuple(events), " ".join(["wait", *in_run_order(after, seen.finished)]), ended=ended, after=after,
                     to_block=seen.to_block)
    _, slug, issue = decision.split(" ")
    run = after.state.run(slug)
    token, attempt, expires = lease(run.token, run.attempts, after.state.token_floor, t, ttl)
    events.append({"action": "claim", "slug": slug, "issue": issue, "holder": holder, "token": token, "ttl": ttl,
                   "expires": expires, "attempt": attempt})
    return Claim(tuple(events), f"run {slug} {issue} {token}", slug, token, expires, ended, after, seen.to_block)


def lease(token: int, attempts: int, floor: int, t: float, ttl: int) -> tuple[int, int, str]:
    """The lease a claim takes on a lane whose run holds ``token`` (its
    last fencing token) and ``attempts``, under the storm's token ``floor``
    (a reset's), at the time ``t`` for ``ttl`` seconds: the next token, the
    attempt it begins, and when it expires. (Its twin in the server:
    sql/functions/lease.sql.)"""
    return max(token, floor) + 1, attempts + 1, stamp(t + ttl)


def next_due(runs: Iterable[Run], now: str) -> str | None:
    """The first moment after ``now`` at which time alone changes what the
    storm decides: a lease expires (its slot frees, its lane may be taken
    back) or a schedule comes due. None when time alone changes nothing.
    A claim that waits for work wakes then, as the live view redraws then."""
    times = [t for run in runs for t in (run.lease.expires if run.lease is not None else None, run.not_before)
             if t is not None and t > now]
    return min(times, default=None)


def claimed(by: str, holder: str, decision: str, slug: str | None, token: int | None, expires: str | None,
            halt: Act | None) -> Outcome:
    """A claim's answer: the lease it took, else the decision it met (the
    operator's halt, which leases nothing, said with who, when and why)."""
    from .halt import halt_words
    from .outcome import Outcome

    if halt is not None:
        return Outcome("done", "claim", None, by, message=f"nothing leased: the storm is {halt_words(halt)}; "
                       "storm-queue resume ends the halt", decision=decision, halt=halt)
    if slug is None:
        return Outcome("done", "claim", None, by, message=decision, decision=decision)
    return Outcome("done", "claim", slug, by, message=f"{slug} is leased to {holder} with token {token} until {expires}",
                   decision=decision, holder=holder, token=token, expires=expires)


def holds(snap: Snapshot, slug: str, token: int) -> bool:
    """Whether ``token`` is the live lease's on ``slug``: its holder's
    renew, finish and release would be admitted (``_fence``)."""
    lease = snap.state.run(slug).lease
    return lease is not None and lease.token == token and running(snap, slug) != ORPHAN


def _fence(snap: Snapshot, slug: str, token: int, verb: str, by: str = "") -> Refusal | None:
    """Whether ``token`` may act on ``slug``'s lease for ``by``: None when
    it is the live lease's, taken by ``by`` or ``by`` is not a runner role
    (the operator, or a source, acts on any); ``not_holder`` when a runner
    role presents the live token of a lease another principal took (a
    token is read from the log by anyone: the lease's principal is what a
    runner role proves); ``lane_cancelled`` when a cancel revoked the lease
    of that token; else ``stale_fence`` (no lease, another token's, or one
    past its expiry). The one fence of renew, finish and release."""
    run = snap.state.run(slug)
    lease = run.lease
    if holds(snap, slug, token):
        if by.startswith("runner:") and lease.by != by:
            return Refusal("not_holder", f"the lease on {slug} (token {token}) was taken by {lease.by}, not {by}: a "
                           f"runner role may {verb} only a lease it took itself")
        return None
    if run.cancelled is not None and any(a.token == token and a.end == "cancelled" for a in run.history):
        c = run.cancelled
        return Refusal("lane_cancelled", f"{slug} was cancelled by {c.by} at {c.at}"
                       + (f" ({c.reason})" if c.reason else "") + f", which revoked the lease of token {token}; "
                       f"a runner may not {verb} it: stop its work (the lane is settled abandoned)")
    if lease is None:
        why = f"{slug} holds no lease" + (f" (its last token was {run.token})" if run.token else "")
    elif lease.token != token:
        age = "older" if token < lease.token else "newer"
        why = f"token {figure(token)} is {age} than the live lease's token {lease.token} on {slug}"
    else:
        why = f"the lease of token {token} on {slug} expired at {lease.expires}"
    return Refusal("stale_fence", f"{why}; a runner that lost its lease may not {verb} the lane: stop its work "
                   "and claim again")


def plan_renew(snap: Snapshot, policy: Policy, slug: str, token: int, ttl: int | None, t: float,
               by: str = "") -> dict[str, Any] | Refusal:
    """Extend the live lease by ``ttl`` from now (None: by the TTL it was
    claimed or last renewed with), within ``max_lease_age`` of its claim
    (``by``: who asks, ``_fence``)."""
    refusal = _fence(snap, slug, token, "renew", by)
    if refusal:
        return refusal
    lease = snap.state.run(slug).lease
    ttl = ttl if ttl is not None else lease.ttl or policy.ttl
    refusal = ttl_refusal(policy, ttl)
    if refusal:
        return refusal
    limit = seconds(lease.claimed) + policy.max_lease_age
    if t + ttl > limit:
        return Refusal("lease_age_exceeded",
                       f"the lease on {slug} was claimed at {lease.claimed} and may not be renewed past "
                       f"{stamp(limit)} (storm.toml [runner] max_lease_age {policy.max_lease_age} s); "
                       "finish the lane, or ask for a shorter TTL")
    return {"action": "renew", "slug": slug, "token": token, "ttl": ttl, "expires": stamp(t + ttl)}


#: the doubling of a backoff stops here: ``retry_delay * 2**30`` is past any ``retry_max`` (at most ten years of
#: seconds), so the delay is the same, and a lane's thousandth attempt costs no thousand-bit number
_DOUBLINGS = 30


def backoff(policy: Policy, attempts: int) -> int:
    """The seconds a lane whose ``attempts``-th attempt (since it was last
    unparked) just failed waits before it is claimed again: ``retry_delay``
    doubled for each attempt before it, at most ``retry_max``; 0 when
    ``retry_delay`` is 0 (no backoff)."""
    if policy.retry_delay <= 0:
        return 0
    return min(policy.retry_max, policy.retry_delay << min(max(attempts - 1, 0), _DOUBLINGS))


def plan_finish(snap: Snapshot, policy: Policy, slug: str, token: int, result: str,
                note: str | None, by: str = "") -> list[dict[str, Any]] | Refusal:
    """End the live lease with ``result``; a failure that spent the last
    attempt quarantines the lane. Any other failure, under a declared
    ``retry_delay``, carries the storm's own backoff: ``not_before``, the
    finish's time (``snap.now``) plus ``backoff`` of the attempts spent,
    which the fold makes the lane's schedule, as a ``schedule`` line would."""
    refusal = _fence(snap, slug, token, "finish", by)
    if refusal:
        return refusal
    event: dict[str, Any] = {"action": "finish", "slug": slug, "token": token, "result": result}
    if note is not None:
        event["note"] = note
    run = snap.state.run(slug)
    events = _ended(snap, policy, slug, run, event)
    delay = backoff(policy, run.attempts) if result == "failed" and len(events) == 1 else 0
    if delay:
        event["not_before"] = stamp(seconds(snap.now) + delay)
    return events


#: the key a ``finish --then-claim`` under KEY gives its claim's line (``then_key``): KEY and this suffix
THEN_SUFFIX = "/then-claim"


def then_key(key: str | None) -> str | None:
    """The key of the claim a keyed ``finish --then-claim`` makes: asked
    again, the finish is repeated from its own line and the claim from
    this one (or, when it leased nothing, asked anew)."""
    return None if key is None else key + THEN_SUFFIX


def finished_snapshot(snap: Snapshot, slug: str, result: str, events: list[dict[str, Any]], by: str) -> Snapshot:
    """The storm a ``finish --then-claim`` claims on: ``snap`` after the
    finish of ``slug`` recorded ``events`` (folded), its running marker gone
    and, for ``ok``, its result.json written (the lane finished)."""
    led = snap.ledgers
    finished = led.finished | {slug} if result == "ok" else led.finished
    running = {s: t for s, t in led.running.items() if s != slug}
    state = replay([{**e, "at": snap.now, "by": by} for e in events], snap.state)
    return replace(snap, ledgers=replace(led, finished=frozenset(finished), running=running), state=state,
                   results={s: t for s, t in snap.results.items() if s != slug})


def plan_release(snap: Snapshot, policy: Policy, slug: str, token: int, by: str = "") -> list[dict[str, Any]] | Refusal:
    """The holder gives its live lease back: the lane may be claimed again
    at once, and the attempt stays spent (so one that spent the last
    attempt quarantines the lane, as a failed finish does)."""
    refusal = _fence(snap, slug, token, "release", by)
    if refusal:
        return refusal
    run = snap.state.run(slug)
    return _ended(snap, policy, slug, run, {"action": "release", "slug": slug, "token": token,
                                            "holder": run.lease.holder})


def plan_recover(snap: Snapshot, policy: Policy, slug: str | None, force: bool = False) -> list[dict[str, Any]] | Refusal:
    """Without ``slug``: take back every orphaned lease. With it: take back
    that lane's orphaned lease; with ``force`` (its runner is gone, the
    operator says), end a running marker that has no lease (the marker's
    token, when it has one, is observed so that no later token repeats
    it), or end its live lease, whose token is refused from then on. A
    marker without ``force`` is refused (``marker_running``): a runner
    that takes no leases (one that runs what ``next`` decides) marks every
    lane it runs so, and taking one back lets ``next`` offer it again
    while it runs."""
    if slug is None:
        return expiries(snap, policy)
    if slug not in snap.lanes and slug not in snap.state.runs and slug not in snap.ledgers.running:
        return Refusal("unknown_slug", f"{slug} is not in queue.txt and has never run")
    how = running(snap, slug)
    run = snap.state.run(slug)
    if how == ORPHAN:
        return _ended(snap, policy, slug, run, {"action": "expire", "slug": slug, "token": run.lease.token,
                                                "expired": run.lease.expires})
    if how == MARKER and force:
        return [{"action": "recover", "slug": slug, "token": snap.ledgers.running[slug], "marker": True}]
    if how == MARKER:
        return Refusal("marker_running", f"{slug} is running under a marker with no lease: a runner that takes no "
                       "leases (one that runs what storm-queue next decides) marks every lane it runs so, and taking "
                       "it back would let next offer it again while it runs; if no runner is working on it, "
                       f"storm-queue recover {slug} --force --reason TEXT takes it back")
    if how == LEASE and force:
        return _ended(snap, policy, slug, run, {"action": "recover", "slug": slug, "token": run.lease.token,
                                                "marker": False, "force": True})
    if how == LEASE:
        return Refusal("lease_live", f"{slug} is leased to {run.lease.holder} (token {run.lease.token}) until "
                       f"{run.lease.expires}; it can be recovered once that lease expires, or now with --force "
                       "--reason TEXT when its holder is gone")
    return Refusal("not_running", f"{slug} is not running, so there is nothing to recover")


def plan_cancel(snap: Snapshot, slug: str) -> list[dict[str, Any]] | Refusal:
    """Cancel ``slug``: a lane not yet settled is settled abandoned, and
    its lease (live or past its expiry), if it holds one, is revoked: the
    holder's renew, finish and release of that token are refused
    ``lane_cancelled``. A settled lane is a no-op (unless it still holds a
    lease, which is revoked); one ``queue.txt`` does not carry,
    ``unknown_slug``."""
    lease = snap.state.run(slug).lease
    event: dict[str, Any] = {"action": "cancel", "slug": slug, "token": None if lease is None else lease.token}
    if snap.ledgers.settled(slug):
        if lease is None:  # a lane settled (by hand) while it held a lease still has that lease revoked
            was = "integrated" if slug in snap.ledgers.integrated else "abandoned"
            event["noop"] = f"{slug} is already {was}"
        return [event]
    if slug not in snap.lanes:
        return Refusal("unknown_slug", f"no lane {slug} is queued, so there is nothing to cancel")
    return [event]


def plan_unpark(snap: Snapshot, slug: str) -> dict[str, Any] | Refusal:
    """Return a quarantined lane to the queue with a fresh retry budget."""
    if snap.state.run(slug).quarantined is None:
        return Refusal("not_quarantined", f"{slug} is not quarantined, so there is nothing to unpark")
    return {"action": "unpark", "slug": slug}


def plan_schedule(snap: Snapshot, slug: str, not_before: str) -> dict[str, Any] | Refusal:
    """Let ``slug`` start no earlier than ``not_before``."""
    if slug not in snap.lanes:
        return Refusal("unknown_slug", f"{slug} is not in queue.txt; push it with --not-before instead")
    event: dict[str, Any] = {"action": "schedule", "slug": slug, "not_before": not_before}
    if snap.state.run(slug).not_before == not_before:
        event["noop"] = f"{slug} is already scheduled not before {not_before}"
    return event

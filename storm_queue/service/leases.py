"""The runners' requests: claim, renew, release, recover, cancel, unpark
and schedule (finish: ``finishing``), planned by ``core.runs`` and
recorded by ``passage.request``.
Each is a function of the storm, and its method (``storm.KINDS``)."""

from __future__ import annotations

import os

from .. import wall
from ..core.clock import wait_seconds
from ..core.lane import Refusal, Snapshot
from ..core.names import as_text
from ..core.outcome import Outcome, Request, Step
from ..core.records import replace
from ..core.runs import (
    claimed, next_due, plan_cancel, plan_claim, plan_recover, plan_release, plan_renew, plan_schedule, plan_unpark,
    ttl_refusal,
)
from ..core.shapes import optional_seconds, optional_text, parse_when, shape_holder, shape_names, shape_token, when_at
from .passage import cached, declaration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..store.interface import Changes, Effects
    from .storm import Storm


_HOST = "._-"  # a host name's characters kept besides ASCII letters and digits


def default_holder() -> str:
    """A claim's holder when none is given: this host and the parent
    process (the runner that asked), made a name. The host name is the
    kernel's node name, what ``socket.gethostname`` returns on POSIX,
    without loading the socket module."""
    host = "".join(c if c in _HOST or c.isascii() and c.isalnum() else "-" for c in os.uname().nodename)
    host = host.strip(".-") or "host"
    return f"{host[:150]}-{os.getppid()}".replace("..", ".")


#: the decisions a claim with ``wait`` waits out: nothing can be leased now, and a change may let a lane be
#: (and ``review``, for a caller who may not settle: ``_waits``)
WAITED = ("wait", "halted")
#: the longest a waiting claim goes without reading the wall clock again (it may be set, or a test move it)
TICK = 1.0


def claim(storm: Storm, holder: str | None = None, ttl: int | None = None, source: str | None = None,
          reason: str | None = None, key: str | None = None, wait: float = 0.0,
          waiting: Callable[[Outcome], None] | None = None) -> Outcome:
    """Decide as ``next`` does, after taking back orphaned leases; when
    the decision is ``run`` and a slot is free, lease that lane to
    ``holder`` under a new fencing token (``Outcome.decision`` is then
    ``run SLUG ISSUE TOKEN``). Any other decision leases nothing; while
    the operator's halt is in force the decision is ``halted`` and
    ``Outcome.halt`` says who halted the storm, when and why.

    With ``wait`` seconds, a decision of ``wait`` or ``halted`` is not the
    answer yet, nor is ``review`` for a caller who may not settle a lane
    (a runner role: the review is a decision only the operator, or a
    declared source, acts on; the store judges it, as it would judge a
    ``settle`` of the caller's): the claim waits for a change to the storm
    (``Store.changes``), for the moment time alone changes it (a lease
    expiring, a schedule coming due: ``runs.next_due``) or for ``wait``
    seconds to pass, whichever comes first, and asks again; then it
    answers exactly as a claim asked at that moment. A ``wait`` that names
    finished lanes is answered at once when they are all the storm has left
    to do (``only_reviews_left``): nothing more can run. An ask that leases
    nothing records nothing (but the expiries it found), so a wait adds
    no line to the log: at most the claim that leases is recorded.
    ``waiting(answer)`` is told once, when the wait begins, what the
    claim would have answered then. ``BadArgument`` (exit 2, nothing
    asked) for a ``wait`` that is not 0 to ``clock.WAIT_MOST`` seconds."""
    wait = wait_seconds(wait)
    out, due = _claim(storm, holder, ttl, source, reason, key)
    settles: list[bool] = []  # whether the caller may settle, judged once, when a review is first met
    if wait <= 0 or not _waits(out, storm, lambda: _settles(storm, source, settles)):
        return out
    if waiting is not None:
        waiting(out)
    import time

    end = time.monotonic() + wait
    with storm.store.changes() as changes:
        while True:
            out, due = _claim(storm, holder, ttl, source, reason, key)  # again, watched: no change is missed
            if not _waits(out, storm, lambda: _settles(storm, source, settles)) or time.monotonic() >= end:
                return out
            until_change(changes, end, due)


def _waits(out: Outcome, storm: Storm, settles: Callable[[], bool]) -> bool:
    """Whether a claim's answer is one a waiting claim waits out: ``WAITED``,
    and ``review`` when the caller may not settle (``settles()``); but not a
    ``wait`` that names finished lanes (a batch review) when they are all
    that is left (``only_reviews_left``): as on ``empty``, nothing more can
    run until a lane is added."""
    if out.outcome != "done" or out.slug is not None:
        return False
    words = (out.decision or "").split(" ")
    if words[0] == "wait" and len(words) > 1 and only_reviews_left(storm):
        return False
    return words[0] in WAITED or (words[0] == "review" and not settles())


def only_reviews_left(storm: Storm) -> bool:
    """Whether every lane of the storm not settled is finished, awaiting
    review (and one is): read now, without the lock."""
    from ..core.resolver import FINISHED, resolve

    store = storm.store
    rows = resolve(store.snapshot(store.read(declaration(store)))).rows
    return bool(rows) and all(row.state == FINISHED for row in rows)


def _settles(storm: Storm, source: str | None, known: list[bool]) -> bool:
    """Whether the caller (as ``source``) may settle a lane: the store's
    judgement of a ``settle`` of theirs, asked once (kept in ``known``)."""
    if not known:
        req = Request("settle", None, None, optional_text(source))
        known.append(storm.store.judge(req, declaration(storm.store), False).verdict.admitted)
    return known[0]


def until_change(changes: Changes, end: float, due: str | None) -> None:
    """Wait for a change, for the stamp ``due`` on the wall clock, or for
    ``end`` on the monotonic one, whichever comes first."""
    import time

    from ..core.clock import seconds

    while True:
        left = end - time.monotonic()
        if due is not None:
            left = min(left, seconds(due) - wall.seconds())
        if left <= 0 or changes.wait(min(left, TICK)):
            return


def _claim(storm: Storm, holder: str | None, ttl: int | None, source: str | None, reason: str | None,
           key: str | None) -> tuple[Outcome, str | None]:
    """One claim, and the first moment after it when time alone changes
    what the storm decides (None: none is coming, or it was refused)."""
    req = Request("claim", None, optional_text(reason), optional_text(source), optional_text(key),
                  (optional_text(holder), optional_seconds(ttl)))
    name = req.args[0] if req.args[0] is not None else default_holder()
    refusal = shape_names(None, (), req.source) or shape_holder(name)
    served = storm.store.serve(req, name)
    if served is not None:
        return served, served.due
    decl = declaration(storm.store)
    ttl = decl.runner.ttl if ttl is None else ttl
    if not decl.error:  # an unreadable declaration says nothing about TTLs: authority refuses it
        refusal = refusal or ttl_refusal(decl.runner, ttl)

    due: list[str | None] = [None]

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step:
        claim = plan_claim(snap, decl.runner, name, ttl, wall.seconds())
        due[0] = next_due((claim.after or snap).state.runs.values(), snap.now)
        halt = claim.after.state.halt if claim.after is not None else None
        out = claimed(by, name, claim.decision, claim.slug, claim.token, claim.expires, halt)
        if claim.decision == "wait" and halt is None and claim.after is not None:  # say when a cycle is why nothing runs
            from ..core.resolver import cycle_note

            note = cycle_note(claim.after, claim.view)
            out.warnings += [note] if note else []

        def after(events: list[dict[str, Any]]) -> list[str]:
            return claim_effects(fx, claim, name, events[-1]["at"] if events else "", snap)

        return Step(out, list(claim.events), after=after, own=-1 if claim.slug is not None else None)

    out = storm.request(req, refusal, plan, decl=decl)
    out.due = due[0]
    return out, due[0]

def claim_effects(fx: Effects, claim: Any, holder: str, at: str, snap: Snapshot) -> list[str]:
    """What a recorded claim (``runs.Claim``) does besides its lines: the
    running markers of the leases it took back removed, the marker of the
    lease it took (to ``holder``, its line recorded ``at``) written, and
    what the store says of it (``Effects.tell_claim``); notes for stderr."""
    notes = []
    for slug, token in claim.ended:
        notes += cached(lambda: fx.unmark_running(slug, token), "running marker", slug)
    if claim.slug is not None:
        body = {"holder": holder, "token": claim.token, "expires": claim.expires, "claimed": at}
        notes += cached(lambda: fx.mark_running(claim.slug, body), "running marker", claim.slug)
    return notes + fx.tell_claim(claim, snap.skipped, snap.now)


def renew(storm: Storm, slug: str, token: int, ttl: int | None = None, source: str | None = None,
          reason: str | None = None, key: str | None = None) -> Outcome:
    """Extend the live lease on ``slug`` held under ``token``."""
    req = Request("renew", as_text(slug), optional_text(reason), optional_text(source), optional_text(key),
                  (token, optional_seconds(ttl)))
    refusal = shape_names(req.slug, (), req.source) or shape_token(token)
    served = storm.store.serve(req)
    if served is not None:
        return served
    decl = declaration(storm.store)
    if refusal is None and ttl is not None and not decl.error:
        refusal = ttl_refusal(decl.runner, ttl)

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        event = plan_renew(snap, decl.runner, req.slug, token, ttl, wall.seconds(), by)
        if isinstance(event, Refusal):
            return event
        out = Outcome("done", "renew", req.slug, by, message=f"renewed {req.slug} token {token} until {event['expires']}",
                      token=token, expires=event["expires"])
        lease = snap.state.run(req.slug).lease
        marker = {"holder": lease.holder, "token": token, "expires": event["expires"], "claimed": lease.claimed}
        return Step(out, [event], after=lambda _: cached(
            lambda: fx.mark_running(req.slug, marker), "running marker", req.slug))

    return storm.request(req, refusal, plan, decl=decl)

def release(storm: Storm, slug: str, token: int, source: str | None = None, reason: str | None = None,
            key: str | None = None) -> Outcome:
    """Give back the live lease on ``slug`` held under ``token`` (its
    holder stops): the lane may be claimed again at once; the attempt
    stays spent, and one that spent the last attempt quarantines the lane."""
    req = Request("release", as_text(slug), optional_text(reason), optional_text(source), optional_text(key), (token,))
    refusal = shape_names(req.slug, (), req.source) or shape_token(token)
    served = storm.store.serve(req)
    if served is not None:
        return served
    decl = declaration(storm.store)

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        events = plan_release(snap, decl.runner, req.slug, token, by)
        if isinstance(events, Refusal):
            return events
        run = snap.state.run(req.slug)
        words = (f"{req.slug} is quarantined: released (token {token}) after {run.attempts} attempts" if len(events) > 1
                 else f"released {req.slug} (token {token}); it may be claimed again (attempt {run.attempts} of "
                 f"{decl.runner.attempts} spent)")
        return Step(Outcome("done", "release", req.slug, by, message=words, token=token), events, own=0,
                    after=lambda _: cached(lambda: fx.unmark_running(req.slug, token), "running marker", req.slug))

    return storm.request(req, refusal, plan, decl=decl)

def recover(storm: Storm, slug: str | None = None, source: str | None = None, reason: str | None = None,
            key: str | None = None, force: bool = False) -> Outcome:
    """Take back orphaned leases (every one, or ``slug``'s); with
    ``slug``, also end a running marker that has no lease, and with
    ``force`` (and a reason) a live lease whose holder is gone. Naming
    a lane is the operator's alone; ``force`` without ``slug`` is
    ``BadArgument``."""
    if force and slug is None:
        from ..core.errors import BadArgument

        raise BadArgument("recover --force ends one lane's live lease: name it (storm-queue recover SLUG --force "
                          "--reason TEXT); nothing was done")
    req = Request("recover", None if slug is None else as_text(slug), optional_text(reason), optional_text(source),
                  optional_text(key), (True,) if force else ())
    served = storm.store.serve(req)
    if served is not None:
        return served
    decl = declaration(storm.store)
    refusal = _named_with_reason(req, "recover --force needs --reason TEXT saying why the holder is gone" if force else None)

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        events = plan_recover(snap, decl.runner, req.slug, force)
        if isinstance(events, Refusal):
            return events
        taken = [e["slug"] for e in events if e["action"] in ("expire", "recover")]
        parked = [e["slug"] for e in events if e["action"] == "quarantine"]
        words = f"took back {' '.join(taken)}" if taken else "no orphaned lease to take back"
        if events and events[0].get("force"):
            words = f"ended the live lease on {req.slug} (token {events[0]['token']}); that token is refused from now on"
        if parked:
            words += f"; quarantined {' '.join(parked)}"
        forced = events[0]["token"] if events and events[0].get("force") else None
        out = Outcome("done" if events else "noop", "recover", req.slug, by, message=words, token=forced)
        return Step(out, events, after=lambda _: _unmark(fx, events), own=0 if events else None)

    return storm.request(req, refusal, plan, decl=decl, operator_only=req.slug is not None)

def _named_with_reason(req: Request, needs: str | None) -> Refusal | None:
    """The refusal of ``req``'s slug or source as names, or else, when
    ``needs`` says why a reason is needed, ``blank_reason`` for one that is
    blank; None when neither."""
    refusal = shape_names(req.slug, (), req.source)
    if refusal is None and needs and not (req.reason or "").strip():
        refusal = Refusal("blank_reason", needs)
    return refusal


def _unmark(fx: Effects, events: list[dict[str, Any]]) -> list[str]:
    """Take away the running marker of each lease ``events`` ended (a cache: a failure is a note)."""
    notes = []
    for e in events:
        if e["action"] in ("expire", "recover") or (e["action"] == "cancel" and e["token"] is not None):
            notes += cached(lambda: fx.unmark_running(e["slug"], e["token"]), "running marker", e["slug"])
    return notes

def cancel(storm: Storm, slug: str, reason: str | None, source: str | None = None, key: str | None = None) -> Outcome:
    """Cancel ``slug``, with a reason (the operator, or a declared
    source): a lane not settled is settled abandoned, and its lease, if
    it holds one, is revoked: its holder's next renew or finish is refused
    ``lane_cancelled``, which tells the runner to stop the lane's work,
    and a ``lease`` wait on it (``service.tenure``) ends at once.
    A settled lane is a recorded no-op."""
    req = Request("cancel", as_text(slug), optional_text(reason), optional_text(source), optional_text(key))
    refusal = _named_with_reason(req, "cancel needs --reason TEXT saying why the lane is not to run")

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        events = plan_cancel(snap, req.slug)
        if isinstance(events, Refusal):
            return events
        event = events[0]
        if event.get("noop"):
            return Step(Outcome("noop", "cancel", req.slug, by, message=f"nothing to do: {event['noop']}"), events)
        token = event["token"]
        words = f"{req.slug} is cancelled: settled abandoned" + (
            "" if token is None else f"; the lease of token {token} is revoked: its holder stops the lane's "
            "work at once when it waits on the lease (storm-queue lease), else at its next renew or finish "
            "(lane_cancelled)")
        before = None if snap.ledgers.settled(req.slug) else lambda: fx.settle(req.slug, "abandoned")
        return Step(Outcome("done", "cancel", req.slug, by, message=words, token=token), events, before=before,
                    after=lambda _: _unmark(fx, events))

    return storm.request(req, refusal, plan)

def unpark(storm: Storm, slug: str, reason: str | None, source: str | None = None, key: str | None = None) -> Outcome:
    """Return a quarantined lane to the queue with a fresh retry budget;
    operator only, with a reason. Its attempt history stays."""
    decl = declaration(storm.store)
    req = Request("unpark", as_text(slug), optional_text(reason), optional_text(source), optional_text(key))
    refusal = _named_with_reason(req, "unpark needs --reason TEXT saying why the lane may run again")

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        event = plan_unpark(snap, req.slug)
        if isinstance(event, Refusal):
            return event
        return Step(Outcome("done", "unpark", req.slug, by, message=f"{req.slug} may be claimed again, "
                            f"with {decl.runner.attempts} fresh attempts"), [event])

    return storm.request(req, refusal, plan, decl=decl)

def schedule(storm: Storm, slug: str, not_before: str, source: str | None = None, reason: str | None = None,
             key: str | None = None) -> Outcome:
    """Let ``slug`` start no earlier than ``not_before`` (a time as
    ``clock.parse`` reads it); until then it keeps its place and is
    passed over."""
    req = Request("schedule", as_text(slug), optional_text(reason), optional_text(source), optional_text(key), (optional_text(not_before),))
    when, refusal = parse_when(req.args[0], shape_names(req.slug, (), req.source), wall.seconds())

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        at = when_at(req.args[0], snap.now, when)
        event = plan_schedule(snap, req.slug, at)
        if isinstance(event, Refusal):
            return event
        words = f"nothing to do: {event['noop']}" if "noop" in event else f"{req.slug} starts no earlier than {at}"
        return Step(Outcome("noop" if "noop" in event else "done", "schedule", req.slug, by, message=words), [event])

    return storm.request(req, refusal, plan)



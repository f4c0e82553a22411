"""The end of a lane's lease: ``finish``, and ``finish --then-claim``,
the finish and the next claim in one request (issue 32: one commit a
lane), planned by ``core.runs`` and recorded by ``passage.request``."""

from __future__ import annotations

from .. import wall
from ..core.clock import wait_seconds
from ..core.lane import Refusal, Snapshot
from ..core.ledgers import finished_result
from ..core.names import as_text, quote
from ..core.outcome import Outcome, Request, Step
from ..core.runs import THEN_SUFFIX, claimed, finished_snapshot, next_due, plan_claim, plan_finish, then_key, ttl_refusal
from ..core.shapes import optional_seconds, optional_text, shape_holder, shape_key, shape_names, shape_note, shape_token
from .leases import _settles, _waits, claim, claim_effects, default_holder
from .passage import cached, declaration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..store.interface import Effects
    from .storm import Storm


def finish(storm: Storm, slug: str, token: int, result: str, note: str | None = None, source: str | None = None,
           reason: str | None = None, key: str | None = None, then_claim: bool = False, holder: str | None = None,
           ttl: int | None = None, wait: float = 0.0, waiting: Callable[[Outcome], None] | None = None) -> Outcome:
    """End the live lease on ``slug`` held under ``token``: ``ok``
    leaves the lane finished, awaiting review; ``failed`` makes it
    claimable again (after the storm's backoff, ``[runner] retry_delay``,
    when one is declared: the answer says when), or quarantines it once
    its attempts are spent.

    ``then_claim``: then claim (for ``holder``, ``ttl``), in the same
    request: under one hold of the lock (on a database, one transaction),
    the finish's lines, then exactly the lines ``claim`` would record
    (expiries taken back, then the claim), with consecutive seqs, as if
    ``finish`` then ``claim`` had run back to back. The answer is the
    finish's, its ``claim`` the claim's; a refused finish claims nothing.
    Under ``key`` the pair is one request: the finish's line binds
    ``key``, the claim's ``then_key(key)``, and asked again the finish is
    repeated and the claim repeated (or, when it leased nothing, asked
    anew). ``wait``: a claim that leases nothing waits for work after the
    finish is recorded, as ``claim`` waits (``waiting`` told when); one
    that is not 0 to ``clock.WAIT_MOST`` seconds is ``BadArgument``
    (exit 2), nothing recorded. A ``holder`` or ``ttl`` without
    ``then_claim`` is ``BadArgument`` too, before anything is asked
    (``claims_own``)."""
    claims_own(then_claim, holder, ttl)
    wait, ttl = wait_seconds(wait), optional_seconds(ttl)
    args = (token, result, optional_text(note)) + ((optional_text(holder), ttl) if then_claim else ())
    req = Request("finish", as_text(slug), optional_text(reason), optional_text(source), optional_text(key), args)
    refusal = shape_names(req.slug, (), req.source) or shape_token(token)
    if refusal is None and result not in ("ok", "failed"):
        refusal = Refusal("invalid_result", f"result {quote(as_text(result))} is neither ok nor failed")
    refusal = refusal or shape_note(req.args[2])
    if then_claim:
        return _finish_then_claim(storm, req, refusal, wait, waiting)
    served = storm.store.serve(req)
    if served is not None:
        return served
    decl = declaration(storm.store)
    return storm.request(req, refusal, lambda snap, by, fx: _finished(snap, by, fx, decl, req), decl=decl)


def claims_own(then_claim: bool, holder: object, ttl: object) -> None:
    """Raise ``BadArgument`` (exit 2; nothing was asked) when a finish
    that claims nothing (no ``then_claim``) is given a ``holder`` or a
    ``ttl`` (whatever their type), which are the claim's and would be
    dropped unseen; return None otherwise. The command's ``finish`` and
    the Python API's say it in the same words."""
    if not then_claim and (holder is not None or ttl is not None):
        from ..core.errors import BadArgument

        raise BadArgument("--holder and --ttl are the claim's: add --then-claim, or leave them out; nothing was done")


def _finished(snap: Snapshot, by: str, fx: Effects, decl: Any, req: Request) -> Step | Refusal:
    """A finish's plan (``req``: finish SLUG under its token, with its result and note)."""
    token, result, note = req.args[:3]
    events = plan_finish(snap, decl.runner, req.slug, token, result, note, by)
    if isinstance(events, Refusal):
        return events
    run = snap.state.run(req.slug)
    if result == "ok":
        words = f"{req.slug} finished ok (token {token}); it awaits review"
    elif len(events) > 1:
        words = f"{req.slug} failed (token {token}) and is quarantined after {run.attempts} attempts"
    else:
        words = (f"{req.slug} failed (token {token}); attempt {run.attempts} of {decl.runner.attempts}, "
                 f"it will be claimed again" + (f" after {events[0]['not_before']}" if "not_before" in events[0] else ""))
    out = Outcome("done", "finish", req.slug, by, message=words, token=token)
    before = None
    if result == "ok":  # result.json before the log: a crash between leaves a finished lane, never a ready one
        body = finished_result(token, run.lease.holder, note, snap.now)
        before = lambda: fx.mark_finished(req.slug, body)  # noqa: E731 -- returns its undo
    return Step(out, events, before=before, own=0, after=lambda _: cached(
        lambda: fx.unmark_running(req.slug, token), "running marker", req.slug))


def _finish_then_claim(storm: Storm, req: Request, refusal: Refusal | None, wait: float,
                       waiting: Callable[[Outcome], None] | None) -> Outcome:
    """``finish`` with ``then_claim`` (``req.args``: token, result, note, holder, ttl)."""
    holder, ttl = req.args[3:]
    name = holder if holder is not None else default_holder()
    key = then_key(req.key)
    if refusal is None and req.key is not None and shape_key(req.key) is None and shape_key(key) is not None:
        refusal = Refusal("invalid_key", f"key {quote(req.key)} is longer than {200 - len(THEN_SUFFIX)} characters: "
                          f"a finish --then-claim keys its claim {quote(req.key + THEN_SUFFIX)}, of at most 200")
    refusal = refusal or shape_holder(name)
    claim_req = Request("claim", None, None, req.source, key, (holder, ttl))
    served = storm.store.serve(req, name)
    if served is None:
        decl = declaration(storm.store)
        ttl = decl.runner.ttl if ttl is None else ttl
        if not decl.error:
            refusal = refusal or ttl_refusal(decl.runner, ttl)
        served = storm.request(req, refusal, lambda snap, by, fx: _then_claimed(snap, by, fx, decl, req, claim_req,
                                                                              name, ttl), decl=decl)
    out = served
    if out.outcome == "refused":
        return out
    if out.claim is None:  # the finish repeated (its key asked again): the claim, repeated or asked anew
        out.claim = claim(storm, holder, req.args[4], req.source, None, key, wait, waiting)
    elif wait > 0 and _waits(out.claim, storm, lambda: _settles(storm, req.source, [])):
        out.claim = claim(storm, holder, req.args[4], req.source, None, key, wait, waiting)
    return out


def _then_claimed(snap: Snapshot, by: str, fx: Effects, decl: Any, req: Request, claim_req: Request, name: str,
                  ttl: int) -> Step | Refusal:
    """The plan of a finish then a claim: the finish's step, the claim's
    lines after its lines (``runs.finished_snapshot``), both answers."""
    step = _finished(snap, by, fx, decl, req)
    if isinstance(step, Refusal):
        return step
    after = finished_snapshot(snap, req.slug, req.args[1], step.events, by)
    plan = plan_claim(after, decl.runner, name, ttl, wall.seconds())
    halt = plan.after.state.halt if plan.after is not None else None
    then = claimed(by, name, plan.decision, plan.slug, plan.token, plan.expires, halt)
    then.due = next_due((plan.after or after).state.runs.values(), snap.now)
    events = list(plan.events)
    if plan.slug is not None and claim_req.key is not None:
        events[-1] = {**events[-1], "key": claim_req.key, "fingerprint": claim_req.fingerprint()}
    step.out.claim = then
    finish_after = step.after

    def after_both(recorded: list[dict[str, Any]]) -> list[str]:
        notes = finish_after(recorded)
        ours = recorded[len(recorded) - len(events):] if events else []
        if ours:
            then.recorded, then.event = True, ours[-1]
        return notes + claim_effects(fx, plan, name, ours[-1]["at"] if ours else "", snap)

    return Step(step.out, step.events + events, before=step.before, after=after_both, own=0)

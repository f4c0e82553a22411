"""The one path every request takes: shape -> authority -> lock ->
snapshot -> plan -> record, with the truthful answer when the record
cannot be made. It holds no state of its own: everything it reads and
writes goes through the storm's store (``store.interface.Store``)."""

from __future__ import annotations

from .. import wall
from ..core import config, fold, logread, queuetext
from ..core.errors import (
    Aborted, AppendFailed, RecordFailed, StormUnreadable, UnknownOrder, WriteFailed, carry_recorded,
)
from ..core.lane import Refusal, Snapshot, with_lane
from ..core.names import quote
from ..core.outcome import Outcome, Request, Step, masked, repeated
from ..core.records import replace
from ..core.resolver import resolve
from ..core.shapes import shape_key, shape_reason

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..store.interface import Effects, Judged, Store
    from .storm import Storm

    #: a request's plan: on the snapshot, for the principal ``by``, with the
    #: store's effects at hand, the step it takes or why it is refused
    Plan = Callable[[Snapshot, str, Effects], Step | Refusal]


def request(storm: Storm, req: Request, shape: Refusal | None, plan: Plan | None, dry_run: bool = False,
            decl: config.Declaration | None = None, operator_only: bool = False,
            on_unknown: Callable[..., Outcome] | None = None) -> Outcome:
    """The one path of every request. A ``dry_run`` takes it up to the
    queue append and the log write, then stops: it takes no lock (it is a
    reader, like ``list``), writes nothing, and answers what the request
    would have answered, with the run order it would leave.

    A request under a key that its principal has used before answers
    with the first outcome and records nothing when its arguments are
    the same, and is refused (``idempotency_conflict``) when they are not.

    ``on_unknown(req, by, decl, at, damage)``, when given, answers an
    admitted request that meets an unknown order (``adopt``), as a reset
    (``plan`` None) starts a new log; a refused one is then not recorded.

    A request the store gave up (``Aborted``) is a recorded refusal,
    ``reorder_conflict``: nothing of it happened, and a retry is safe."""
    store = storm.store
    decl = decl or declaration(store)
    judged = store.judge(req, decl, plan is None or operator_only)
    try:
        return _request(store, judged, req, shape, plan, dry_run, decl, on_unknown)
    except Aborted as exc:
        return _aborted(store, judged, req, decl, str(exc))


def declaration(store: Store) -> config.Declaration:
    """The declaration a request is judged by; one its caller may not read
    is none, and the caller's authority answers (the operator reads it):
    a role that may not read the storm is refused its requests
    (``not_operator``, exit 1), as a directory refuses a stranger."""
    try:
        return store.declaration()
    except StormUnreadable:
        return config.Declaration(False)


def _request(store: Store, judged: Judged, req: Request, shape: Refusal | None, plan: Plan | None, dry_run: bool,
             decl: config.Declaration, on_unknown: Callable[..., Outcome] | None) -> Outcome:
    """``request``, once the caller is judged."""
    verdict, owner_ids = judged.verdict, judged.owner_ids
    by = verdict.by
    bad_key = shape_key(req.key)
    if bad_key is not None:  # a key that is not one is never recorded, whatever else is wrong
        req = replace(req, key=None)
    too_long = shape_reason(req.reason)
    if too_long is not None:  # nor a reason too long to keep
        req = replace(req, reason=None)
    shape = shape or bad_key or too_long
    refusal = shape or verdict.refusal
    authorised = shape is None and verdict.admitted
    if refusal is not None and judged.unrecordable:
        return _refused(req, by, refusal, authorised, recorded=False,
                        why_not=DRY_RUN if dry_run else judged.unrecordable)
    if judged.unrecordable:  # admitted, so the caller is the owner and the log's place is known
        raise RecordFailed(judged.unrecordable)
    fx = store.effects(decl)
    at = wall.now()
    queued = False
    step: Step | None = None
    undo = None
    events: list[dict[str, Any]] = []
    try:
        with _UNLOCKED if dry_run else store.writing(req, decl, owner_ids):
            at = wall.now()  # the time the request is answered at, under the lock
            try:
                log = store.read(decl)
            except UnknownOrder as damage:
                if plan is not None and on_unknown is None:
                    raise  # answer 3, record nothing
                return _unknown(store, fx, req, by, refusal, authorised, on_unknown, damage, decl, at, dry_run)
            _not_moved(req, log)
            repeated, refusal, authorised, step, snap = _decide(store, fx, req, by, refusal, authorised, plan, log, at,
                                                                dry_run)
            if repeated is not None:
                return repeated
            if dry_run:
                if refusal is not None:
                    return _refused(req, by, refusal, authorised, recorded=False, why_not=DRY_RUN)
                return _rehearsed(req, step, snap, log)
            if refusal is not None:
                bodies = [_refused_body(req, refusal, authorised)]
                out = _refused(req, by, refusal, authorised, recorded=True)
                own = -1
            else:
                if step.line is not None:  # queue.txt before the log: a crash between leaves a lane a retry prioritises
                    fx.queue(step.line)
                    queued = True
                if step.before is not None:
                    undo = step.before()
                bodies, out, own = step.events, step.out, step.own
            if bodies and own is not None:
                _carry(req, bodies[own])
            events = store.append(log, bodies, at, by, owner_ids) if bodies else []
            if step is not None and step.after is not None:
                out.warnings += step.after(events)
    except WriteFailed as exc:  # (the store's words for an I/O error; ``AppendFailed`` says how far the append got)
        if undo is not None and getattr(exc, "state", "nothing") == "nothing":
            try:
                undo()
            except WriteFailed:  # what it leaves behind, ``taken_back`` said (``requests.kept_request``)
                pass
        return _not_written(fx, req, by, judged.name, refusal, authorised, exc, queued, at, owner_ids,
                            step.out if step is not None and refusal is None else None)
    except RecordFailed as exc:  # the store lost its connection as it committed, and learnt that it did
        if exc.recorded is True and exc.outcome is None and step is not None and refusal is None:
            exc.outcome = step.out
        raise
    except BaseException as stop:  # an interrupt the lock held back until the record was whole, raised as it let go
        if events and not isinstance(stop, Exception):  # its caller hears what was recorded (a claim's lease)
            try:
                out = _answered(fx, req, out, log, events, bodies, own, at, owner_ids)
            except Exception:  # noqa: BLE001 -- the interrupt is what is raised; the answer is carried as it stands
                pass
            carry_recorded(stop, out)
        raise
    return _answered(fx, req, out, log, events, bodies, own, at, owner_ids)


def _answered(fx: Effects, req: Request, out: Outcome, log: logread.LogRead, events: list[dict[str, Any]],
              bodies: list[dict[str, Any]], own: int | None, at: str, owner_ids: tuple[int, int] | None) -> Outcome:
    """``out``, the answer of a request that ``events`` recorded (none:
    a refusal that could not be, a request that records nothing), with
    the warnings of the log it read and its own line (``_recorded``)."""
    out.warnings = ([] if log.torn else list(log.warnings)) + out.warnings
    if events:
        _recorded(fx, req, out, events, len(bodies) - 1 if own is None else own % len(bodies), len(bodies),
                  at, owner_ids)
    return out


def _aborted(store: Store, judged: Judged, req: Request, decl: config.Declaration, message: str) -> Outcome:
    """Record (best effort) and answer a request the store gave up."""
    refusal = Refusal("reorder_conflict", message)
    by, recorded = judged.verdict.by, False
    try:
        with store.writing(req, decl, None):
            log = store.read(decl)
            store.append(log, [_refused_body(req, refusal, judged.verdict.admitted)], wall.now(), by, None)
        recorded = True
    except Exception:  # noqa: BLE001 -- the answer stands whether or not its record could be made
        pass
    return Outcome("refused", req.verb, req.slug, by, "reorder_conflict",
                   message if recorded else f"{message} (not recorded)", recorded=recorded)


def _unknown(store: Store, fx: Effects, req: Request, by: str, refusal: Refusal | None, authorised: bool,
             on_unknown: Callable[..., Outcome] | None, damage: UnknownOrder, decl: config.Declaration, at: str,
             dry_run: bool) -> Outcome:
    """The answer of a request that may meet an unknown order (a reset,
    an adopt): its refusal, not recorded; else ``on_unknown``'s answer,
    or a new log started."""
    if refusal is not None:
        return _refused(req, by, refusal, authorised, recorded=False,
                        why_not=DRY_RUN if dry_run else "the priority order is unknown")
    if on_unknown is not None:
        return on_unknown(req, by, decl, at, damage)
    return _start_new_log(store, fx, req, by, at, dry_run)


def _decide(store: Store, fx: Effects, req: Request, by: str, refusal: Refusal | None, authorised: bool,
            plan: Plan | None, log: logread.LogRead, at: str,
            dry_run: bool) -> tuple[Outcome | None, Refusal | None, bool, Step | None, Snapshot | None]:
    """Under the lock, what the request comes to: ``(repeated, refusal,
    authorised, step, snapshot)``. ``repeated`` is the first answer of a
    keyed request asked again with the same arguments (then nothing
    else counts); else the refusal (a key used for another request, a
    reset of a log that replays, the plan's own) or the plan's step,
    with the snapshot it was planned on."""
    keyed = log.state.keys.get(by, {}).get(req.key) if req.key is not None else None
    if keyed is not None and keyed.fingerprint == req.fingerprint():
        return _repeated(req, by, keyed, dry_run, log, at), refusal, authorised, None, None
    if keyed is not None and refusal is None:
        refusal, authorised = Refusal(
            "idempotency_conflict",
            f"key {quote(req.key)} was first used by {by} for a different request (line {keyed.seq}); "
            "a key names one request: use a new key for a new request"), True
    if plan is None and refusal is None:
        refusal, authorised = LOG_READABLE, True
    if refusal is not None:
        return None, refusal, authorised, None, None
    snap = store.snapshot(log, at)
    result = plan(snap, by, fx)
    if isinstance(result, Refusal):
        return None, result, True, None, snap
    return None, None, authorised, result, snap


def _recorded(fx: Effects, req: Request, out: Outcome, events: list[dict[str, Any]], own: int, count: int, at: str,
              owner_ids: tuple[int, int] | None) -> None:
    """Mark ``out`` recorded with its own line (``own`` of the ``count``
    bodies appended; a repair line may come first), say so in
    progress.log, and warn of a repair."""
    out.event = events[len(events) - count + own]
    out.recorded = True
    if events[0]["action"] == "repair":
        out.warnings.append(f"repaired the log: kept {events[0]['torn']} torn bytes in {events[0]['side']} and recorded it")
    _say(fx, at, out, req, owner_ids)


def _not_written(fx: Effects, req: Request, by: str, who: str, refusal: Refusal | None, authorised: bool,
                 exc: WriteFailed, queued: bool, at: str, owner_ids: tuple[int, int] | None,
                 done: Outcome | None = None) -> Outcome:
    """The answer when an I/O error stopped the record, saying truthfully
    what is on disk (see ``core.errors.AppendFailed``). A record that
    counts though it was not witnessed raises ``RecordFailed`` carrying
    ``done``, the answer the admitted request recorded."""
    state = exc.state if isinstance(exc, AppendFailed) else "nothing"
    why = str(exc)
    if state == "unwitnessed":
        note = f"it is on the log as line {exc.events[-1]['seq']} and counts, but {exc.words}"
        if refusal is not None:
            out = _refused(req, by, refusal, authorised, recorded=True)
            out.message += f" (recorded, but {note})"
        else:
            out = Outcome("done", req.verb, req.slug, by, message=f"recorded but not witnessed: {note}")
        _say(fx, at, out, req, owner_ids)
        if refusal is not None:
            return out
        raise RecordFailed(f"the {req.verb} was recorded but not witnessed: {note}; do not ask again", recorded=True,
                           outcome=done)
    if state == "uncertain":
        raise RecordFailed(
            f"the {req.verb} may or may not be on the log: {exc.words}: check storm-queue list before asking again",
            recorded=None)
    if refusal is not None:
        return _refused(req, by, refusal, authorised, recorded=False, why_not=why)
    queued_note = "; queue.txt already carries the new lane, so asking again prioritises it" if queued else ""
    if exc.denied:
        return Outcome("refused", req.verb, req.slug, by, "storm_unwritable",
                       f"account {who} cannot write the storm ({why}); nothing was recorded{queued_note}; "
                       "ask as the storm's owner, or make its files writable again")
    raise RecordFailed(f"the {req.verb} could not be recorded ({why}), so it did not happen{queued_note}; "
                       "fix the cause and ask again", recorded=False)


def _refused(req: Request, by: str, refusal: Refusal, authorised: bool, recorded: bool, why_not: str = "") -> Outcome:
    """The answer of a refused request; its words as ``_refused_body`` records them."""
    if why_not == DRY_RUN:
        return Outcome("refused", req.verb, req.slug, by, refusal.code, f"{masked(refusal.message)} ({DRY_RUN})",
                       dry_run=True)
    message = masked(refusal.message) if recorded else f"{masked(refusal.message)} (not recorded: {why_not})"
    return Outcome("refused", req.verb, req.slug, by, refusal.code, message, recorded=recorded)


def _start_new_log(store: Store, fx: Effects, req: Request, by: str, at: str, dry_run: bool) -> Outcome:
    """The operator's reset of an unreadable log: keep it aside, begin anew
    (with ``--keep-intact`` among its arguments, from the old log's longest
    prefix that verifies), naming every line it loses. A ``dry_run`` says
    what it would keep and lose, and the run order after it, and writes
    nothing."""
    keep = KEEP_INTACT in req.args
    cut = fx.cut(keep)
    if dry_run:
        lost = cut.abandons - cut.kept.length
        words = (f"would start a new log from the {cut.kept.seq} line(s) of the old one that verify from line 1 "
                 f"(the state they replay to), losing {len(cut.lost)} line(s), {lost} bytes" if keep else
                 f"would start a new log keeping none of the old one's lines, losing {len(cut.lost)} line(s), "
                 f"{cut.abandons} bytes abandoned")
        out = Outcome("done", "reset", None, by, message=f"{words}; the old one would be kept beside it ({DRY_RUN})",
                      dry_run=True, cut=cut)
        out.order = [row.slug for row in resolve(store.snapshot(cut.kept, at)).rows]
        return out
    body = {"action": "reset", "reason": req.reason, "abandons": None}
    if req.key is not None:
        body.update(key=req.key, fingerprint=req.fingerprint())
    event = fx.start_over(body, at, by, cut)
    if keep:
        words = (f"started a new log from the {event['kept']} line(s) of the old one that verify from line 1 "
                 f"(the state they replay to), {event['lost']} bytes lost; "
                 + (f"the old one is kept beside it as {event['abandoned']}" if event["abandoned"] else
                    "there was no old log file to keep"))
    else:
        words = f"started a new log; the old one is kept beside it ({event['abandons']} bytes abandoned)"
    out = Outcome("done", "reset", None, by, recorded=True, event=event, message=words, cut=cut)
    _say(fx, at, out, req, None)
    return out


def cached(write: Callable[[], Any], what: str, slug: str) -> list[str]:
    """Write what only caches what the log records (a marker); a failure is a note, not a failure."""
    try:
        write()
    except WriteFailed as exc:
        return [f"the {what} of {slug} could not be written ({exc.strerror}); the log's record stands"]
    return []


def _not_moved(req: Request, log: logread.LogRead) -> None:
    """When the log's last line says the storm moved (``migrate``):
    ``NotHere`` (exit 2), or for a claim ``Moved`` (exit 3: the order is
    no longer kept here, and a runner is never sent to work)."""
    if log.state.moved_to:
        from ..core.errors import Moved, NotHere
        from ..roots import shown

        where = f"this storm moved to {shown(log.state.moved_to)} (the log's last line says so)"
        if req.verb == "claim":
            raise Moved(f"the order is no longer kept here: {where}; claim there with --root URL; nothing was "
                        "leased or recorded here", shown(log.state.moved_to))
        raise NotHere(f"{where}: ask there with --root URL; nothing was recorded here")


def _carry(req: Request, body: dict[str, Any]) -> None:
    """Put the request's reason and key (with its fingerprint) on its own line's body."""
    if req.reason is not None:
        body["reason"] = req.reason
    if req.key is not None:
        body["key"] = req.key
        body["fingerprint"] = req.fingerprint()


def _rehearsed(req: Request, step: Step, snap: Snapshot, log: logread.LogRead) -> Outcome:
    """The outcome of a dry run that the request would pass: what it would
    move, and the run order the replayed lane would then give."""
    out = step.out
    if step.line is not None:
        body = step.events[-1]
        snap = with_lane(snap, queuetext.Lane(req.slug, body["issue"], tuple(body["deps"]), 1 << 61))
    events = [{"at": snap.now, "by": out.by, **e} for e in step.events]
    led = snap.ledgers
    settles = [(e["slug"], e["ledger"]) for e in step.events if e["action"] == "settle" and not e.get("noop")]
    if settles:  # what the ledgers will say once the settles are written
        led = replace(led, integrated=led.integrated | {s for s, how in settles if how == "integrated"},
                      abandoned=led.abandoned | {s for s, how in settles if how == "abandoned"})
    after = Snapshot(snap.lanes, led, fold.replay(events, snap.state), snap.now)
    out.dry_run = True
    out.order = [row.slug for row in resolve(after).rows]
    out.message = f"{out.message} ({DRY_RUN})"
    out.warnings = [] if log.torn else list(log.warnings)
    return out


def _repeated(req: Request, by: str, keyed: fold.Keyed, dry_run: bool, log: logread.LogRead, at: str) -> Outcome:
    """``core.outcome.repeated``, of the lease the log folds to now."""
    event = keyed.event
    lease = log.state.run(event["slug"]).lease if event["action"] == "claim" else None
    return repeated(req, by, keyed, at, None if lease is None else (lease.token, lease.expires), dry_run,
                    [] if log.torn else list(log.warnings))


DRY_RUN = "dry run: nothing recorded"
#: the argument of a reset that keeps the old log's intact prefix
KEEP_INTACT = "--keep-intact"

LOG_READABLE = Refusal("log_readable", "the priority log replays fine, so there is nothing to reset; "
                       "use bump and unbump to change the lane")


def _refused_body(req: Request, refusal: Refusal, authorised: bool) -> dict[str, Any]:
    """A refused request's line: its words with each password masked, as
    ``Request`` masks the caller's text (a plan may quote an argument it
    was given beside the request, a dependency or an issue)."""
    return {"action": "refused", "requested": req.verb, "slug": req.slug, "code": refusal.code,
            "message": masked(refusal.message), "authorised": authorised}


def _progress_words(out: Outcome, req: Request) -> str:
    """One plain-words line; every piece of outside text is quoted."""
    target = f" {quote(req.slug)}" if req.slug is not None else ""
    words = f"{req.verb}{target} by {quote(out.by)}: "
    if out.outcome == "refused":
        words += f"refused ({out.code}): {out.message}"
    else:
        words += out.outcome
        if out.moved:
            words += f"; moved {' '.join(out.moved)}"
        if out.removed:
            words += f"; removed {' '.join(out.removed)}"
        if req.verb not in ("push", "bump", "unbump"):
            words += f": {out.message}"
    if req.reason is not None:
        words += f"; reason {quote(req.reason)}"
    return words


class _Unlocked:
    """What a dry run holds instead of the writers' exclusion: nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_UNLOCKED = _Unlocked()


def _say(fx: Effects, at: str, out: Outcome, req: Request, owner_ids: tuple[int, int] | None) -> None:
    """Say the request in progress.log; a line that could not be written is a warning of ``out``."""
    note = fx.say(at, _progress_words(out, req), owner_ids)
    if note:
        out.warnings.append(note)

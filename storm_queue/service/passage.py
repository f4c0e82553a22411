"""The one path every request takes: shape -> authority -> lock ->
snapshot -> plan -> record, with the truthful answer when the record
cannot be made."""

from __future__ import annotations

import os

from .. import wall
from ..core import config, fold, logread, queuetext
from ..core.errors import RecordFailed, UnknownOrder
from ..core.lane import Refusal, Snapshot, with_lane
from ..core.names import quote
from ..core.outcome import Outcome, Request, Step
from ..core.records import replace
from ..core.resolver import resolve
from ..core.shapes import shape_key
from ..store.directory import ledger
from ..store.directory.log import reader
from ..store.directory.log.checkpoint import checkpoint_path
from . import authority

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


class Passage:
    """The request path, for ``service.storm.Storm``."""


    def _request(self, req: Request, shape: Refusal | None,
                 plan: Callable[[Snapshot, str], Step | Refusal] | None,
                 dry_run: bool = False, decl: config.Declaration | None = None, operator_only: bool = False,
                 on_unknown: Callable[..., Outcome] | None = None) -> Outcome:
        """The one path of every request. A ``dry_run`` takes it up to the
        queue append and the log write, then stops: it takes no lock (it is a
        reader, like ``list``), writes nothing, and answers what the request
        would have answered, with the run order it would leave.

        A request under a key that its principal has used before answers
        with the first outcome and records nothing when its arguments are
        the same, and is refused (``idempotency_conflict``) when they are not.

        ``on_unknown(req, by, log_path, at, damage)``, when given, answers an
        admitted request that meets an unknown order (``adopt``), as a reset
        (``plan`` None) starts a new log; a refused one is then not recorded."""
        decl = decl or self.declaration()
        verdict, owner_ids, unrecordable, who = self._judge(decl, req.source, plan is None or operator_only)
        by = verdict.by
        bad_key = shape_key(req.key)
        if bad_key is not None:  # a key that is not one is never recorded, whatever else is wrong
            req = replace(req, key=None)
        shape = shape or bad_key
        refusal = shape or verdict.refusal
        authorised = shape is None and verdict.admitted
        log_path = self.log_path(decl)
        if refusal is not None and unrecordable:
            return self._refused(req, by, refusal, authorised, recorded=False,
                                 why_not=DRY_RUN if dry_run else unrecordable)
        if unrecordable:  # admitted, so the caller is the owner and the log's place is known
            raise RecordFailed(unrecordable)
        from ..store.directory.log import writer

        at = wall.now()
        queued = False
        step: Step | None = None
        undo = None
        try:
            with _UNLOCKED if dry_run else self._writing(log_path, owner_ids):
                at = wall.now()  # the time the request is answered at, under the lock
                try:
                    log = self._read(decl)
                except UnknownOrder as damage:
                    if plan is not None and on_unknown is None:
                        raise  # answer 3, record nothing
                    return self._unknown(req, by, refusal, authorised, on_unknown, damage, log_path, at, dry_run)
                _not_moved(log)
                repeated, refusal, authorised, step, snap = self._decide(req, by, refusal, authorised, plan, log, at,
                                                                         dry_run)
                if repeated is not None:
                    return repeated
                if dry_run:
                    if refusal is not None:
                        return self._refused(req, by, refusal, authorised, recorded=False, why_not=DRY_RUN)
                    return _rehearsed(req, step, snap, log)
                if refusal is not None:
                    bodies = [_refused_body(req, refusal, authorised)]
                    out = self._refused(req, by, refusal, authorised, recorded=True)
                    own = -1
                else:
                    if step.line is not None:  # queue.txt before the log: a crash between leaves a lane a retry prioritises
                        self._queue(log_path, step.line)
                        queued = True
                    if step.before is not None:
                        writer.check_writable(log_path)
                        undo = step.before()
                    bodies, out, own = step.events, step.out, step.own
                if bodies and own is not None:
                    _carry(req, bodies[own])
                events = self._append(log, bodies, at, by, owner_ids) if bodies else []
                if step is not None and step.after is not None:
                    out.warnings += step.after(events)
        except (OSError, writer.AppendFailed) as exc:
            if undo is not None and getattr(exc, "state", "nothing") == "nothing":
                try:
                    undo()
                except OSError:
                    pass
            return self._not_written(req, by, who, refusal, authorised, exc, queued, at, owner_ids)
        out.warnings = ([] if log.torn else list(log.warnings)) + out.warnings
        if events:
            self._recorded(req, out, events, len(bodies) - 1 if own is None else own % len(bodies), len(bodies),
                           at, owner_ids)
        return out

    def _unknown(self, req: Request, by: str, refusal: Refusal | None, authorised: bool,
                 on_unknown: Callable[..., Outcome] | None, damage: UnknownOrder, log_path: str, at: str,
                 dry_run: bool) -> Outcome:
        """The answer of a request that may meet an unknown order (a reset,
        an adopt): its refusal, not recorded; else ``on_unknown``'s answer,
        or a new log started."""
        if refusal is not None:
            return self._refused(req, by, refusal, authorised, recorded=False,
                                 why_not=DRY_RUN if dry_run else "the priority order is unknown")
        if on_unknown is not None:
            return on_unknown(req, by, log_path, at, damage)
        return self._start_new_log(req, by, log_path, at)

    def _decide(self, req: Request, by: str, refusal: Refusal | None, authorised: bool,
                plan: Callable[[Snapshot, str], Step | Refusal] | None, log: logread.LogRead, at: str,
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
        snap = self._snapshot(log, at)
        result = plan(snap, by)
        if isinstance(result, Refusal):
            return None, result, True, None, snap
        return None, None, authorised, result, snap

    def _recorded(self, req: Request, out: Outcome, events: list[dict[str, Any]], own: int, count: int, at: str,
                  owner_ids: tuple[int, int] | None) -> None:
        """Mark ``out`` recorded with its own line (``own`` of the ``count``
        bodies appended; a repair line may come first), say so in
        progress.log, and warn of a repair."""
        out.event = events[len(events) - count + own]
        out.recorded = True
        if events[0]["action"] == "repair":
            out.warnings.append(f"repaired the log: kept {events[0]['torn']} torn bytes in {events[0]['side']} and recorded it")
        self._say(at, _progress_words(out, req), owner_ids)

    def _not_written(self, req: Request, by: str, who: authority.Caller, refusal: Refusal | None, authorised: bool,
                     exc: Exception, queued: bool, at: str, owner_ids: tuple[int, int] | None) -> Outcome:
        """The answer when an I/O error stopped the record, saying truthfully
        what is on disk (see ``writer.AppendFailed``)."""
        import errno

        from ..store.directory.log.writer import AppendFailed

        state = exc.state if isinstance(exc, AppendFailed) else "nothing"
        cause = exc.cause if isinstance(exc, AppendFailed) else exc
        why = f"{getattr(cause, 'strerror', None) or cause}" + (f": {cause.filename}" if getattr(cause, "filename", None) else "")
        if state == "unwitnessed":
            note = (f"it is on the log as line {exc.events[-1]['seq']} and counts, but the log's witness could not be "
                    f"replaced ({why}); the next request re-witnesses it")
            if refusal is not None:
                out = self._refused(req, by, refusal, authorised, recorded=True)
                out.message += f" (recorded, but {note})"
            else:
                out = Outcome("done", req.verb, req.slug, by, message=f"recorded but not witnessed: {note}")
            self._say(at, _progress_words(out, req), owner_ids)
            if refusal is not None:
                return out
            raise RecordFailed(f"the {req.verb} was recorded but not witnessed: {note}; do not ask again", recorded=True)
        if state == "uncertain":
            raise RecordFailed(
                f"the {req.verb} may or may not be on the log: the disk could not make it durable ({why}) and its line "
                "could not be cut back off; the storm's disk is failing: check storm-queue list before asking again",
                recorded=None)
        if refusal is not None:
            return self._refused(req, by, refusal, authorised, recorded=False, why_not=why)
        queued_note = "; queue.txt already carries the new lane, so asking again prioritises it" if queued else ""
        if getattr(cause, "errno", None) in (errno.EACCES, errno.EPERM, errno.EROFS):
            return Outcome("refused", req.verb, req.slug, by, "storm_unwritable",
                           f"account {who.name} cannot write the storm ({why}); nothing was recorded{queued_note}; "
                           "ask as the storm's owner, or make its files writable again")
        raise RecordFailed(f"the {req.verb} could not be recorded ({why}), so it did not happen{queued_note}; "
                           "fix the cause and ask again", recorded=False)

    def _refused(self, req: Request, by: str, refusal: Refusal, authorised: bool, recorded: bool, why_not: str = "") -> Outcome:
        if why_not == DRY_RUN:
            return Outcome("refused", req.verb, req.slug, by, refusal.code, f"{refusal.message} ({DRY_RUN})", dry_run=True)
        message = refusal.message if recorded else f"{refusal.message} (not recorded: {why_not})"
        return Outcome("refused", req.verb, req.slug, by, refusal.code, message, recorded=recorded)

    def _unrecordable(self, decl: config.Declaration, who: authority.Caller, op: authority.Owner, log_path: str) -> str:
        """Why this caller cannot record a line, or '' when it can."""
        if decl.log_error:
            return f"{decl.log_error}, so the log's place is unknown"
        if authority.is_owner(who, op):
            return ""
        if who.euid == 0:
            missing = [p for p in (log_path, reader.witness_path(log_path), log_path + ".lock") if not os.path.isfile(p)]
            if not missing:
                return ""
            return f"{os.path.basename(missing[0])} does not exist, and another account never creates a file in the storm"
        return f"account {who.name} cannot write the storm of {op.name}"

    def _start_new_log(self, req: Request, by: str, log_path: str, at: str) -> Outcome:
        """The operator's reset of an unreadable log: keep it aside, begin anew."""
        from ..store.directory.log import writer

        abandons = _abandon(log_path, at)
        fresh = logread.LogRead(log_path, fresh=True)
        try:
            body = {"action": "reset", "reason": req.reason, "abandons": abandons}
            if req.key is not None:
                body.update(key=req.key, fingerprint=req.fingerprint())
            event = writer.append(fresh, [body], at, by)[-1]
        except writer.AppendFailed as exc:
            if exc.state != "nothing":
                raise
            raise RecordFailed(
                f"the reset kept the old log beside it as {os.path.basename(log_path)}.abandoned-{at.replace(':', '')}, "
                f"but the new log's first line could not be written ({exc}); the storm now reads as one with "
                "nothing prioritised, without the reset's record; fix the cause and go on", recorded=False) from None
        out = Outcome("done", "reset", None, by, recorded=True, event=event,
                      message=f"started a new log; the old one is kept beside it ({abandons} bytes abandoned)")
        ledger.say(self.root, at, _progress_words(out, req), None)
        return out


def _abandon(log_path: str, at: str) -> int:
    """Move the unreadable log and its witness aside; return the larger of
    the bytes on disk and the witnessed length."""
    from ..store.directory.fsutil import fsync_dir

    size = 0
    try:
        size = os.stat(log_path, follow_symlinks=False).st_size
    except FileNotFoundError:
        pass
    witnessed = 0
    wpath = reader.witness_path(log_path)
    try:
        w = reader.read_witness(log_path)
        witnessed = w.length if w else 0
    except UnknownOrder:
        pass
    stamp = at.replace(":", "")
    for path in (log_path, wpath, checkpoint_path(log_path)):
        if os.path.lexists(path):
            os.rename(path, f"{path}.abandoned-{stamp}")
    fsync_dir(os.path.dirname(log_path) or ".")
    return max(size, witnessed)


def _not_moved(log: logread.LogRead) -> None:
    """``NotHere`` when the log's last line says the storm moved (``migrate``)."""
    if log.state.moved_to:
        from ..core.errors import NotHere
        from ..roots import shown

        raise NotHere(f"this storm moved to {shown(log.state.moved_to)} (the log's last line says so): ask "
                      "there with --root URL; nothing was recorded here")


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
    after = Snapshot(snap.lanes, snap.ledgers, fold.replay(events, snap.state), snap.now)
    out.dry_run = True
    out.order = [row.slug for row in resolve(after).rows]
    out.message = f"{out.message} ({DRY_RUN})"
    out.warnings = [] if log.torn else list(log.warnings)
    return out


def _repeated(req: Request, by: str, keyed: fold.Keyed, dry_run: bool, log: logread.LogRead, at: str) -> Outcome:
    """The first outcome of a keyed request, rebuilt from the event that
    recorded it; nothing new is recorded. A claim is repeated only while
    the lease it took is live: a repeat never sends a runner to work
    without one."""
    event = keyed.event
    note = f"a repeat of line {keyed.seq} (key {quote(req.key)}): nothing new recorded"
    action = event["action"]
    lease = log.state.run(event["slug"]).lease if action == "claim" else None
    if action == "claim" and (lease is None or lease.token != event["token"] or lease.expires <= at):
        out = Outcome("refused", req.verb, event["slug"], by, "stale_fence",
                      f"the lease that this key's claim took (token {event['token']} on {event['slug']}) has ended; "
                      f"claim again under a new key ({note})")
    elif action == "refused":
        out = Outcome("refused", req.verb, req.slug, by, event["code"], f"{event['message']} ({note})")
    else:
        out = Outcome("noop" if event.get("noop") else "done", req.verb, req.slug, by,
                      message=f"{action} {event.get('slug') or ''}".rstrip() + f" was recorded ({note})",
                      moved=list(event.get("moved", ())), removed=list(event.get("removed", ())),
                      token=event.get("token"), expires=event.get("expires"))
        if action == "claim":
            out.slug, out.holder = event["slug"], event["holder"]
            out.decision = f"run {event['slug']} {event['issue']} {event['token']}"
        if action in ("push", "add"):
            out.appended = event["appended"]
    out.repeat = keyed.seq
    out.dry_run = dry_run
    out.warnings = [] if log.torn else list(log.warnings)
    return out


DRY_RUN = "dry run: nothing recorded"

LOG_READABLE = Refusal("log_readable", "the priority log replays fine, so there is nothing to reset; "
                       "use bump and unbump to change the lane")


def _refused_body(req: Request, refusal: Refusal, authorised: bool) -> dict[str, Any]:
    return {"action": "refused", "requested": req.verb, "slug": req.slug, "code": refusal.code,
            "message": refusal.message, "authorised": authorised}


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

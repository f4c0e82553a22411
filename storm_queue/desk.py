"""The service: every request goes shape -> authority -> lock -> snapshot ->
plan -> record, and every reader takes a snapshot and the resolver. It never
prints; it returns results and raises typed errors."""

from __future__ import annotations

import os

from . import authority, config, fold, ledger, queuefile
from .errors import Busy, NoStorm, RecordFailed, UnknownOrder
from .lane import Plan, Refusal, Snapshot, plan_bump, plan_push, plan_unbump, with_lane
from .log import reader
from .log.checkpoint import checkpoint_path
from .log.framing import sha256
from .names import as_text, is_issue, is_name, quote, why_not_name
from .queuefile import split_deps
from .records import dataclass, field
from .resolver import View, resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping


def exit_code(code: str | None) -> int:
    """The exit code of a request's outcome: 0 done, 1 not authorised, 2 refused."""
    if code is None:
        return 0
    return 1 if code in authority.CODES else 2


def now() -> str:
    """UTC time, RFC 3339 with microseconds and ``Z``."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def find_root(root: str | None, env: Mapping[str, str], cwd: str | None = None) -> str:
    """The storm root: ``root``, else ``$STORM_QUEUE_ROOT``, else the nearest
    directory at or above ``cwd`` holding ``queue.txt`` or ``storm.toml``."""
    given = root or env.get("STORM_QUEUE_ROOT")
    if given:
        if not os.path.isdir(given):
            raise NoStorm(f"storm root {quote(given)} is not a directory; pass --root DIR for an existing storm")
        return os.path.abspath(given)
    here = os.path.abspath(cwd or os.getcwd())
    while True:
        if any(os.path.exists(os.path.join(here, f)) for f in ("queue.txt", "storm.toml")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise NoStorm(
                "no storm here: no queue.txt or storm.toml in this directory or above it; "
                "cd into a storm, pass --root DIR, or set STORM_QUEUE_ROOT"
            )
        here = parent


@dataclass
class Listing:
    """What ``list`` shows: the resolved view and everything worth saying;
    ``marks`` says, for each slug in the priority lane, which recorded
    request put it there (who, when, why)."""

    root: str
    view: View
    skipped: tuple[queuefile.Skipped, ...]
    warnings: list[str]
    marks: Mapping[str, fold.Mark] = field(default_factory=dict)

    @property
    def decision(self) -> str:
        return self.view.decision


@dataclass
class Outcome:
    """The answer to a request. ``outcome`` is ``done``, ``noop`` or
    ``refused``; ``recorded`` says whether its log line was written. A dry
    run (``dry_run``) records nothing and carries the run ``order`` the
    request would leave."""

    outcome: str
    action: str
    slug: str | None
    by: str
    code: str | None = None
    message: str = ""
    moved: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    recorded: bool = False
    appended: bool | None = None
    warnings: list[str] = field(default_factory=list)
    event: dict[str, Any] | None = None
    dry_run: bool = False
    order: list[str] | None = None

    @property
    def exit_code(self) -> int:
        return exit_code(self.code)

    def check(self) -> "Outcome":
        """Return this outcome, or raise ``Refused`` when the request was refused."""
        if self.outcome == "refused":
            from .errors import Refused

            raise Refused(self.code or "", self.message, self.exit_code, self.recorded)
        return self

    def to_json(self) -> dict[str, Any]:
        out = {
            "outcome": self.outcome, "code": self.code, "action": self.action, "slug": self.slug,
            "by": self.by, "moved": self.moved, "already": self.already, "removed": self.removed,
            "recorded": self.recorded, "message": self.message,
        }
        if self.appended is not None:
            out["appended"] = self.appended
        out["warnings"] = self.warnings
        if self.dry_run:
            out["dry_run"] = True
            out["order"] = self.order
        return out


@dataclass(frozen=True)
class _Request:
    verb: str
    slug: str | None  # raw text as given
    reason: str | None
    source: str | None


class Storm:
    """One storm directory, read fresh on every call.

    ``wait`` is how many seconds a writer waits for the writers' lock.
    """

    def __init__(self, root: str, env: Mapping[str, str] | None = None, wait: float = 30.0):
        self.root = root
        self.env = dict(os.environ if env is None else env)
        self.wait = wait

    @classmethod
    def find(cls, root: str | None = None, env: Mapping[str, str] | None = None, wait: float = 30.0) -> "Storm":
        env = os.environ if env is None else env
        return cls(find_root(root, env), env, wait)

    # -- reading -------------------------------------------------------

    def declaration(self) -> config.Declaration:
        return config.load(self.root)

    def log_path(self, decl: config.Declaration) -> str:
        return os.path.join(self.root, decl.log)

    def _snapshot(self, log: reader.LogRead) -> tuple[Snapshot, queuefile.QueueFile]:
        queue = queuefile.read(os.path.join(self.root, "queue.txt"))
        return Snapshot({lane.slug: lane for lane in queue.lanes}, ledger.read(self.root), log.state), queue

    def listing(self, decl: config.Declaration | None = None) -> Listing:
        """The storm as it will run; reads only, writes nothing."""
        decl = decl or self.declaration()
        if decl.log_error:
            raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")
        log = reader.read(self.log_path(decl))
        snap, queue = self._snapshot(log)
        view = resolve(snap)
        warnings = list(log.warnings)
        if view.stale:
            warnings.append(
                "the priority lane is stale after a change to queue.txt or the ledgers; it runs as "
                "replayed, and the next request will re-derive it"
            )
        return Listing(self.root, view, queue.skipped, warnings, log.state.marks)

    def why(self, slug: str):
        """Where the lane ``slug`` stands and why, as plain data
        (``why.Why``); reads only, writes nothing."""
        from . import why

        decl = self.declaration()
        if decl.log_error:
            raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")
        log = reader.read(self.log_path(decl))
        snap, queue = self._snapshot(log)
        return why.explain(snap, resolve(snap), queue.skipped, as_text(slug))

    def history(self, each, decl: config.Declaration | None = None) -> reader.LogRead:
        """Read the whole log, oldest first, calling ``each(line, event)``
        for every line that passed the reader's checks (a line is never held
        longer than that call). Damage raises ``UnknownOrder`` after ``each``
        has seen every line before it."""
        decl = decl or self.declaration()
        if decl.log_error:
            raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")
        return reader.read(self.log_path(decl), use_checkpoint=False, each=each)

    def verify(self, progress: Callable[[int], None] | None = None):
        """The full audit of the priority log (see ``log.audit``); reads only.
        ``progress`` is told the byte offset reached now and then."""
        from .log import audit

        decl = self.declaration()
        if decl.log_error:
            raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")
        return audit.audit(self.log_path(decl), progress)

    def next(self) -> tuple[Listing, list[str]]:
        """Decide, then (as the owner) mark blocked lanes met before the chosen
        one and say skipped lines and stray slugs once in ``progress.log``.
        Returns the listing and notes for stderr."""
        decl = self.declaration()
        listing = self.listing(decl)
        log_path = self.log_path(decl)
        who = authority.caller(self.env)
        op = authority.owner(self.root)
        view = listing.view
        said = ledger.SaidOnce(log_path)
        news = [
            (f"skipped {s.line} {sha256(s.text.encode('utf-8', 'replace')).hexdigest()[:16]}",
             f"queue.txt line {s.line} skipped: {quote(s.text)}: {s.why}")
            for s in listing.skipped
        ] + [(f"stray {slug}", f"prioritised lane {slug} is stray: queue.txt no longer carries it") for slug in view.stray]
        news = [(k, words) for k, words in news if k not in said.keys()]
        if not (news or view.to_block):
            return listing, []
        if not authority.is_owner(who, op):
            return listing, [f"next: {who.name} is not the storm's owner ({op.name}), so blocked lanes are not marked and progress.log is not written"]
        from .log.lock import held

        at = now()
        try:
            with held(log_path, 0.5, may_create=True):
                for row in view.to_block:
                    if ledger.has_result(self.root, row.slug):  # another next got here first
                        continue
                    ledger.mark_blocked(self.root, row.slug, list(row.waits_on), at, None)
                    ledger.say(self.root, at, f"next: marked {row.slug} blocked on abandoned {', '.join(row.waits_on)}", None)
                fresh = [(k, w) for k, w in news if k not in said.keys(reload=True)]
                for _, words in fresh:
                    ledger.say(self.root, at, words, None)
                said.add([k for k, _ in fresh])
        except Busy:  # another writer is at work; the next call catches up
            return listing, ["next: the storm is busy, so blocked lanes were not marked this time"]
        except (OSError, RecordFailed) as exc:
            return listing, [f"next: side effects skipped: {exc}"]
        return listing, []

    # -- requests ------------------------------------------------------

    def bump(self, slug: str, reason: str | None = None, source: str | None = None, dry_run: bool = False) -> Outcome:
        """Prioritise a queued lane, pulling its dependencies forward. With
        ``dry_run``, answer as the request would and record nothing."""
        req = _Request("bump", as_text(slug), _text(reason), _text(source))
        return self._request(req, _shape_names(req.slug, (), req.source), lambda snap: (plan_bump(snap, req.slug), _lane_fields(snap, req.slug), None), dry_run)

    def unbump(self, slug: str, reason: str | None = None, source: str | None = None, dry_run: bool = False) -> Outcome:
        """Take a lane out of the priority lane, with what only it required.
        With ``dry_run``, answer as the request would and record nothing."""
        req = _Request("unbump", as_text(slug), _text(reason), _text(source))
        return self._request(req, _shape_names(req.slug, (), req.source), lambda snap: (plan_unbump(snap, req.slug), {}, None), dry_run)

    def push(self, slug: str, issue: str, deps: str | tuple[str, ...] | None = None,
             reason: str | None = None, source: str | None = None, dry_run: bool = False) -> Outcome:
        """Append a lane to ``queue.txt`` (unless queued) and prioritise it.
        With ``dry_run``, answer as the request would and write nothing."""
        req = _Request("push", as_text(slug), _text(reason), _text(source))
        issue = as_text(issue)
        dep_list = split_deps(as_text(deps)) if isinstance(deps, str) else (None if deps is None else tuple(as_text(d) for d in deps))
        refusal = _shape_names(req.slug, dep_list or (), req.source)
        if refusal is None and not is_issue(issue):
            refusal = Refusal("invalid_issue", f"issue {quote(issue)} is not ASCII digits or '-'")

        def plan(snap: Snapshot):
            result, append = plan_push(snap, req.slug, issue, dep_list)
            deps = tuple(dict.fromkeys(dep_list or ()))
            if not append:
                return result, _lane_fields(snap, req.slug, issue, deps), None
            return result, {"issue": issue, "deps": list(deps)}, queuefile.format_line(req.slug, issue, deps)

        return self._request(req, refusal, plan, dry_run)

    def reset(self, reason: str | None, source: str | None = None) -> Outcome:
        """Start a new log when the old one cannot be replayed; operator only."""
        req = _Request("reset", None, _text(reason), _text(source))
        refusal = _shape_names(None, (), req.source)
        if refusal is None and not (req.reason or "").strip():
            refusal = Refusal("blank_reason", "reset needs --reason TEXT saying why the old log is abandoned")
        return self._request(req, refusal, None)

    # -- the one path every request takes ------------------------------

    def _request(self, req: _Request, shape: Refusal | None,
                 plan: Callable[[Snapshot], tuple[Plan | Refusal, dict[str, Any], str | None]] | None,
                 dry_run: bool = False) -> Outcome:
        """The one path of every request. A ``dry_run`` takes it up to the
        queue append and the log write, then stops: it takes no lock (it is a
        reader, like ``list``), writes nothing, and answers what the request
        would have answered, with the run order it would leave."""
        decl = self.declaration()
        who = authority.caller(self.env)
        op = authority.owner(self.root)
        verdict = authority.judge(who, op, decl, req.source, operator_only=plan is None)
        by = verdict.by
        refusal = shape or verdict.refusal
        authorised = shape is None and verdict.admitted
        log_path = self.log_path(decl)
        owner_ids = None if authority.is_owner(who, op) else (op.uid, op.gid)
        unrecordable = self._unrecordable(decl, who, op, log_path)
        if refusal is not None and unrecordable:
            return self._refused(req, by, refusal, authorised, recorded=False,
                                 why_not=DRY_RUN if dry_run else unrecordable)
        if unrecordable:  # admitted, so the caller is the owner and the log's place is known
            raise RecordFailed(unrecordable)
        from contextlib import nullcontext

        from .log import lock, writer

        at = now()
        queued = False
        try:
            with nullcontext() if dry_run else lock.held(log_path, self.wait, may_create=owner_ids is None):
                try:
                    log = reader.read(log_path)
                except UnknownOrder:
                    if plan is not None:
                        raise  # answer 3, record nothing
                    if refusal is not None:
                        return self._refused(req, by, refusal, authorised, recorded=False,
                                             why_not="the priority order is unknown")
                    return self._start_new_log(req, by, log_path, at)
                if plan is None and refusal is None:
                    refusal, authorised = LOG_READABLE, True
                if refusal is None:
                    snap = self._snapshot(log)[0]
                    result, fields, line = plan(snap)
                    if isinstance(result, Refusal):
                        refusal, authorised = result, True
                if dry_run:
                    if refusal is not None:
                        return self._refused(req, by, refusal, authorised, recorded=False, why_not=DRY_RUN)
                    return _rehearsed(req, by, result, fields, line, snap, log)
                if refusal is not None:
                    body = _refused_body(req, refusal, authorised)
                    out = self._refused(req, by, refusal, authorised, recorded=True)
                else:
                    if line is not None:  # queue.txt before the log: a crash between leaves a lane a retry prioritises
                        writer.check_writable(log_path)
                        queuefile.append_line(os.path.join(self.root, "queue.txt"), line)
                        queued = True
                    body, out = _admitted(req, by, result, fields, line is not None)
                if req.reason is not None:
                    body["reason"] = req.reason
                events = writer.append(log, [body], at, by, owner_ids)
        except (OSError, writer.AppendFailed) as exc:
            return self._not_written(req, by, who, refusal, authorised, exc, queued, at, owner_ids)
        out.event = events[-1]
        out.recorded = True
        out.warnings = [] if log.torn else list(log.warnings)
        if len(events) > 1:
            out.warnings.append(f"repaired the log: kept {events[0]['torn']} torn bytes in {events[0]['side']} and recorded it")
        ledger.say(self.root, at, _progress_words(out, req), owner_ids)
        return out

    def _not_written(self, req: _Request, by: str, who: authority.Caller, refusal: Refusal | None, authorised: bool,
                     exc: Exception, queued: bool, at: str, owner_ids: tuple[int, int] | None) -> Outcome:
        """The answer when an I/O error stopped the record, saying truthfully
        what is on disk (see ``writer.AppendFailed``)."""
        import errno

        from .log.writer import AppendFailed

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
            ledger.say(self.root, at, _progress_words(out, req), owner_ids)
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

    def _refused(self, req: _Request, by: str, refusal: Refusal, authorised: bool, recorded: bool, why_not: str = "") -> Outcome:
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

    def _start_new_log(self, req: _Request, by: str, log_path: str, at: str) -> Outcome:
        """The operator's reset of an unreadable log: keep it aside, begin anew."""
        from .log import writer

        abandons = _abandon(log_path, at)
        fresh = reader.LogRead(log_path, fresh=True)
        try:
            event = writer.append(fresh, [{"action": "reset", "reason": req.reason, "abandons": abandons}], at, by)[-1]
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
    from .fsutil import fsync_dir

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


def _rehearsed(req: _Request, by: str, plan: Plan, fields: dict[str, Any], line: str | None,
               snap: Snapshot, log: reader.LogRead) -> Outcome:
    """The outcome of a dry run that the request would pass: what it would
    move, and the run order the replayed lane would then give."""
    body, out = _admitted(req, by, plan, fields, line is not None)
    if line is not None:
        snap = with_lane(snap, queuefile.Lane(req.slug, fields["issue"], tuple(fields["deps"]), 1 << 61))
    after = Snapshot(snap.lanes, snap.ledgers, fold.apply(snap.state, body))
    out.dry_run = True
    out.order = [row.slug for row in resolve(after).rows]
    out.message = f"{out.message} ({DRY_RUN})"
    out.warnings = [] if log.torn else list(log.warnings)
    return out


def _admitted(req: _Request, by: str, plan: Plan, fields: dict[str, Any], appended: bool) -> tuple[dict[str, Any], Outcome]:
    """The log body and the outcome of an admitted request."""
    body: dict[str, Any] = {"action": req.verb, "slug": req.slug, **fields,
                            "moved": list(plan.moved), "removed": list(plan.removed)}
    if plan.noop:
        body["noop"] = plan.noop
    if req.verb == "push":
        body["appended"] = appended
    if plan.noop:
        message = f"nothing to do: {plan.noop}"
    elif req.verb == "unbump":
        message = f"{req.slug} is no longer prioritised"
    elif req.slug in plan.moved:
        message = f"{req.slug} is prioritised"
    else:
        message = f"{req.slug} was already in the priority lane and keeps its place"
    out = Outcome("noop" if plan.noop else "done", req.verb, req.slug, by, message=message,
                  moved=list(plan.moved), already=list(plan.already), removed=list(plan.removed),
                  appended=appended if req.verb == "push" else None)
    return body, out


def _lane_fields(snap: Snapshot, slug: str, issue: str = "-", deps: tuple[str, ...] = ()) -> dict[str, Any]:
    """``issue`` and ``deps`` as queue.txt carries the lane (else as given)."""
    lane = snap.lanes.get(slug)
    if lane is not None:
        issue, deps = lane.issue, lane.deps
    return {"issue": issue, "deps": list(deps)}


DRY_RUN = "dry run: nothing recorded"

LOG_READABLE = Refusal("log_readable", "the priority log replays fine, so there is nothing to reset; "
                       "use bump and unbump to change the lane")


def _text(value: str | None) -> str | None:
    return None if value is None else as_text(value)


def _shape_names(slug: str | None, deps: tuple[str, ...], source: str | None) -> Refusal | None:
    """The first shape error among the names a request carries."""
    if slug is not None and not is_name(slug):
        return Refusal("invalid_slug", f"slug {quote(slug)} is not a name: {why_not_name(slug)}")
    for dep in deps:
        if not is_name(dep):
            return Refusal("invalid_dependency", f"dependency {quote(dep)} is not a name: {why_not_name(dep)}")
    if source is not None and not is_name(source):
        return Refusal("invalid_source", f"source {quote(source)} is not a name: {why_not_name(source)}")
    return None


def _refused_body(req: _Request, refusal: Refusal, authorised: bool) -> dict[str, Any]:
    return {"action": "refused", "requested": req.verb, "slug": req.slug, "code": refusal.code,
            "message": refusal.message, "authorised": authorised}


def _progress_words(out: Outcome, req: _Request) -> str:
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
    if req.reason is not None:
        words += f"; reason {quote(req.reason)}"
    return words

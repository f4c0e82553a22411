"""The operator's and the sources' requests: bump, unbump, push, add,
waive, halt, resume, hold, unhold, declare and reset (settle: ``service.settling``). Each is a function of the
storm, and its method (``storm.KINDS``): it shapes its arguments and
plans with the pure core; ``passage.request`` takes it the rest of the way."""

from __future__ import annotations


from .. import wall
from ..core import queuetext
from ..core.lane import Plan, Refusal, Snapshot, plan_bump, plan_push, plan_unbump, plan_waive
from ..core.names import as_text, is_issue, quote, why_not_issue
from ..core.outcome import Outcome, Request, Step
from ..core.queuetext import split_deps
from ..core.shapes import optional_text, parse_when, shape_names, when_at

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..core.errors import WriteFailed
    from ..store.interface import Effects
    from .storm import Storm


def bump(storm: Storm, slug: str, reason: str | None = None, source: str | None = None, dry_run: bool = False,
         key: str | None = None) -> Outcome:
    """Prioritise a queued lane, pulling its dependencies forward. With
    ``dry_run``, answer as the request would and record nothing."""
    req = Request("bump", as_text(slug), optional_text(reason), optional_text(source), optional_text(key))
    return storm.request(req, shape_names(req.slug, (), req.source),
                         lambda snap, by, fx: _lane_step(req, by, plan_bump(snap, req.slug), _lane_fields(snap, req.slug)),
                         dry_run)

def unbump(storm: Storm, slug: str, reason: str | None = None, source: str | None = None, dry_run: bool = False,
           key: str | None = None) -> Outcome:
    """Take a lane out of the priority lane, with what only it required.
    With ``dry_run``, answer as the request would and record nothing."""
    req = Request("unbump", as_text(slug), optional_text(reason), optional_text(source), optional_text(key))
    return storm.request(req, shape_names(req.slug, (), req.source),
                         lambda snap, by, fx: _lane_step(req, by, plan_unbump(snap, req.slug), {}), dry_run)

def push(storm: Storm, slug: str, issue: str, deps: str | tuple[str, ...] | None = None,
         reason: str | None = None, source: str | None = None, dry_run: bool = False,
         key: str | None = None, not_before: str | None = None) -> Outcome:
    """Append a lane to ``queue.txt`` (unless queued) and prioritise it;
    ``not_before`` (a time as ``clock.parse`` reads it) schedules it.
    With ``dry_run``, answer as the request would and write nothing."""
    issue = as_text(issue)
    dep_list = split_deps(as_text(deps)) if isinstance(deps, str) else (None if deps is None else tuple(as_text(d) for d in deps))
    req = Request("push", as_text(slug), optional_text(reason), optional_text(source), optional_text(key),
                   (issue, dep_list, optional_text(not_before)))
    refusal = shape_names(req.slug, dep_list or (), req.source)
    if refusal is None and not is_issue(issue):
        refusal = Refusal("invalid_issue", f"issue {quote(issue)} {why_not_issue(issue)}")
    when, refusal = parse_when(req.args[2], refusal, wall.seconds())

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        result, append = plan_push(snap, req.slug, issue, dep_list)
        deps = tuple(dict.fromkeys(dep_list or ()))
        at = when_at(req.args[2], snap.now, when)
        extra = {} if at is None else {"not_before": at}
        if not append:
            return _lane_step(req, by, result, {**_lane_fields(snap, req.slug, issue, deps), **extra})
        return _lane_step(req, by, result, {"issue": issue, "deps": list(deps), **extra},
                          queuetext.format_line(req.slug, issue, deps))

    return storm.request(req, refusal, plan, dry_run)

def add(storm: Storm, slug: str, issue: str, deps: str | tuple[str, ...] | None = None, reason: str | None = None,
        source: str | None = None, key: str | None = None) -> Outcome:
    """Enqueue a lane, not prioritised; a slug already queued is a
    recorded no-op (its line stays as it is)."""
    issue = as_text(issue)
    dep_list = split_deps(as_text(deps)) if isinstance(deps, str) else (None if deps is None else tuple(as_text(d) for d in deps))
    req = Request("add", as_text(slug), optional_text(reason), optional_text(source), optional_text(key), (issue, dep_list))
    refusal = shape_names(req.slug, dep_list or (), req.source)
    if refusal is None and not is_issue(issue):
        refusal = Refusal("invalid_issue", f"issue {quote(issue)} {why_not_issue(issue)}")

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step:
        lane = snap.lanes.get(req.slug)
        if lane is not None:
            noop = f"{req.slug} is already queued (issue {lane.issue})"
            body = {"action": "add", "slug": req.slug, "issue": lane.issue, "deps": list(lane.deps),
                    "appended": False, "noop": noop}
            return Step(Outcome("noop", "add", req.slug, by, message=f"nothing to do: {noop}", appended=False), [body])
        deps = tuple(dict.fromkeys(dep_list or ()))
        body = {"action": "add", "slug": req.slug, "issue": issue, "deps": list(deps), "appended": True}
        return Step(Outcome("done", "add", req.slug, by, message=f"{req.slug} is queued", appended=True), [body],
                    queuetext.format_line(req.slug, issue, deps))

    return storm.request(req, refusal, plan)

def add_batch(storm: Storm, text: str, name: str = "-", reason: str | None = None, source: str | None = None,
              key: str | None = None) -> Outcome:
    """Enqueue the lanes of ``text`` (lines in queue.txt's grammar, read
    from ``name``, ``-`` for standard input), not prioritised, all or
    nothing (``core.batch`` says what refuses a batch). Admitted, each lane
    is recorded as ``add`` records one, every line with the reason, in one
    append (one transaction on a database); the key, if any, binds the
    whole batch and rides on its last line. Refused, one refusal line names
    the first bad line, and nothing is added."""
    from ..core import batch
    from ..core.batch import lanes

    found = batch.shape(as_text(text))
    where = batch.source_name(name)
    req = Request("add", None, optional_text(reason), optional_text(source), optional_text(key), ("from", found.fields))
    refusal = shape_names(None, (), req.source)
    if refusal is None and (found.bad or not found.lanes):
        refusal = batch.refusal(found.bad, where)
    slugs = [lane.slug for lane in found.lanes]
    kept: list[WriteFailed] = []  # why queue.txt could not be cut back when the record failed

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        bad = batch.lookups(found.lanes, snap.lanes, snap.ledgers.settled)
        if bad:
            return batch.refusal(bad, where)
        extra = {} if req.reason is None else {"reason": req.reason}
        bodies = [{"action": "add", "slug": lane.slug, "issue": lane.issue, "deps": list(lane.deps), "appended": True,
                   **extra} for lane in found.lanes]
        text = "".join(queuetext.format_line(lane.slug, lane.issue, lane.deps) for lane in found.lanes)
        return Step(Outcome("done", "add", None, by, message=_queued(slugs), added=slugs), bodies,
                    before=lambda: _queue(fx, text, kept))

    out = kept_request(storm, req, refusal, plan, kept,
                       f"queue.txt may still carry (some of) the batch's {lanes(len(slugs))}", "adding them again")
    if out.repeat is not None and out.outcome != "refused":
        out.added = slugs
        out.message = f"{_queued(slugs)} (a repeat of line {out.repeat} (key {quote(req.key or '')}): nothing new recorded)"
    return out


def _queue(fx: Effects, text: str, kept: list[WriteFailed]) -> Callable[[], None] | None:
    """Enqueue a batch's lines; return what takes them back off (``taken_back``)."""
    return taken_back(lambda: fx.queue(text), kept)


def kept_request(storm: Storm, req: Request, refusal: Refusal | None, plan: Callable[..., Step | Refusal],
                 kept: list[WriteFailed], carried: str, again: str, dry_run: bool = False) -> Outcome:
    """``storm.request`` of a request whose effect is written before its
    record (``taken_back``): when the record failed and what was written
    could not be cut back (``kept``), the failure says so (``carried``:
    which file may still carry what) and what to do before ``again``."""
    from ..core.errors import RecordFailed

    try:
        return storm.request(req, refusal, plan, dry_run)
    except RecordFailed as exc:
        if exc.recorded is False and kept:
            raise RecordFailed(f"{exc}; but {carried}, unrecorded: what was written could not be cut back off "
                               f"({kept[0].strerror}); check it (storm-queue list) and take those lines "
                               f"out before {again}") from None
        raise


def taken_back(write: Callable[[], Callable[[], None] | None], kept: list[WriteFailed]) -> Callable[[], None] | None:
    """Do ``write`` (an effect before the record); return what takes it
    back. Why it stays when it could not be taken back goes in ``kept``."""
    from ..core.errors import WriteFailed

    try:
        undo = write()
    except WriteFailed as exc:
        if exc.kept:
            kept.append(exc)
        raise
    if undo is None:  # the store's transaction takes them back
        return None

    def take_back() -> None:
        try:
            undo()
        except WriteFailed as exc:
            kept.append(exc)
            raise

    return take_back


def _queued(slugs: list[str]) -> str:
    """What an admitted batch says it did."""
    from ..core.batch import counted

    return counted("queued", slugs)

def waive(storm: Storm, slug: str, dep: str, reason: str | None, undo: bool = False, source: str | None = None,
          dry_run: bool = False, key: str | None = None) -> Outcome:
    """Let ``slug`` run although its dependency ``dep`` is not integrated
    (an abandoned ``dep`` no longer blocks it), or with ``undo`` end that
    waiver; operator only, with a reason. The lane is re-derived: a
    waived dependency is not pulled forward. With ``dry_run``, answer as
    the request would and record nothing."""
    req = Request("waive", as_text(slug), optional_text(reason), optional_text(source), optional_text(key),
                  (as_text(dep), bool(undo)))
    refusal = shape_names(req.slug, (req.args[0],), req.source)
    if refusal is None and not (req.reason or "").strip():
        refusal = Refusal("blank_reason", "waive needs --reason TEXT saying why the lane may run without its dependency")

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        dep, undo = req.args
        marked = not undo and req.slug in snap.ledgers.finished and fx.blocked_mark(req.slug)
        result, lifts = plan_waive(snap, req.slug, dep, undo, by, marked)
        if isinstance(result, Refusal):
            return result
        if result.noop:
            message = f"nothing to do: {result.noop}"
        elif undo:
            message = f"{req.slug} waits for {dep} again"
        else:
            message = f"{req.slug} may run although {dep} is not integrated"
        body: dict[str, Any] = {"action": "waive", "slug": req.slug, "dep": dep, "undo": undo,
                                "moved": list(result.moved), "removed": list(result.removed)}
        if result.noop:
            body["noop"] = result.noop
        if lifts:
            message += "; next's blocked mark on it is taken away, so it may be claimed"
        out = Outcome("noop" if result.noop else "done", "waive", req.slug, by, message=message,
                      moved=list(result.moved), removed=list(result.removed), swept=dict(result.swept))
        return Step(out, [body], before=(lambda: fx.unmark_blocked(req.slug)) if lifts else None)

    return storm.request(req, refusal, plan, dry_run)

def declare(storm: Storm, path: str, reason: str | None = None, key: str | None = None) -> Outcome:
    """Record the file at ``path`` as a database storm's declaration
    (operator only), with its sha256 and parsed content; declaring what
    the storm holds is a recorded no-op. ``InvalidDeclaration`` (exit 2,
    nothing declared) for a file that is not UTF-8 TOML storm-queue reads,
    or whose content no log line can carry (``config.unrecordable``). A
    directory storm's declaration is its storm.toml: nothing to record
    (``NotHere``)."""
    from ..core import config
    from ..core.errors import NotHere

    declared_in = storm.store.upkeep.declared_in()
    if declared_in is not None:
        raise NotHere(f"on a directory storm the declaration is {declared_in}: edit that "
                      "file (reviewed) instead; declare records a file into a database storm")
    import json

    from ..core.errors import InvalidDeclaration
    from ..core.framing import sha256
    from ..given import read

    raw = read(path, "declare", "nothing was declared", stdin=False)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidDeclaration(f"{path} is not UTF-8 text; nothing was declared") from None
    decl = config.parse(text)
    if decl.error:
        raise InvalidDeclaration(f"{path}: {decl.error}; nothing was declared")
    data = config.read_toml(text)
    why = config.unrecordable(data)
    if why:
        raise InvalidDeclaration(f"{path}: {why}; nothing was declared")
    content = json.loads(json.dumps(data, default=str))
    sha = sha256(raw).hexdigest()
    req = Request("declare", None, optional_text(reason), None, optional_text(key), (sha,))

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step:
        body = {"action": "declare", "sha256": sha, "declaration": content}
        if not fx.declare(text, sha):
            body["noop"] = "the storm already holds this declaration"
            return Step(Outcome("noop", "declare", None, by, message=f"nothing to do: {body['noop']}"), [body])
        return Step(Outcome("done", "declare", None, by, message=f"the storm's declaration is now {path} (sha256 {sha[:16]})"),
                    [body])

    return storm.request(req, None, plan)


def halt(storm: Storm, reason: str | None, source: str | None = None, dry_run: bool = False,
         key: str | None = None) -> Outcome:
    """Halt the storm: from now on no lane starts until ``resume``.
    Operator only, with a reason; halting a halted storm is a recorded
    no-op. Leases already held are untouched."""
    return _halt_or_resume(storm, "halt", reason, source, dry_run, key)


def resume(storm: Storm, reason: str | None, source: str | None = None, dry_run: bool = False,
           key: str | None = None) -> Outcome:
    """End the halt: lanes start again. Operator only, with a reason;
    resuming a storm that is not halted is a recorded no-op."""
    return _halt_or_resume(storm, "resume", reason, source, dry_run, key)


def _halt_or_resume(storm: Storm, verb: str, reason: str | None, source: str | None, dry_run: bool,
                    key: str | None) -> Outcome:
    from ..core.halt import plan_halt, plan_resume

    req = Request(verb, None, optional_text(reason), optional_text(source), optional_text(key))
    refusal = shape_names(None, (), req.source)
    if refusal is None and not (req.reason or "").strip():
        refusal = Refusal("blank_reason", f"{verb} needs --reason TEXT saying why "
                          + ("no lane may start" if verb == "halt" else "lanes may start again"))

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step:
        event = plan_halt(snap) if verb == "halt" else plan_resume(snap)
        if "noop" in event:
            return Step(Outcome("noop", verb, None, by, message=f"nothing to do: {event['noop']}"), [event])
        words = ("halted: no lane starts (claim leases nothing; claim and next answer halted) until storm-queue resume "
                 "--reason TEXT; leases already held run on" if verb == "halt" else "resumed: lanes start again")
        return Step(Outcome("done", verb, None, by, message=words), [event])

    return storm.request(req, refusal, plan, dry_run)


def hold(storm: Storm, slug: str, reason: str | None, source: str | None = None, dry_run: bool = False,
         key: str | None = None) -> Outcome:
    """Hold ``slug``: from now on it is not started (``next`` and ``claim``
    pass it over, keeping its place; the lanes that depend on it wait)
    until ``unhold``. The operator or a declared source, with a reason; a
    running lane runs on. Holding a held lane is a recorded no-op; a
    settled or unknown lane is refused."""
    return _hold_or_unhold(storm, "hold", slug, reason, source, dry_run, key)


def unhold(storm: Storm, slug: str, reason: str | None, source: str | None = None, dry_run: bool = False,
           key: str | None = None) -> Outcome:
    """End the hold of ``slug``: it may start again, in its place. The
    operator or a declared source, with a reason; unholding a lane that is
    not held is a recorded no-op."""
    return _hold_or_unhold(storm, "unhold", slug, reason, source, dry_run, key)


def _hold_or_unhold(storm: Storm, verb: str, slug: str, reason: str | None, source: str | None, dry_run: bool,
                    key: str | None) -> Outcome:
    from ..core.hold import plan_hold, plan_unhold
    from ..core.resolver import running

    req = Request(verb, as_text(slug), optional_text(reason), optional_text(source), optional_text(key))
    refusal = shape_names(req.slug, (), req.source)
    if refusal is None and not (req.reason or "").strip():
        refusal = Refusal("blank_reason", f"{verb} needs --reason TEXT saying why the lane "
                          + ("may not start" if verb == "hold" else "may start again"))

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        event = plan_hold(snap, req.slug) if verb == "hold" else plan_unhold(snap, req.slug)
        if isinstance(event, Refusal):
            return event
        if "noop" in event:
            return Step(Outcome("noop", verb, req.slug, by, message=f"nothing to do: {event['noop']}"), [event])
        if verb == "unhold":
            words = f"{req.slug} is no longer held: it may start again, in its place in run order"
        else:
            words = (f"{req.slug} is held: next and claim do not start it (it keeps its place in run order) until "
                     f"storm-queue unhold {req.slug} --reason TEXT; the lanes that depend on it wait")
            if running(snap, req.slug):
                words += "; it is running now and runs on (a hold decides what starts; storm-queue cancel stops it)"
        return Step(Outcome("done", verb, req.slug, by, message=words), [event])

    return storm.request(req, refusal, plan, dry_run)


def reset(storm: Storm, reason: str | None, source: str | None = None, key: str | None = None,
          keep_intact: bool = False, dry_run: bool = False) -> Outcome:
    """Start a new log when the old one cannot be replayed; operator only.
    ``keep_intact``: the new log begins with the longest prefix of the old
    one that verifies from line 1, and so with the state it replays to (a
    directory storm's; a database storm's log is never set aside: ``NotHere``).
    ``Outcome.cut`` names every line of the old log it loses. With
    ``dry_run``, say what it would keep and lose, and write nothing."""
    from .passage import KEEP_INTACT

    req = Request("reset", None, optional_text(reason), optional_text(source), optional_text(key),
                  (KEEP_INTACT,) if keep_intact else ())
    refusal = shape_names(None, (), req.source)
    if refusal is None and not (req.reason or "").strip():
        refusal = Refusal("blank_reason", "reset needs --reason TEXT saying why the old log is abandoned")
    return storm.request(req, refusal, None, dry_run)


def _lane_step(req: Request, by: str, plan: Plan | Refusal, fields: dict[str, Any], line: str | None = None) -> Step | Refusal:
    """The step of an admitted bump, push or unbump: its event and answer."""
    if isinstance(plan, Refusal):
        return plan
    body: dict[str, Any] = {"action": req.verb, "slug": req.slug, **fields,
                            "moved": list(plan.moved), "removed": list(plan.removed)}
    if plan.noop:
        body["noop"] = plan.noop
    if req.verb == "push":
        body["appended"] = line is not None
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
                  appended=(line is not None) if req.verb == "push" else None, swept=dict(plan.swept))
    return Step(out, [body], line)


def _lane_fields(snap: Snapshot, slug: str, issue: str = "-", deps: tuple[str, ...] = ()) -> dict[str, Any]:
    """``issue`` and ``deps`` as queue.txt carries the lane (else as given)."""
    lane = snap.lanes.get(slug)
    if lane is not None:
        issue, deps = lane.issue, lane.deps
    return {"issue": issue, "deps": list(deps)}

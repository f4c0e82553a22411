"""The service: every request goes shape -> authority -> lock -> snapshot ->
plan -> record, and every reader takes a snapshot and the resolver. It never
prints; it returns results and raises typed errors."""

from __future__ import annotations

import os

from . import authority, clock, config, fold, ledger, queuefile
from .errors import Busy, NoStorm, RecordFailed, UnknownOrder
from .lane import Plan, Refusal, Snapshot, plan_bump, plan_push, plan_unbump, with_lane
from .log import reader
from .log.checkpoint import checkpoint_path
from .log.framing import sha256
from .names import as_text, is_issue, is_name, printable, quote, why_not_name
from .queuefile import split_deps
from .records import dataclass, field, replace
from .refusals import exit_code
from .resolver import View, resolve
from .runs import plan_claim, plan_finish, plan_recover, plan_renew, plan_schedule, plan_unpark, ttl_refusal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping




now = clock.now

#: a directory is a storm when it holds one of these; ``init`` makes one
STORM_FILES = ("queue.txt", "storm.toml", "priority.log", ".priority.log.witness")


def find_root(root: str | None, env: Mapping[str, str], cwd: str | None = None) -> str:
    """The storm root: ``root``, else ``$STORM_QUEUE_ROOT`` (either must be
    a storm: a directory holding one of ``STORM_FILES``; a PostgreSQL URL is
    returned as it is), else the nearest directory at or above ``cwd``
    holding ``queue.txt`` or ``storm.toml``."""
    given = root or env.get("STORM_QUEUE_ROOT")
    if given and is_url(given):
        return given
    if given:
        if not os.path.isdir(given):
            raise NoStorm(f"storm root {quote(given)} is not a directory; pass --root DIR for an existing storm")
        if os.access(given, os.X_OK) and not any(os.path.lexists(os.path.join(given, f)) for f in STORM_FILES):
            from shlex import quote as sh

            raise NoStorm(f"{printable(given)} is not a storm (no queue.txt or storm.toml): "
                          f"create one with storm-queue init {sh(printable(given))}")
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


def is_url(root: str) -> bool:
    """Whether ``root`` names a database storm (a libpq URL) rather than a directory."""
    return root.startswith(("postgresql://", "postgres://"))


@dataclass
class Listing:
    """What ``list`` shows: the resolved view and everything worth saying;
    ``marks`` says, for each slug in the priority lane, which recorded
    request put it there (who, when, why). ``seq`` is the number of the
    log's last line as read (0: nothing recorded): a reader that keeps
    the listing knows the log has grown when it changes."""

    root: str
    view: View
    skipped: tuple[queuefile.Skipped, ...]
    warnings: list[str]
    marks: Mapping[str, fold.Mark] = field(default_factory=dict)
    seq: int = 0

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
    #: a claim's decision line; the fencing token and expiry of a lease it took or renewed
    decision: str | None = None
    holder: str | None = None
    token: int | None = None
    expires: str | None = None
    #: the ``seq`` of the first request made under the same key, when this is its repeat
    repeat: int | None = None
    #: the lanes of ``removed`` that left whatever was asked, each with why (``lane.Plan.swept``)
    swept: dict[str, str] = field(default_factory=dict)

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
        for name in ("decision", "holder", "token", "expires", "repeat"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass
class Step:
    """What an admitted request does: the ``events`` to record (``own`` is
    the index of the request's own, which carries its key and reason; None
    when none is; no events: nothing to record), its answer, a
    ``queue.txt`` line to append first, file effects that must come
    ``before`` the record (undone when the record is not made), and those that only cache it ``after`` (given
    the events recorded, they return notes for stderr)."""

    out: Outcome
    events: list[dict[str, Any]]
    line: str | None = None
    before: Callable[[], Callable[[], None] | None] | None = None  # returns what undoes it
    after: Callable[[list[dict[str, Any]]], list[str]] | None = None
    own: int | None = -1


@dataclass(frozen=True)
class _Request:
    verb: str
    slug: str | None  # raw text as given
    reason: str | None
    source: str | None
    key: str | None = None
    args: tuple = ()  # every other argument as given: with the rest, what a key's fingerprint covers

    def fingerprint(self) -> str:
        import json

        body = json.dumps([self.verb, self.slug, self.reason, self.source, list(self.args)], ensure_ascii=True)
        return sha256(body.encode("ascii")).hexdigest()[:32]


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
        found = find_root(root, env)
        if is_url(found):
            from .database import DatabaseStorm

            return DatabaseStorm(found, env, wait)
        return cls(found, env, wait)

    # -- reading -------------------------------------------------------

    def directory(self, command: str) -> str:
        """The storm's directory, for a command that examines its files."""
        return self.root

    def declaration(self) -> config.Declaration:
        return config.load(self.root)

    def _known(self, decl: config.Declaration) -> None:
        """Raise ``UnknownOrder`` when storm.toml hides the log's place."""
        if decl.log_error:
            raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")

    def log_path(self, decl: config.Declaration) -> str:
        return os.path.join(self.root, decl.log)

    def _read(self, decl: config.Declaration) -> reader.LogRead:
        """The log as a reader finds it now (``UnknownOrder`` when damaged)."""
        return reader.read(self.log_path(decl))

    def _snapshot(self, log: reader.LogRead, at: str | None = None) -> Snapshot:
        """The storm as read now (or at the stamp ``at``)."""
        queue = queuefile.read(os.path.join(self.root, "queue.txt"))
        led = ledger.read(self.root)
        return Snapshot({lane.slug: lane for lane in queue.lanes}, led, log.state, at or now(),
                        leased_results(self.root, led, log.state), queue.skipped)

    def listing(self, decl: config.Declaration | None = None) -> Listing:
        """The storm as it will run; reads only, writes nothing."""
        decl = decl or self.declaration()
        self._known(decl)
        log = self._read(decl)
        snap = self._snapshot(log)
        view = resolve(snap)
        warnings = list(log.warnings)
        if decl.sources_error:
            warnings.append(f"{decl.sources_error}: every request is refused until storm.toml is fixed (see storm.toml.example)")
        if view.stale:
            warnings.append(
                "the priority lane is stale after a change to queue.txt or the ledgers; it runs as "
                "replayed, and the next request will re-derive it"
            )
        return Listing(self.root, view, snap.skipped, warnings, log.state.marks, log.seq)

    def why(self, slug: str):
        """Where the lane ``slug`` stands and why, as plain data
        (``why.Why``); reads only, writes nothing."""
        from . import why

        decl = self.declaration()
        self._known(decl)
        log = self._read(decl)
        snap = self._snapshot(log)
        return why.explain(snap, resolve(snap), snap.skipped, as_text(slug), decl.runner)

    def history(self, each, decl: config.Declaration | None = None) -> reader.LogRead:
        """Read the whole log, oldest first, calling ``each(line, event)``
        for every line that passed the reader's checks (a line is never held
        longer than that call). Damage raises ``UnknownOrder`` after ``each``
        has seen every line before it."""
        decl = decl or self.declaration()
        self._known(decl)
        return reader.read(self.log_path(decl), use_checkpoint=False, each=each)

    def verify(self, progress: Callable[[int], None] | None = None):
        """The full audit of the priority log (see ``log.audit``); reads only.
        ``progress`` is told the byte offset reached now and then."""
        from .log import audit

        decl = self.declaration()
        self._known(decl)
        return audit.audit(self.log_path(decl), progress)

    def next(self) -> tuple[Listing, list[str]]:
        """Decide, then (as the owner) mark blocked lanes met before the chosen
        one and say skipped lines and stray slugs once in ``progress.log``.
        Returns the listing and notes for stderr."""
        decl = self.declaration()
        listing = self.listing(decl)
        log_path = self.log_path(decl)
        view = listing.view
        if not (self._news(view, listing.skipped, log_path) or view.to_block):
            return listing, []
        who = authority.caller(self.env)
        op = authority.owner(self.root)
        if not authority.is_owner(who, op):
            return listing, [f"next: {who.name} is not the storm's owner ({op.name}), so blocked lanes are not marked and progress.log is not written"]
        from .log.lock import held

        try:
            with held(log_path, 0.5, may_create=True):
                return listing, self._tell(view, listing.skipped, now(), log_path)
        except Busy:  # another writer is at work; the next call catches up
            return listing, ["next: the storm is busy, so blocked lanes were not marked this time"]
        except (OSError, RecordFailed) as exc:
            return listing, [f"next: side effects skipped: {exc}"]

    def _news(self, view: View, skipped: tuple[queuefile.Skipped, ...], log_path: str,
              reload: bool = False) -> list[tuple[str, str]]:
        """What ``next`` has to say once: skipped lines and stray slugs not said before."""
        said = ledger.SaidOnce(log_path).keys(reload)
        news = [
            (f"skipped {s.line} {sha256(s.text.encode('utf-8', 'replace')).hexdigest()[:16]}",
             f"queue.txt line {s.line} skipped: {quote(s.text)}: {s.why}")
            for s in skipped
        ] + [(f"stray {slug}", f"prioritised lane {slug} is stray: queue.txt no longer carries it") for slug in view.stray]
        return [(k, words) for k, words in news if k not in said]

    def _tell(self, view: View, skipped: tuple[queuefile.Skipped, ...], at: str, log_path: str) -> list[str]:
        """Under the lock, as the owner: mark blocked the lanes ``view``
        meets before the one it chose, and say what is news once in
        ``progress.log``. Returns notes for stderr; never raises."""
        try:
            for row in view.to_block:
                if ledger.has_result(self.root, row.slug):  # another next got here first
                    continue
                ledger.mark_blocked(self.root, row.slug, list(row.waits_on), at, None)
                ledger.say(self.root, at, f"next: marked {row.slug} blocked on abandoned {', '.join(row.waits_on)}", None)
            fresh = self._news(view, skipped, log_path, reload=True)
            for _, words in fresh:
                ledger.say(self.root, at, words, None)
            ledger.SaidOnce(log_path).add([k for k, _ in fresh])
        except (OSError, RecordFailed) as exc:
            return [f"next: side effects skipped: {exc}"]
        return []

    # -- requests ------------------------------------------------------

    def bump(self, slug: str, reason: str | None = None, source: str | None = None, dry_run: bool = False,
             key: str | None = None) -> Outcome:
        """Prioritise a queued lane, pulling its dependencies forward. With
        ``dry_run``, answer as the request would and record nothing."""
        req = _Request("bump", as_text(slug), _text(reason), _text(source), _text(key))
        return self._request(req, _shape_names(req.slug, (), req.source),
                             lambda snap, by: _lane_step(req, by, plan_bump(snap, req.slug), _lane_fields(snap, req.slug)),
                             dry_run)

    def unbump(self, slug: str, reason: str | None = None, source: str | None = None, dry_run: bool = False,
               key: str | None = None) -> Outcome:
        """Take a lane out of the priority lane, with what only it required.
        With ``dry_run``, answer as the request would and record nothing."""
        req = _Request("unbump", as_text(slug), _text(reason), _text(source), _text(key))
        return self._request(req, _shape_names(req.slug, (), req.source),
                             lambda snap, by: _lane_step(req, by, plan_unbump(snap, req.slug), {}), dry_run)

    def push(self, slug: str, issue: str, deps: str | tuple[str, ...] | None = None,
             reason: str | None = None, source: str | None = None, dry_run: bool = False,
             key: str | None = None, not_before: str | None = None) -> Outcome:
        """Append a lane to ``queue.txt`` (unless queued) and prioritise it;
        ``not_before`` (a time as ``clock.parse`` reads it) schedules it.
        With ``dry_run``, answer as the request would and write nothing."""
        issue = as_text(issue)
        dep_list = split_deps(as_text(deps)) if isinstance(deps, str) else (None if deps is None else tuple(as_text(d) for d in deps))
        req = _Request("push", as_text(slug), _text(reason), _text(source), _text(key),
                       (issue, dep_list, _text(not_before)))
        refusal = _shape_names(req.slug, dep_list or (), req.source)
        if refusal is None and not is_issue(issue):
            refusal = Refusal("invalid_issue", f"issue {quote(issue)} is not ASCII digits or '-'")
        when, refusal = _when(req.args[2], refusal)

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            result, append = plan_push(snap, req.slug, issue, dep_list)
            deps = tuple(dict.fromkeys(dep_list or ()))
            extra = {} if when is None else {"not_before": when}
            if not append:
                return _lane_step(req, by, result, {**_lane_fields(snap, req.slug, issue, deps), **extra})
            return _lane_step(req, by, result, {"issue": issue, "deps": list(deps), **extra},
                              queuefile.format_line(req.slug, issue, deps))

        return self._request(req, refusal, plan, dry_run)

    def add(self, slug: str, issue: str, deps: str | tuple[str, ...] | None = None, reason: str | None = None,
            source: str | None = None, key: str | None = None) -> Outcome:
        """Enqueue a lane, not prioritised; a slug already queued is a
        recorded no-op (its line stays as it is)."""
        issue = as_text(issue)
        dep_list = split_deps(as_text(deps)) if isinstance(deps, str) else (None if deps is None else tuple(as_text(d) for d in deps))
        req = _Request("add", as_text(slug), _text(reason), _text(source), _text(key), (issue, dep_list))
        refusal = _shape_names(req.slug, dep_list or (), req.source)
        if refusal is None and not is_issue(issue):
            refusal = Refusal("invalid_issue", f"issue {quote(issue)} is not ASCII digits or '-'")

        def plan(snap: Snapshot, by: str) -> Step:
            lane = snap.lanes.get(req.slug)
            if lane is not None:
                noop = f"{req.slug} is already queued (issue {lane.issue})"
                body = {"action": "add", "slug": req.slug, "issue": lane.issue, "deps": list(lane.deps),
                        "appended": False, "noop": noop}
                return Step(Outcome("noop", "add", req.slug, by, message=f"nothing to do: {noop}", appended=False), [body])
            deps = tuple(dict.fromkeys(dep_list or ()))
            body = {"action": "add", "slug": req.slug, "issue": issue, "deps": list(deps), "appended": True}
            return Step(Outcome("done", "add", req.slug, by, message=f"{req.slug} is queued", appended=True), [body],
                        queuefile.format_line(req.slug, issue, deps))

        return self._request(req, refusal, plan)

    def settle(self, slug: str, ledger_name: str, reason: str | None = None, source: str | None = None,
               key: str | None = None, force: bool = False) -> Outcome:
        """Settle a queued lane as ``integrated`` or ``abandoned``. A lane
        holding a live lease is refused (``lane_running``) unless ``force``,
        which records the lease's expiry first."""
        req = _Request("settle", as_text(slug), _text(reason), _text(source), _text(key), (as_text(ledger_name), bool(force)))
        refusal = _shape_names(req.slug, (), req.source)
        if refusal is None and req.args[0] not in ("integrated", "abandoned"):
            refusal = Refusal("invalid_ledger", f"ledger {quote(req.args[0])} is neither integrated nor abandoned")

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            how = req.args[0]
            if snap.ledgers.settled(req.slug):
                was = "integrated" if req.slug in snap.ledgers.integrated else "abandoned"
                noop = f"{req.slug} is already {was}"
                return Step(Outcome("noop", "settle", req.slug, by, message=f"nothing to do: {noop}"),
                            [{"action": "settle", "slug": req.slug, "ledger": how, "noop": noop}])
            if req.slug not in snap.lanes:
                return Refusal("unknown_slug", f"no lane {req.slug} is queued; add it first")
            lease = snap.state.run(req.slug).lease
            events: list[dict[str, Any]] = []
            if lease is not None:
                if lease.expires > snap.now and not force:
                    return Refusal("lane_running", f"{req.slug} holds a live lease (token {lease.token}, {lease.holder}, "
                                   f"until {lease.expires}); let it finish, or settle it with --force, which expires the lease first")
                events.append({"action": "expire", "slug": req.slug, "token": lease.token, "expired": snap.now})
            events.append({"action": "settle", "slug": req.slug, "ledger": how})
            words = f"{req.slug} is {how}" + (f"; its lease (token {lease.token}) was expired first" if lease else "")
            return Step(Outcome("done", "settle", req.slug, by, message=words, token=lease.token if lease else None),
                        events, before=lambda: self._settle(req.slug, how), own=-1,
                        after=(lambda _: self._cache(lambda: self._unmark_running(req.slug, lease.token), "running marker",
                                                     req.slug)) if lease else None)

        return self._request(req, refusal, plan)

    def declare(self, path: str, reason: str | None = None, key: str | None = None) -> Outcome:
        """A directory storm's declaration is its storm.toml: nothing to record."""
        from .errors import NotHere

        raise NotHere(f"on a directory storm the declaration is {os.path.join(self.root, 'storm.toml')}: edit that "
                      "file (reviewed) instead; declare records a file into a database storm")

    def reset(self, reason: str | None, source: str | None = None, key: str | None = None) -> Outcome:
        """Start a new log when the old one cannot be replayed; operator only."""
        req = _Request("reset", None, _text(reason), _text(source), _text(key))
        refusal = _shape_names(None, (), req.source)
        if refusal is None and not (req.reason or "").strip():
            refusal = Refusal("blank_reason", "reset needs --reason TEXT saying why the old log is abandoned")
        return self._request(req, refusal, None)

    # -- runners -------------------------------------------------------

    def claim(self, holder: str | None = None, ttl: int | None = None, source: str | None = None,
              reason: str | None = None, key: str | None = None) -> Outcome:
        """Decide as ``next`` does, after taking back orphaned leases; when
        the decision is ``run`` and a slot is free, lease that lane to
        ``holder`` under a new fencing token (``Outcome.decision`` is then
        ``run SLUG ISSUE TOKEN``). Any other decision leases nothing."""
        decl = self.declaration()
        req = _Request("claim", None, _text(reason), _text(source), _text(key), (_text(holder), ttl))
        name = req.args[0] if req.args[0] is not None else default_holder()
        refusal = _shape_names(None, (), req.source) or _shape_holder(name)
        ttl = decl.runner.ttl if ttl is None else ttl
        if not decl.error:  # an unreadable declaration says nothing about TTLs: authority refuses it
            refusal = refusal or ttl_refusal(decl.runner, ttl)

        def plan(snap: Snapshot, by: str) -> Step:
            claim = plan_claim(snap, decl.runner, name, ttl, self._t)
            if claim.slug is None:
                out = Outcome("done", "claim", None, by, message=claim.decision, decision=claim.decision)
            else:
                out = Outcome("done", "claim", claim.slug, by, message=f"{claim.slug} is leased to {name} with token "
                              f"{claim.token} until {claim.expires}", decision=claim.decision, holder=name,
                              token=claim.token, expires=claim.expires)

            def after(events: list[dict[str, Any]]) -> list[str]:
                notes = []
                for slug, token in claim.ended:
                    notes += self._cache(lambda: self._unmark_running(slug, token), "running marker", slug)
                if claim.slug is not None:
                    body = {"holder": name, "token": claim.token, "expires": claim.expires, "claimed": events[-1]["at"]}
                    notes += self._cache(lambda: self._mark_running(claim.slug, body), "running marker", claim.slug)
                return notes + self._tell(claim.view, snap.skipped, snap.now, self.log_path(decl))

            return Step(out, list(claim.events), after=after, own=-1 if claim.slug is not None else None)

        return self._request(req, refusal, plan, decl=decl)

    def renew(self, slug: str, token: int, ttl: int | None = None, source: str | None = None,
              reason: str | None = None, key: str | None = None) -> Outcome:
        """Extend the live lease on ``slug`` held under ``token``."""
        decl = self.declaration()
        req = _Request("renew", as_text(slug), _text(reason), _text(source), _text(key), (token, ttl))
        refusal = _shape_names(req.slug, (), req.source) or _shape_token(token)
        if refusal is None and ttl is not None and not decl.error:
            refusal = ttl_refusal(decl.runner, ttl)

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            event = plan_renew(snap, decl.runner, req.slug, token, ttl, self._t)
            if isinstance(event, Refusal):
                return event
            out = Outcome("done", "renew", req.slug, by, message=f"renewed {req.slug} token {token} until {event['expires']}",
                          token=token, expires=event["expires"])
            lease = snap.state.run(req.slug).lease
            marker = {"holder": lease.holder, "token": token, "expires": event["expires"], "claimed": lease.claimed}
            return Step(out, [event], after=lambda _: self._cache(
                lambda: self._mark_running(req.slug, marker), "running marker", req.slug))

        return self._request(req, refusal, plan, decl=decl)

    def finish(self, slug: str, token: int, result: str, note: str | None = None, source: str | None = None,
               reason: str | None = None, key: str | None = None) -> Outcome:
        """End the live lease on ``slug`` held under ``token``: ``ok``
        leaves the lane finished, awaiting review; ``failed`` makes it
        claimable again, or quarantines it once its attempts are spent."""
        decl = self.declaration()
        req = _Request("finish", as_text(slug), _text(reason), _text(source), _text(key), (token, result, _text(note)))
        refusal = _shape_names(req.slug, (), req.source) or _shape_token(token)
        if refusal is None and result not in ("ok", "failed"):
            refusal = Refusal("invalid_result", f"result {quote(as_text(result))} is neither ok nor failed")

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            events = plan_finish(snap, decl.runner, req.slug, token, result, req.args[2])
            if isinstance(events, Refusal):
                return events
            run = snap.state.run(req.slug)
            if result == "ok":
                words = f"{req.slug} finished ok (token {token}); it awaits review"
            elif len(events) > 1:
                words = f"{req.slug} failed (token {token}) and is quarantined after {run.attempts} attempts"
            else:
                words = f"{req.slug} failed (token {token}); attempt {run.attempts} of {decl.runner.attempts}, it will be claimed again"
            out = Outcome("done", "finish", req.slug, by, message=words, token=token)
            before = None
            if result == "ok":  # result.json before the log: a crash between leaves a finished lane, never a ready one
                body = {"status": "ok", "token": token, "holder": run.lease.holder, "note": req.args[2], "at": snap.now}
                before = lambda: self._mark_finished(req.slug, body)  # noqa: E731 -- returns its undo
            return Step(out, events, before=before, own=0, after=lambda _: self._cache(
                lambda: self._unmark_running(req.slug, token), "running marker", req.slug))

        return self._request(req, refusal, plan, decl=decl)

    def recover(self, slug: str | None = None, source: str | None = None, reason: str | None = None,
                key: str | None = None) -> Outcome:
        """Take back orphaned leases (every one, or ``slug``'s); with
        ``slug``, also end a running marker that has no lease. Naming a
        lane is the operator's alone."""
        decl = self.declaration()
        req = _Request("recover", None if slug is None else as_text(slug), _text(reason), _text(source), _text(key))
        refusal = _shape_names(req.slug, (), req.source)

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            events = plan_recover(snap, decl.runner, req.slug)
            if isinstance(events, Refusal):
                return events
            taken = [e["slug"] for e in events if e["action"] in ("expire", "recover")]
            parked = [e["slug"] for e in events if e["action"] == "quarantine"]
            words = f"took back {' '.join(taken)}" if taken else "no orphaned lease to take back"
            if parked:
                words += f"; quarantined {' '.join(parked)}"
            out = Outcome("done" if events else "noop", "recover", req.slug, by, message=words)

            def after(recorded: list[dict[str, Any]]) -> list[str]:
                notes = []
                for e in events:
                    if e["action"] in ("expire", "recover"):
                        notes += self._cache(lambda: self._unmark_running(e["slug"], e["token"]),
                                             "running marker", e["slug"])
                return notes

            return Step(out, events, after=after, own=0 if events else None)

        return self._request(req, refusal, plan, decl=decl, operator_only=req.slug is not None)

    def unpark(self, slug: str, reason: str | None, source: str | None = None, key: str | None = None) -> Outcome:
        """Return a quarantined lane to the queue with a fresh retry budget;
        operator only, with a reason. Its attempt history stays."""
        decl = self.declaration()
        req = _Request("unpark", as_text(slug), _text(reason), _text(source), _text(key))
        refusal = _shape_names(req.slug, (), req.source)
        if refusal is None and not (req.reason or "").strip():
            refusal = Refusal("blank_reason", "unpark needs --reason TEXT saying why the lane may run again")

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            event = plan_unpark(snap, req.slug)
            if isinstance(event, Refusal):
                return event
            return Step(Outcome("done", "unpark", req.slug, by, message=f"{req.slug} may be claimed again, "
                                f"with {decl.runner.attempts} fresh attempts"), [event])

        return self._request(req, refusal, plan, decl=decl, operator_only=True)

    def schedule(self, slug: str, not_before: str, source: str | None = None, reason: str | None = None,
                 key: str | None = None) -> Outcome:
        """Let ``slug`` start no earlier than ``not_before`` (a time as
        ``clock.parse`` reads it); until then it keeps its place and is
        passed over."""
        req = _Request("schedule", as_text(slug), _text(reason), _text(source), _text(key), (_text(not_before),))
        when, refusal = _when(req.args[0], _shape_names(req.slug, (), req.source))

        def plan(snap: Snapshot, by: str) -> Step | Refusal:
            event = plan_schedule(snap, req.slug, when)
            if isinstance(event, Refusal):
                return event
            words = f"nothing to do: {event['noop']}" if "noop" in event else f"{req.slug} starts no earlier than {when}"
            return Step(Outcome("noop" if "noop" in event else "done", "schedule", req.slug, by, message=words), [event])

        return self._request(req, refusal, plan)

    # -- what a directory keeps in files and a database in rows ------------

    def _mark_running(self, slug: str, body: dict[str, Any]) -> None:
        ledger.mark_running(self.root, slug, body, None)

    def _unmark_running(self, slug: str, token: int | None) -> None:
        ledger.unmark_running(self.root, slug, token)

    def _mark_finished(self, slug: str, body: dict[str, Any]) -> Callable[[], None] | None:
        return ledger.mark_finished(self.root, slug, body, None)

    def _settle(self, slug: str, how: str) -> None:
        """Write the lane into its ledger (before the record: a crash
        between leaves a settled lane, and a retry is a recorded no-op)."""
        queuefile.append_line(os.path.join(self.root, ledger.INTEGRATED if how == "integrated" else ledger.ABANDONED),
                              slug + "\n")

    def _say(self, at: str, words: str, owner_ids: tuple[int, int] | None) -> None:
        ledger.say(self.root, at, words, owner_ids)

    def _judge(self, decl: config.Declaration, source: str | None, operator_only: bool):
        """The verdict on the caller, the storm owner's ids when the caller
        is another account (None: the caller is the owner), and why the
        caller cannot record a line ('' when it can)."""
        who = authority.caller(self.env)
        op = authority.owner(self.root)
        verdict = authority.judge(who, op, decl, source, operator_only=operator_only)
        owner_ids = None if authority.is_owner(who, op) else (op.uid, op.gid)
        return verdict, owner_ids, self._unrecordable(decl, who, op, self.log_path(decl)), who

    def _writing(self, log_path: str, owner_ids: tuple[int, int] | None):
        """The writers' exclusion for one request."""
        from .log import lock

        return lock.held(log_path, self.wait, may_create=owner_ids is None)

    def _queue(self, log_path: str, line: str) -> None:
        """Append a whole line to the lanes (before the record)."""
        from .log import writer

        writer.check_writable(log_path)
        queuefile.append_line(os.path.join(self.root, "queue.txt"), line)

    def _append(self, log: reader.LogRead, bodies: list[dict[str, Any]], at: str, by: str,
                owner_ids: tuple[int, int] | None) -> list[dict[str, Any]]:
        from .log import writer

        return writer.append(log, bodies, at, by, owner_ids)

    def _cache(self, write: Callable[[], Any], what: str, slug: str) -> list[str]:
        """Write a file that only caches what the log records; a failure is a note, not a failure."""
        try:
            write()
        except OSError as exc:
            return [f"the {what} of {slug} could not be written ({exc.strerror or exc}); the log's record stands"]
        return []

    @property
    def _t(self) -> float:
        """The time a request is planned at (POSIX seconds)."""
        import time

        return time.time()

    # -- the one path every request takes ------------------------------

    def _request(self, req: _Request, shape: Refusal | None,
                 plan: Callable[[Snapshot, str], Step | Refusal] | None,
                 dry_run: bool = False, decl: config.Declaration | None = None, operator_only: bool = False) -> Outcome:
        """The one path of every request. A ``dry_run`` takes it up to the
        queue append and the log write, then stops: it takes no lock (it is a
        reader, like ``list``), writes nothing, and answers what the request
        would have answered, with the run order it would leave.

        A request under a key that its principal has used before answers
        with the first outcome and records nothing when its arguments are
        the same, and is refused (``idempotency_conflict``) when they are not."""
        decl = decl or self.declaration()
        verdict, owner_ids, unrecordable, who = self._judge(decl, req.source, plan is None or operator_only)
        by = verdict.by
        bad_key = _shape_key(req.key)
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
        from contextlib import nullcontext

        from .log import writer

        at = now()
        queued = False
        step: Step | None = None
        undo = None
        try:
            with nullcontext() if dry_run else self._writing(log_path, owner_ids):
                at = now()  # the time the request is answered at, under the lock
                try:
                    log = self._read(decl)
                except UnknownOrder:
                    if plan is not None:
                        raise  # answer 3, record nothing
                    if refusal is not None:
                        return self._refused(req, by, refusal, authorised, recorded=False,
                                             why_not="the priority order is unknown")
                    return self._start_new_log(req, by, log_path, at)
                if log.state.moved_to:
                    from .errors import NotHere

                    raise NotHere(f"this storm moved to {log.state.moved_to} (the log's last line says so): ask "
                                  "there with --root URL; nothing was recorded here")
                keyed = log.state.keys.get(by, {}).get(req.key) if req.key is not None else None
                if keyed is not None and keyed.fingerprint == req.fingerprint():
                    return _repeated(req, by, keyed, dry_run, log, at)
                if keyed is not None and refusal is None:
                    refusal, authorised = Refusal(
                        "idempotency_conflict",
                        f"key {quote(req.key)} was first used by {by} for a different request (line {keyed.seq}); "
                        "a key names one request: use a new key for a new request"), True
                if plan is None and refusal is None:
                    refusal, authorised = LOG_READABLE, True
                if refusal is None:
                    snap = self._snapshot(log, at)
                    result = plan(snap, by)
                    if isinstance(result, Refusal):
                        refusal, authorised = result, True
                    else:
                        step = result
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
                    if req.reason is not None:
                        bodies[own]["reason"] = req.reason
                    if req.key is not None:
                        bodies[own]["key"] = req.key
                        bodies[own]["fingerprint"] = req.fingerprint()
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
        if not events:
            return out
        own_index = len(bodies) - 1 if own is None else own % len(bodies)
        out.event = events[len(events) - len(bodies) + own_index]  # a repair line may come first
        out.recorded = True
        if events[0]["action"] == "repair":
            out.warnings.append(f"repaired the log: kept {events[0]['torn']} torn bytes in {events[0]['side']} and recorded it")
        self._say(at, _progress_words(out, req), owner_ids)
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


def leased_results(root: str, led: ledger.Ledgers, state: fold.LaneState) -> dict[str, int | None]:
    """The tokens of the ``result.json`` files of lanes that hold a lease:
    the only results whose author matters (see ``resolver``)."""
    return ledger.result_tokens(root, [s for s, r in state.runs.items() if r.lease is not None and s in led.finished])


def _rehearsed(req: _Request, step: Step, snap: Snapshot, log: reader.LogRead) -> Outcome:
    """The outcome of a dry run that the request would pass: what it would
    move, and the run order the replayed lane would then give."""
    out = step.out
    if step.line is not None:
        body = step.events[-1]
        snap = with_lane(snap, queuefile.Lane(req.slug, body["issue"], tuple(body["deps"]), 1 << 61))
    events = [{"at": snap.now, "by": out.by, **e} for e in step.events]
    after = Snapshot(snap.lanes, snap.ledgers, fold.replay(events, snap.state), snap.now)
    out.dry_run = True
    out.order = [row.slug for row in resolve(after).rows]
    out.message = f"{out.message} ({DRY_RUN})"
    out.warnings = [] if log.torn else list(log.warnings)
    return out


def _repeated(req: _Request, by: str, keyed: fold.Keyed, dry_run: bool, log: reader.LogRead, at: str) -> Outcome:
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


def _lane_step(req: _Request, by: str, plan: Plan | Refusal, fields: dict[str, Any], line: str | None = None) -> Step | Refusal:
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


DRY_RUN = "dry run: nothing recorded"

LOG_READABLE = Refusal("log_readable", "the priority log replays fine, so there is nothing to reset; "
                       "use bump and unbump to change the lane")


def _text(value: str | None) -> str | None:
    return None if value is None else as_text(value)


def default_holder() -> str:
    """A claim's holder when none is given: this host and the parent
    process (the runner that asked), made a name."""
    import re
    import socket

    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip(".-") or "host"
    return f"{host[:150]}-{os.getppid()}".replace("..", ".")


def _shape_holder(holder: str) -> Refusal | None:
    if not is_name(holder):
        return Refusal("invalid_holder", f"holder {quote(holder)} is not a name: {why_not_name(holder)}")
    return None


def _shape_token(token: int) -> Refusal | None:
    if isinstance(token, bool) or not isinstance(token, int) or token < 1:
        return Refusal("invalid_token", f"token {quote(str(token))} is not a positive whole number; "
                       "give the token the claim printed")
    return None


KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@/+=-")


def _shape_key(key: str | None) -> Refusal | None:
    """A key is 1 to 200 of letters, digits and ``._:@/+=-``."""
    if key is None or (0 < len(key) <= 200 and set(key) <= KEY_CHARS):
        return None
    return Refusal("invalid_key", f"key {quote(key)} is not 1 to 200 letters, digits or ._:@/+=- characters")


def _when(text: str | None, refusal: Refusal | None) -> tuple[str | None, Refusal | None]:
    """The stamp of a ``--not-before`` time, and the first shape refusal."""
    if text is None or refusal is not None:
        return None, refusal
    import time

    try:
        return clock.parse(text, time.time()), None
    except ValueError as exc:
        return None, Refusal("invalid_time", f"--not-before: {printable(str(exc))}")


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
        if req.verb not in ("push", "bump", "unbump"):
            words += f": {out.message}"
    if req.reason is not None:
        words += f"; reason {quote(req.reason)}"
    return words

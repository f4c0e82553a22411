"""A database storm's own doctor checks (``Upkeep.doctor``): the same
findings, output and exit codes as on a directory (``core.checkup``), for
what a database holds.

``gather`` reads the storm (the edge: the server, the clock) on the
store's connection; ``diagnose`` turns what it read into findings (plain
data, no I/O). It examines: the log
(the chain from line 1, and the state row against the fold of the log: the
checks of ``verify``), the declaration, leases past their expiry,
quarantined and stray lanes, lanes leased for longer than the threshold,
the grant (no role but the operator's may write the storm's tables, own
them, act as the operator, or execute a storm function but a runner its own;
no schema on the operator's search_path that another role may create
objects in; each runner role's timeouts set), the storm's lock (no session
holds it for longer than a request would), and the event table's
append-only triggers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ... import wall
from ...core import config
from ...core.checkup import ERROR, WARNING, Finding, cycle_findings, declaration_findings, runner_findings
from ...core.errors import StormError, StormUnreadable
from ...core.lane import Snapshot
from ...core.names import printable, quote
from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .session import Session

#: what lets a role change a table's rows, a sequence's value, or the schema's objects (by kind)
WRITES = {"table": ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER"), "sequence": ("UPDATE", "USAGE"),
          "schema": ("CREATE",)}
#: the triggers the schema puts on the event table: the function each calls, and what it refuses (the insert
#: check from schema version 9; sql/schema.sql)
TRIGGERS = {"event_append_only": ("append_only", "UPDATE and DELETE"),
            "event_no_truncate": ("append_only", "TRUNCATE"),
            "event_well_formed": ("event_well_formed", "a line that is not the log's next, well formed")}


@dataclass(frozen=True)
class DbFacts:
    """Everything doctor read of a database storm, at ``now`` (seconds since the epoch)."""

    root: str  # the URL as shown (password hidden)
    operator: str | None  # None: the storm row could not be read
    declaration: config.Declaration
    problem: tuple[str, str, str] | None  # verify's finding: (code, subject, words)
    snapshot: Snapshot | None  # None when the state could not be read
    writers: tuple[tuple[str, str, str], ...]  # (role or PUBLIC, object, privilege) beyond the operator's
    owners: tuple[tuple[str, str, str], ...]  # (object, kind, owner) owned by another role than the operator
    members: tuple[str, ...]  # roles that may act as the operator's role
    triggers: tuple[tuple[str, str], ...]  # (trigger, why it does not guard) for each one that does not
    now: float
    #: (schema, roles) for each schema on the operator's search_path that a role but the operator may CREATE in
    path: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (runner role, the statements that would set what ``grant`` sets and it lacks)
    unbounded: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (pid, role, seconds or None, for at least how long) of each session holding the storm's lock too long
    holders: tuple[tuple[int, str, float], ...] = ()
    #: (function, role or PUBLIC) for each EXECUTE a role but the operator holds that it should not
    executors: tuple[tuple[str, str], ...] = ()
    #: how far the storm's clock runs ahead of the server's (seconds), and the time it stands still at, if any
    clock: tuple[float, str | None] = (0.0, None)
    #: why the server no longer decides by what it folded (None: it does)
    withdrawn: str | None = None

    def diagnose(self, running_hours: float) -> list[Finding]:
        return diagnose(self, running_hours)


def _exposures(facts: DbFacts) -> list[Finding]:
    """What lets a role other than the operator change the storm, or stop
    it: owners, writers, members, executors, a search_path schema others
    create in, a held lock, a runner role without timeouts."""
    out: list[Finding] = []
    op = facts.operator or "the operator"
    for obj, kind, owner in facts.owners:
        out.append(Finding(ERROR, "exposed", obj, f"is owned by role {quote(owner)}, not the storm's operator {quote(op)}: "
                           "that role could rewrite what the lanes do",
                           q("fix_owner").format(kind=kind.upper(), obj=obj, op=op)))
    for role, obj, privilege in facts.writers:
        target = "SCHEMA storm_queue" if obj == "storm_queue" else obj
        out.append(Finding(ERROR, "exposed", obj, f"role {quote(role)} holds {privilege} on it: a role other than the "
                           "operator's could forge what the lanes do",
                           q("fix_privilege").format(privilege=privilege, target=target, role=role)))
    for member in facts.members:
        out.append(Finding(ERROR, "exposed", "storm_queue", f"role {quote(member)} is a member of the operator's role "
                           f"{quote(op)}: it may act as the operator and write the tables",
                           q("fix_member").format(op=op, member=member)))
    for function, role in facts.executors:
        out.append(Finding(ERROR, "exposed", function, f"role {quote(role)} may execute it: a role other than the "
                           "operator could call what only the storm's own code should (a runner: only its serving "
                           "functions)", q("fix_execute").format(function=function, role=role)))
    for schema, roles in facts.path:
        out.append(Finding(ERROR, "search_path_exposed", schema,
                           f"is on the operator's search_path and role(s) {', '.join(quote(r) for r in roles)} may "
                           "create objects in it: a function there that matches a call's arguments better than "
                           "pg_catalog's would run as the operator, in a hand edit or any tool that uses the path",
                           q("fix_create").format(schema=schema, roles=", ".join(roles)) + " (or take the schema off the "
                           "search_path: ALTER ROLE ... SET search_path)"))
    for pid, role, seconds in facts.holders:
        out.append(Finding(ERROR, "lock_held", f"pid {pid}",
                           f"role {quote(role)} has held the storm's lock for {seconds:.0f} s or more, longer than any "
                           "request would: every write waits for it",
                           "as a role that may (a superuser, or the operator for its own sessions): "
                           + q("fix_holder").format(pid=pid)))
    for role, statements in facts.unbounded:
        out.append(Finding(WARNING, "runner_unbounded", role,
                           f"runner role {quote(role)} has no idle_in_transaction_session_timeout or lock_timeout "
                           "set in this database: a runner that hangs inside a transaction holding the storm's lock "
                           "stops every write until it is ended",
                           "as a role that may (CREATEROLE, or a superuser): " + " ".join(s + ";" for s in statements)))
    return out


def diagnose(facts: DbFacts, running_hours: float) -> list[Finding]:
    """Every finding, in the order: grant (owners, writers, members),
    triggers, declaration, log, lanes (stray, leased too long, then what
    runners left). Pure: reads nothing but ``facts``."""
    out = _exposures(facts)
    ahead, fixed = facts.clock
    if ahead or fixed is not None:
        how = f"stands still at {fixed}" if fixed is not None else f"runs {ahead:+g} s off the server's"
        out.append(Finding(WARNING, "clock_moved", "storm_queue.clock",
                           f"the storm's clock {how}: every runner request is timed by it (a test's setting)",
                           q("fix_clock") + " (as the operator)"))
    for name, why in facts.triggers:
        out.append(Finding(ERROR, "not_append_only", "storm_queue.event",
                           f"the trigger {name} {why}: the event table no longer refuses {TRIGGERS[name][1]}, "
                           "so history could change other than by appending a well-formed line",
                           "restore it as the schema creates it (storm_queue/store/postgres/sql/schema.sql and sql/functions/, "
                           "as the operator), then: storm-queue verify"))
    if facts.withdrawn is not None:
        out.append(Finding(ERROR, "withdrawn", "storm_queue.storm",
                           f"the server no longer decides runner requests by what it folded of the log "
                           f"({facts.withdrawn}): every runner request is answered that the order is unknown (exit 3)",
                           "once storm-queue verify finds the log sound: storm-queue upgrade URL (as the operator) "
                           "folds the server's tables again from the log"))
    out += declaration_findings(facts.declaration, "declaration",
                                "declare a corrected file: storm-queue declare storm.toml")
    if facts.problem is not None:
        code, subject, words = facts.problem
        out.append(Finding(ERROR, code, subject, words,
                           "restore the database from a backup; storm-queue verify names the first bad line"))
    snap = facts.snapshot
    if snap is None:
        return out
    from ...core.resolver import resolve

    for s in snap.skipped:  # a lane row a hand edit made unreadable, skipped as a bad queue.txt line is
        out.append(Finding(WARNING, "skipped_line", f"storm_queue.lane:{s.line}", f"{quote(s.text)} is skipped: {s.why}",
                           f"correct or delete the row (as the operator: UPDATE or DELETE storm_queue.lane WHERE pos = "
                           f"{s.line})"))
    for slug in resolve(snap).stray:
        out.append(Finding(WARNING, "stray", slug, "is prioritised, but the storm has no such lane; it never runs",
                           f"storm-queue add {slug} ISSUE, or: storm-queue unbump {slug}"))
    for slug in sorted(snap.state.runs):
        run = snap.state.run(slug)
        last = run.history[-1] if run.history else None
        if run.lease is None or last is None or last.end is not None or snap.ledgers.done(slug):
            continue
        if snap.now and run.lease.expires <= snap.now:  # orphaned: runner_findings says so
            continue
        hours = (facts.now - _seconds(last.at, facts.now)) / 3600
        if hours > running_hours:
            out.append(Finding(WARNING, "long_running", slug,
                               f"has been leased to {printable(run.lease.holder)} for {hours:.1f} hours "
                               f"(threshold {running_hours:g}), since its claim under token {last.token}",
                               "check its runner; a dead runner stops renewing, and the next claim or "
                               "storm-queue recover takes the lane back once its lease expires"))
    return out + cycle_findings(snap) + runner_findings(snap, facts.declaration.runner.attempts)


def _seconds(at: str, default: float) -> float:
    from ...core.clock import seconds

    try:
        return seconds(at)
    except (ValueError, TypeError):
        return default


def gather(storm: Session, now: float | None = None) -> DbFacts:
    """Read the database store ``storm`` (``store.Database``) for
    ``diagnose``: never writes, takes no lock. What the storm's own rows
    cannot give is a finding; a role that may not read them, or a database
    with no storm, is the store's error (exit 2), as on a directory."""
    from ...core.clock import stamp
    from .version import BOUNDARY as TABLE_LOCK
    from .version import read as read_version

    t = wall.seconds() if now is None else now
    decl = storm.declaration()  # NoStorm, StormUnreadable: doctor cannot examine
    problem = None
    audit = storm.verify()  # (``Store.verify``)
    if audit.problem is not None:
        if audit.checkpoint == "disagrees":
            problem = ("state_disagrees", "storm_queue.state", audit.problem.what)
        else:
            problem = ("unknown_order", f"storm_queue.event:{audit.problem.line}", audit.problem.what)
    snap = None
    if problem is None:
        try:
            with storm._errors():
                snap = storm.snapshot(storm.read(decl), stamp(t))
        except StormUnreadable as exc:
            problem = ("unreadable", "storm_queue", str(exc))
        except StormError as exc:
            problem = ("unknown_order", "storm_queue.state", str(exc))
    with storm._errors():
        conn = storm.conn
        operator = conn.execute(q("read_operator")).fetchone()
        operator = operator[0] if operator else None
        writers, owners, members = _grant(conn, operator)
        triggers = _triggers(conn, read_version(storm))
        mine = operator is not None and conn.execute(q("session_user")).fetchone()[0] == operator
        path = _path(conn, operator) if mine else ()
        bounded = read_version(storm) >= TABLE_LOCK  # what a schema before version 9 has not yet
        unbounded = _unbounded(conn) if bounded else ()
        holders = _holders(conn) if bounded else ()
        executors = _executors(conn, operator) if bounded else ()
        # (the storm's clock: only the operator may read it)
        clock = tuple(conn.execute(q("read_clock")).fetchone()) if bounded and mine else (0.0, None)
        withdrawn = conn.execute(q("read_withdrawn")).fetchone()[0] if bounded else None
    if withdrawn is not None and problem is not None and problem[2].startswith("the server no longer decides"):
        problem = None  # (verify's words for it: said once, as a finding of its own)
    return DbFacts(storm.root, operator, decl, problem, snap, writers, owners, members, triggers, t, path, unbounded,
                   holders, executors, clock, withdrawn)


#: a session holding the storm's lock this long is past any request's (seconds)
HELD_TOO_LONG = 5.0


def _path(conn, operator: str | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each schema on the search_path a session of the operator's starts
    with (its role's, its database's, or the server's; storm-queue's own
    sessions fix theirs) that a role other than the operator (a login
    role that is not a superuser) may CREATE in. Asked as the operator
    only: another role's session starts with its own path."""
    
    found: dict[str, list[str]] = {}
    for schema, role in conn.execute(q("exposed_path"), (operator,)).fetchall():
        found.setdefault(schema, []).append(role)
    return tuple((schema, tuple(roles)) for schema, roles in found.items())


def _unbounded(conn) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each runner role lacking a setting of ``members.RUNNER_SETTINGS``, with the statements that set them."""
    from .members import RUNNER_SETTINGS, settings_statements
    
    out = []
    for role, config in conn.execute(q("runner_settings")).fetchall():
        set_ = {item.partition("=")[0] for item in config or ()}
        if any(name not in set_ for name, _ in RUNNER_SETTINGS):
            out.append((role, tuple(settings_statements(conn, role))))
    return tuple(out)


def _holders(conn) -> tuple[tuple[int, str, float], ...]:
    """The sessions holding the storm's lock for ``HELD_TOO_LONG`` seconds
    or more: by their transaction's start where this role may see it (its
    own sessions; a superuser's, or pg_read_all_stats, every one), else by
    looking again that long after (the same transaction still holding it)."""
    import time

    
    first = conn.execute(q("lock_holders")).fetchall()
    out, unseen = [], []
    for pid, role, vxid, age in first:
        if age is not None:
            if age >= HELD_TOO_LONG:
                out.append((pid, role, float(age)))
        else:
            unseen.append((pid, role, vxid))
    if unseen:
        time.sleep(HELD_TOO_LONG)
        still = {(pid, vxid) for pid, _, vxid, _ in conn.execute(q("lock_holders")).fetchall()}
        out += [(pid, role, HELD_TOO_LONG) for pid, role, vxid in unseen if (pid, vxid) in still]
    return tuple(sorted(out))


def _executors(conn, operator: str | None) -> tuple[tuple[str, str], ...]:
    """Each EXECUTE on a storm function held by PUBLIC or a role other than
    the operator, but a runner role's on its own serving functions."""
    
    if operator is None:
        return ()
    return tuple((function, role) for function, role in conn.execute(q("function_executors"), (operator,)).fetchall())


def _grant(conn, operator: str | None):
    """(writers, owners, members): every write privilege a role other than
    the operator's holds on the schema or its tables and sequences, every
    such object another role owns, and the roles that are members of the
    operator's role."""
    writers, owners = [], []
    for obj, kind, owner, acl in conn.execute(q("storm_objects")).fetchall():
        if owner != operator:
            owners.append((obj, kind, owner))
        if acl:
            for grantee, privilege in conn.execute(q("object_privileges"), (acl,)).fetchall():
                if grantee != operator and privilege in WRITES[kind]:
                    writers.append((grantee, obj, privilege))
    members = tuple(r[0] for r in conn.execute(q("role_members"), (operator,)).fetchall()) if operator else ()
    return tuple(sorted(set(writers))), tuple(owners), members


def storm_function_body(function: str = "append_only") -> str:
    """The body of ``storm_queue.FUNCTION()`` as the schema's last word on it creates it."""
    from .queries import schema

    found = re.findall(rf"CREATE (?:OR REPLACE )?FUNCTION storm_queue\.{function}\(\)[^$]*\$\$(.*?)\$\$", schema(), re.S)
    return found[-1] if found else ""


def _triggers(conn, version: int) -> tuple[tuple[str, str], ...]:
    """Each of the schema's event-table triggers that does not guard it,
    with why: missing, disabled, calling another function, or a function
    whose body is no longer the one the schema wrote (the insert check:
    from schema version 9)."""
    from .version import BOUNDARY

    rows = conn.execute(q("event_triggers")).fetchall()
    found = {name: (enabled, func, src) for name, enabled, func, src in rows}
    out = []
    for name, (function, _) in TRIGGERS.items():
        if name == "event_well_formed" and version < BOUNDARY:
            continue
        if name not in found:
            out.append((name, "is missing"))
            continue
        enabled, func, src = found[name]
        if enabled == "D":
            out.append((name, "is disabled"))
        elif enabled == "R":
            out.append((name, "fires only in replica sessions (ENABLE REPLICA TRIGGER)"))
        elif func != f"storm_queue.{function}()":
            out.append((name, f"calls {quote(func)}, not storm_queue.{function}()"))
        elif " ".join(src.split()) != " ".join(storm_function_body(function).split()):
            out.append((name, f"calls storm_queue.{function}(), whose body is not the one the schema wrote"))
    return tuple(out)

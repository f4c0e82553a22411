"""``storm-queue doctor`` on a database storm: the same findings, output and
exit codes as on a directory (``doctor``), for what a database holds.

``gather`` reads the storm (the edge: the server, the clock); ``diagnose``
turns what it read into findings (plain data, no I/O). It examines: the log
(the chain from line 1, and the state row against the fold of the log: the
checks of ``verify``), the declaration, leases past their expiry,
quarantined and stray lanes, lanes leased for longer than the threshold,
the grant (no role but the operator's may write the storm's tables, own
them, or act as the operator), and the event table's append-only triggers.
The module imports no driver: it asks the store's connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import wall
from ..core import config
from ..core.errors import StormError, StormUnreadable
from ..core.lane import Snapshot
from ..core.names import printable, quote
from ..store.postgres.queries import q
from .doctor import ERROR, WARNING, Finding, cycle_findings, declaration_findings, runner_findings

#: what lets a role change a table's rows, a sequence's value, or the schema's objects (by kind)
WRITES = {"table": ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER"), "sequence": ("UPDATE", "USAGE"),
          "schema": ("CREATE",)}
#: the triggers schema.sql puts on the event table, and what each refuses
TRIGGERS = {"event_append_only": "UPDATE and DELETE", "event_no_truncate": "TRUNCATE"}


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

    def diagnose(self, running_hours: float) -> list[Finding]:
        return diagnose(self, running_hours)


def diagnose(facts: DbFacts, running_hours: float) -> list[Finding]:
    """Every finding, in the order: grant (owners, writers, members),
    triggers, declaration, log, lanes (stray, leased too long, then what
    runners left). Pure: reads nothing but ``facts``."""
    out: list[Finding] = []
    op = facts.operator or "the operator"
    for obj, kind, owner in facts.owners:
        out.append(Finding(ERROR, "exposed", obj, f"is owned by role {quote(owner)}, not the storm's operator {quote(op)}: "
                           "that role could rewrite what the lanes do",
                           f"ALTER {kind.upper()} {obj} OWNER TO {op}"))
    for role, obj, privilege in facts.writers:
        target = "SCHEMA storm_queue" if obj == "storm_queue" else obj
        out.append(Finding(ERROR, "exposed", obj, f"role {quote(role)} holds {privilege} on it: a role other than the "
                           "operator's could forge what the lanes do",
                           f"REVOKE {privilege} ON {target} FROM {role}"))
    for member in facts.members:
        out.append(Finding(ERROR, "exposed", "storm_queue", f"role {quote(member)} is a member of the operator's role "
                           f"{quote(op)}: it may act as the operator and write the tables",
                           f"REVOKE {op} FROM {member}"))
    for name, why in facts.triggers:
        out.append(Finding(ERROR, "not_append_only", "storm_queue.event",
                           f"the trigger {name} {why}: the event table no longer refuses {TRIGGERS[name]}, "
                           "so history could change other than by appending",
                           "restore it as storm_queue/store/postgres/schema.sql creates it (as the operator), then: storm-queue verify"))
    out += declaration_findings(facts.declaration, "declaration",
                                "declare a corrected file: storm-queue declare storm.toml")
    if facts.problem is not None:
        code, subject, words = facts.problem
        out.append(Finding(ERROR, code, subject, words,
                           "restore the database from a backup; storm-queue verify names the first bad line"))
    snap = facts.snapshot
    if snap is None:
        return out
    from ..core.resolver import resolve

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
    from ..core.clock import seconds

    try:
        return seconds(at)
    except (ValueError, TypeError):
        return default


def gather(storm, now: float | None = None) -> DbFacts:
    """Read the database store ``storm`` (a ``store.postgres.store.Database``) for
    ``diagnose``: never writes, takes no lock. What the storm's own rows
    cannot give is a finding; a role that may not read them, or a database
    with no storm, is the store's error (exit 2), as on a directory."""
    from ..core.clock import stamp

    t = wall.seconds() if now is None else now
    decl = storm.declaration()  # NoStorm, StormUnreadable: doctor cannot examine
    problem = None
    audit = storm.verify()
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
        triggers = _triggers(conn, storm_function_body())
    return DbFacts(storm.root, operator, decl, problem, snap, writers, owners, members, triggers, t)


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


def storm_function_body() -> str:
    """The body of ``storm_queue.append_only()`` as schema.sql creates it."""
    from ..store.postgres.queries import schema

    found = re.search(r"FUNCTION storm_queue\.append_only\(\)[^$]*\$\$(.*?)\$\$", schema(), re.S)
    return found.group(1) if found else ""


def _triggers(conn, body: str) -> tuple[tuple[str, str], ...]:
    """Each of schema.sql's event-table triggers that does not guard it, with
    why: missing, disabled, calling another function, or a function whose
    body is no longer the one schema.sql wrote."""
    rows = conn.execute(q("event_triggers")).fetchall()
    found = {name: (enabled, func, src) for name, enabled, func, src in rows}
    out = []
    for name in TRIGGERS:
        if name not in found:
            out.append((name, "is missing"))
            continue
        enabled, func, src = found[name]
        if enabled == "D":
            out.append((name, "is disabled"))
        elif enabled == "R":
            out.append((name, "fires only in replica sessions (ENABLE REPLICA TRIGGER)"))
        elif func != "storm_queue.append_only()":
            out.append((name, f"calls {quote(func)}, not storm_queue.append_only()"))
        elif " ".join(src.split()) != " ".join(body.split()):
            out.append((name, "calls storm_queue.append_only(), whose body is not the one schema.sql wrote"))
    return tuple(out)

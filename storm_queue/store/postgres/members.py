"""The roles the operator granted a database storm (``storm-queue grant
runner|reader ROLE``; ``storm_queue.member``, sql/schema.sql): who is granted as what,
and the membership and privileges a grant or a revoke changes, in the
request's transaction."""

from __future__ import annotations

from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def granted(conn: Any) -> set[str]:
    """As what the operator granted the session's role (runner, reader)."""
    return {row[0] for row in conn.execute(q("read_member")).fetchall()}


def role_exists(conn: Any, role: str) -> bool:
    return conn.execute(q("role_exists"), (role,)).fetchone() is not None


def is_member(conn: Any, role: str, kind: str) -> bool:
    return conn.execute(q("is_member"), (role, kind)).fetchone() is not None


#: what ``grant runner`` sets for the role in the storm's database (``ALTER ROLE ... IN DATABASE ... SET``):
#: a runner that crashed or hung inside a transaction holding the storm's lock (its serving functions take
#: it) is ended, or stops waiting for a lock, this soon; the storm waits no longer than that for it
RUNNER_SETTINGS = (("idle_in_transaction_session_timeout", "10s"), ("lock_timeout", "5s"))


def change(conn: Any, verb: str, kind: str, role: str) -> list[str]:
    """``grant`` (or ``revoke``) ``role`` as ``kind``: its membership and
    its privileges, a reader's USAGE and SELECT, and a runner's EXECUTE on
    its serving functions besides (what a role is granted as the other
    kind too stays); a runner's ``RUNNER_SETTINGS`` set (or, revoked,
    reset). Returns the statements setting them that the operator's role
    may not run (it needs CREATEROLE, or to be a superuser): a role that
    may must run them; the grant stands without them."""
    from .driver import quote_ident

    def run(*statements: str) -> None:
        for statement in statements:
            conn.execute(statement.format(role=quote_ident(role)))

    other = is_member(conn, role, "reader" if kind == "runner" else "runner")
    if verb == "grant":
        conn.execute(q("insert_member"), (role, kind))
        run(q("grant_usage"), q("grant_select"), q("revoke_operators_tables"))
        if kind == "runner":
            run(q("grant_runner_functions"))
            return _settings(conn, role, reset=False)
        return []
    conn.execute(q("delete_member"), (role, kind))
    if kind == "runner":
        run(q("revoke_runner_functions"))
        _settings(conn, role, reset=True)
    if not other:
        run(q("revoke_select"), q("revoke_usage"))
    return []


def settings_statements(conn: Any, role: str, reset: bool = False) -> list[str]:
    """The statements that set (or ``reset``) a runner role's ``RUNNER_SETTINGS`` in this database."""
    from .driver import quote_ident

    database = conn.execute(q("session_user_and_database")).fetchone()[1]
    statement = q("reset_role_setting") if reset else q("set_role_setting")
    return [statement.format(role=quote_ident(role), database=quote_ident(database), setting=setting,
                             value=f"'{value}'") for setting, value in RUNNER_SETTINGS]


def _settings(conn: Any, role: str, reset: bool) -> list[str]:
    """Run ``settings_statements``, each in a savepoint; those refused for want of privilege, returned."""
    from .driver import errors

    refused = []
    for statement in settings_statements(conn, role, reset):
        try:
            with conn.transaction():
                conn.execute(statement)
        except errors.InsufficientPrivilege:
            refused.append(statement)
    return refused

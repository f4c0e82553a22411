"""The roles the operator granted a database storm (``storm-queue grant
runner|reader ROLE``, ``migrations/0002.sql``): who is granted as what,
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


def change(conn: Any, verb: str, kind: str, role: str) -> None:
    """``grant`` (or ``revoke``) ``role`` as ``kind``: its membership and
    its privileges, a reader's USAGE and SELECT, and a runner's EXECUTE on
    the operator's functions besides (what a role is granted as the other
    kind too stays)."""
    from .libpq import quote_ident

    def run(*statements: str) -> None:
        for statement in statements:
            conn.execute(statement.format(role=quote_ident(role)))

    other = is_member(conn, role, "reader" if kind == "runner" else "runner")
    if verb == "grant":
        conn.execute(q("insert_member"), (role, kind))
        run(q("grant_usage"), q("grant_select"))
        if kind == "runner":
            run(q("grant_runner_functions"))
    else:
        conn.execute(q("delete_member"), (role, kind))
        if kind == "runner":
            run(q("revoke_runner_functions"))
        if not other:
            run(q("revoke_select"), q("revoke_usage"))

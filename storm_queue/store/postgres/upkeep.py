"""A database storm's upkeep (``store.interface.Upkeep``): what is asked
of it beside the request path, on the ``store.Database`` it is made from."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...core import config
    from .session import Session


class Upkeep:
    """``Database.upkeep``: the store's connection, and its members (``members``)."""

    def __init__(self, store: Session):
        self.store = store

    def log_file(self, decl: config.Declaration) -> None:
        """None: the log is rows, never a file a reader may stat or follow."""
        return None

    def member(self, role: str, kind: str) -> bool | None:
        """``members.is_member``, under the request's transaction; None for a
        role the server does not know."""
        from . import members

        if not members.role_exists(self.store.conn, role):
            return None
        return members.is_member(self.store.conn, role, kind)

    def change_member(self, verb: str, kind: str, role: str) -> list[str]:
        """``members.change`` in the request's transaction (the statements
        the operator's role may not run, returned); the store reads who
        its session's role is anew on its next request."""
        from .members import change

        refused = change(self.store.conn, verb, kind, role)
        self.store._kind = None
        return refused

    def close(self) -> None:
        """Close the store's connection (its next request opens a new one)."""
        self.store.close()

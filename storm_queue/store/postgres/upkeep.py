"""A database storm's upkeep (``store.interface.Upkeep``): what is asked
of it beside the request path, on the ``store.Database`` it is made from."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ...core import config
    from ...core.checkup import Checkup
    from .session import Session


class Upkeep:
    """``Database.upkeep``: the store's connection, and its members (``members``)."""

    appended = "added as a lane row"  # how a push's lane is enqueued, in the log's words

    def __init__(self, store: Session):
        self.store = store

    def log_file(self, decl: config.Declaration) -> None:
        """None: the log is rows, never a file a reader may stat or follow."""
        return None

    def declared_in(self) -> None:
        """None: ``declare`` records the declaration into the storm."""
        return None

    def watched(self) -> list[str]:
        """None: rows, no file to watch; the live view reads the storm every interval."""
        return []

    def tell_waits(self, tell: Callable[[str, str, float], None]) -> None:
        """Nothing: a request waits for the storm in its server (``lock_timeout``)."""

    def schema(self) -> tuple[int, int, bool]:
        """The schema's version read afresh in the transaction, this
        storm-queue's, and whether the server's tables were written by hand."""
        from . import version
        from .queries import schema_version

        return version.read(self.store, fresh=True), schema_version(), bool(version.withdrawn(self.store))

    def carry(self, was: int) -> int | None:
        """``version.migrate`` from ``was``; at the current version, ``version.rederive``."""
        from . import version
        from .queries import schema_version

        if was == schema_version():
            return version.rederive(self.store)
        version.migrate(self.store, was)
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

    def doctor(self, running_hours: float | None = None, now: float | None = None) -> Checkup:
        """``checkup.gather`` on the store's connection, diagnosed (``core.checkup.checkup``)."""
        from ...core.checkup import checkup
        from .checkup import gather

        return checkup(gather(self.store, now), running_hours)

    def close(self) -> None:
        """Close the store's connection (its next request opens a new one)."""
        self.store.close()

    def twin(self) -> Session:
        """The same storm, kept by a store of the same kind with a connection of its own (``Upkeep.twin``)."""
        return type(self.store)(self.store.url, self.store.env, self.store.wait)

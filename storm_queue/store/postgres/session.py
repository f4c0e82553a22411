"""What the modules that work for ``store.Database`` (``log``, ``served``,
``faults``, ``version``, ``upkeep``) ask of the one they are given: its connection,
its root and URL, what it has read and committed on that connection, and
the requests it reads by. ``Database`` has these members; the modules
name this Protocol, never ``store``, so ``store`` imports them and none
of them imports it back (no import circle in ``store/postgres``).

The ``_``-named members are the store's own bookkeeping, shared inside
this package alone: nothing outside ``store/postgres`` reaches them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager, Mapping, Protocol

if TYPE_CHECKING:
    from ...core import config, logread
    from ...core.authority import Judged
    from ...core.lane import Snapshot
    from ...core.outcome import Request


class Session(Protocol):
    """One storm's connection and what was learnt on it (``store.Database``)."""

    root: str  # where the storm is, as printed (its password masked)
    url: str  # the libpq URL it connects to, password and all: never printed
    env: Mapping[str, str]
    wait: float
    _pending: tuple[int, bytes] | None  # the line the open transaction is committing
    _state_known: Any  # connect._Known | None: the newest state read or committed on this object
    _body_seq: int  # the line the state row's body folds to, as last read
    _runs_counted: int  # the runs the server folded, as served.catch_up last counted them
    _catch_up_after: int  # how far behind the body is before served asks to catch up again
    _version: int | None  # the schema's version, as read on this connection
    _kind: tuple[str, str | None] | None  # the session's role and as what it was granted, as read

    @property
    def conn(self) -> Any:
        """The storm's connection, opened again when it died while idle."""

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""

    def _errors(self) -> ContextManager[None]:
        """The driver's errors, raised as the storm's own."""

    def _locked(self) -> ContextManager[None]:
        """The storm's lock held, in one transaction."""

    def _load(self) -> logread.LogRead:
        """The log's state, read now on the connection."""

    def declaration(self) -> config.Declaration:
        """The storm's declaration, read now."""

    def judge(self, req: Request, decl: config.Declaration, operator_only: bool) -> Judged:
        """Who asks, and whether they may (``Store.judge``)."""

    def read(self, decl: config.Declaration) -> logread.LogRead:
        """The log's state now (``Store.read``)."""

    def snapshot(self, log: logread.LogRead, at: str | None = None) -> Snapshot:
        """The storm as the core plans on it (``Store.snapshot``)."""

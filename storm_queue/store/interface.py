"""The store interface: what the request path (``service.passage``) and
the readers (``service.storm.Storm``) ask of a storm's keeping, and
nothing more. Two stores keep it: ``store.directory.store.Directory``
(files, flock, the log's writer and witness) and
``store.postgres.store.Database`` (rows, an advisory lock, one
transaction a request). Neither imports the other, nor the service.

A request goes: ``declaration`` -> ``judge`` -> ``writing`` (the lock) ->
``read`` -> ``snapshot`` -> the pure plan -> the ``effects`` that go
before the record -> ``append`` -> the effects that go after it. A reader
goes ``declaration`` -> ``read`` -> ``snapshot``, and takes no lock.

A store's failure reaches its caller only as the typed errors its
members document (``core.errors``): ``Busy``, ``Aborted``,
``RecordFailed``, ``WriteFailed`` (an I/O error stopped a write: its
words, its file, whether this account was denied, whether what it wrote
could not be taken back) and ``AppendFailed`` (one that stopped the
log's append, and how far it got); ``UnknownOrder``, ``StormUnreadable``
and ``NotHere`` for what cannot be read or done. The system's own
``OSError`` never leaves a store (``tests/unit/test_seam.py`` holds the
service to catching only these).

These are ``typing.Protocol`` classes: a store is any object with these
members, checked by ``isinstance`` (``runtime_checkable``) in the tests,
never a base class to inherit from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Protocol, runtime_checkable

from ..core.authority import Judged

if TYPE_CHECKING:
    from ..core.checkup import Checkup
    from ..core.config import Declaration
    from ..core.lane import Snapshot
    from ..core.logread import Cut, LogRead
    from ..core.outcome import Outcome, Request
    from ..core.queuetext import Skipped
    from ..core.resolver import View
    from ..core.runs import Claim
    from ..core.verify import Audit


@runtime_checkable
class Store(Protocol):
    """One storm's keeping. ``root`` is where it is, as printed (a URL's
    password masked); ``env`` the environment a caller is judged in;
    ``wait`` how long a writer waits for the storm's lock; ``upkeep`` what
    callers beside the request path ask of the keeping (``Upkeep``)."""

    root: str
    env: Mapping[str, str]
    wait: float
    upkeep: Upkeep

    def declaration(self) -> Declaration:
        """The storm's declaration (sources, runner settings), read now.
        Never raises for a declaration that cannot be parsed: its ``error``
        says why, and authority refuses every request until it is fixed."""

    def judge(self, req: Request, decl: Declaration, operator_only: bool) -> Judged:
        """Who asks, and whether they may make the request ``req`` (as its
        ``source``; ``operator_only``: no source may). Reads who asks from
        the store's own evidence: the process's uid against the directory's
        owner, the session's role against the operator's (or a runner's
        role, admitted to a runner's requests alone)."""

    def writing(self, req: Request, decl: Declaration, owner_ids: tuple[int, int] | None) -> ContextManager[None]:
        """Hold the storm's lock for one request: inside it, ``read`` sees
        every request before this one and none after, and what ``append``
        and the effects write is whole when the block ends, or not begun.
        Raises ``Busy`` after ``wait`` seconds; ``Aborted`` when the store
        gave the request up (nothing of it happened); ``RecordFailed`` when
        the store went away, saying whether it committed; ``WriteFailed``
        when the lock could not be taken for an I/O error (nothing happened)."""

    def read(self, decl: Declaration) -> LogRead:
        """The log's state now: its head (``seq``, ``digest``) and the lane
        state it folds to. Under ``writing`` it is the state the request
        appends after; outside it, one consistent reading for a reader.
        Raises ``UnknownOrder`` (``logread.Damage``) when it cannot be replayed."""

    def snapshot(self, log: LogRead, at: str | None = None) -> Snapshot:
        """The storm as the pure core plans on it: the lanes in run order,
        the ledgers, ``log``'s state, the time ``at`` (else now)."""

    def append(self, log: LogRead, bodies: list[dict[str, Any]], at: str, by: str,
               owner_ids: tuple[int, int] | None) -> list[dict[str, Any]]:
        """Number, chain and record ``bodies`` as the log's next lines after
        ``log`` (under ``writing``), with the state they fold to; return the
        events as recorded. Raises ``AppendFailed``, whose ``state`` says
        what is true when the record could not be made whole."""

    def serve(self, req: Request, holder: str | None = None) -> Outcome | None:
        """The outcome of ``req`` (``holder``: a claim's holder when it
        names none) when the store decides and records it whole in one step
        of its own, timed by its own clock (a database's server function, on
        the server's clock: its lock is never held while this process runs,
        and a runner role writes by no other way); None when the request
        path is to take it (nothing was written)."""

    def effects(self, decl: Declaration) -> Effects:
        """What a request changes beside its log lines (the lanes, the
        ledgers, the markers), for the storm as ``decl`` declares it."""

    def decided(self, decl: Declaration, view: View, skipped: tuple[Skipped, ...]) -> list[str]:
        """After ``next`` decided on ``view``: as the operator, mark blocked
        the lanes it met before the one it chose (and a directory says
        what is news once in progress.log), under the storm's lock briefly
        taken. Returns notes for stderr; never raises for a busy storm."""

    def history(self, each: Callable[[bytes, dict[str, Any]], None], decl: Declaration | None = None) -> LogRead:
        """Every line of the log, oldest first, checked (framing, seq,
        chain), each given to ``each(line, event)`` and not held after.
        Damage raises ``UnknownOrder`` after ``each`` saw every line before it."""

    def verify(self, progress: Callable[[int], None] | None = None) -> Audit:
        """The full audit of the log from its first line (``core.verify``),
        and of what the store keeps beside it (a witness, a checkpoint, a
        state row) against it; reads only."""

    def changes(self, every: bool = False) -> ContextManager[Changes]:
        """A wait for the storm to change (``claim --wait``): once the block
        has begun, ``Changes.wait`` returns soon after any change is whole
        that may let a lane be claimed or end a lease (a request committed,
        a file of the storm changed), however it was made, and with
        ``every`` (a view: ``serve``) after any change at all; it writes
        nothing and takes no lock. A directory is woken by inotify (polling
        where there is none) at every change; a database by LISTEN, which
        tells no one of a claim or a renew, so with ``every`` it also reads
        the log's head every ``changes.POLL`` seconds."""


@runtime_checkable
class Upkeep(Protocol):
    """What is asked of a storm's keeping beside the request path: by the
    readers that follow its log, by the operator's upkeep (``ops``), and by
    whoever is done with it. Nothing outside ``store/`` asks a store for
    more than ``Store`` and this declare (``tests/unit/test_seam.py``).
    ``appended`` is how the store says a push enqueued its lane (a line
    appended to queue.txt; a lane row added), in the log's words."""

    appended: str

    def log_file(self, decl: Declaration) -> str | None:
        """The file that holds the log as ``decl`` declares it, which a
        reader may stat, follow from an offset, and set aside (a
        directory's); None where the log is not a file (a database's rows)."""

    def declared_in(self) -> str | None:
        """The file that is the storm's declaration, which the operator
        edits (a directory's storm.toml); None where the storm keeps the
        declaration ``declare`` records (a database's)."""

    def watched(self) -> list[str]:
        """The files whose change can change what the storm decides, which
        the live view watches and stats; [] where the storm is no files (it
        is read again every interval). ``StormError`` when the declaration
        cannot be read."""

    def tell_waits(self, tell: Callable[[str, str, float], None]) -> None:
        """From now on, ``tell(who, where, wait)`` once, when a request of
        this process has waited a moment for the storm's lock and may wait
        longer (a directory's lock file); a database's requests wait in its
        server, and it tells nothing."""

    def schema(self) -> tuple[int, int, bool]:
        """Under the request's lock: the storm's schema version, this
        storm-queue's, and whether the server's tables were written other
        than by its fold. ``NotHere`` where the storm has no schema (files)."""

    def carry(self, was: int) -> int | None:
        """In the request's transaction: apply each migration after ``was``
        (None); at the current version, fold the server's tables again from
        the log, returning the lines folded. ``NotHere`` as ``schema``."""

    def member(self, role: str, kind: str) -> bool | None:
        """Whether ``role`` is a ``kind`` (runner, reader) of the storm, under
        the request's lock; None when the server knows no such role.
        ``NotHere`` where the storm admits by its files' owner, not by role."""

    def change_member(self, verb: str, kind: str, role: str) -> list[str]:
        """``grant`` (or ``revoke``) ``role`` as ``kind`` in the request's
        transaction; the statements the operator's role may not run (a role
        that may must run them; the grant stands without them).
        ``NotHere`` where the storm admits by its files' owner."""

    def doctor(self, running_hours: float | None = None, now: float | None = None) -> Checkup:
        """The store's own doctor checks of the storm, read at ``now`` (else
        the wall clock's time): the findings, plain data
        (``core.checkup.Finding``: the files another account could forge,
        or the roles that could; the log, the declaration, the leases and
        lanes), judged by ``running_hours`` (else the declaration's, else
        24). Reads only, takes no lock; ``StormUnreadable`` or ``NoStorm``
        when the storm cannot be examined at all."""

    def close(self) -> None:
        """Let go of what the store holds open (a connection); the next
        request opens what it needs again."""

    def twin(self) -> Store:
        """Another store of the same storm, holding nothing open yet and
        sharing nothing with this one (its own connection, once it needs
        one): for requests made in another thread meanwhile (a lease's
        background renewals, ``service.runner``)."""


@runtime_checkable
class Changes(Protocol):
    """What ``Store.changes`` gives: a wait for the next change."""

    def wait(self, timeout: float) -> bool:
        """Block until the storm may have changed since the block began or
        the last ``wait`` returned, or ``timeout`` seconds passed; whether
        a change was seen (a spurious True costs the caller one look)."""


@runtime_checkable
class Effects(Protocol):
    """What a request changes beside its log lines: a directory's files
    beside its log, a database's rows in the request's transaction. The
    ones that go before the record (``queue``, ``settle``,
    ``mark_finished``, ``unmark_blocked``, ``declare``, ``start_over``) leave a state a
    retry of the request completes when the record does not follow; the
    rest only cache what the log records, and go after it. Each, and each
    undo one returns, raises ``WriteFailed`` when an I/O error stops it
    (``kept``: what it wrote could not be taken back off either)."""

    def queue(self, line: str) -> Callable[[], None] | None:
        """Enqueue the lanes of ``line``: one whole queue.txt line, or
        several (each ended by a newline), in their order, at once; return
        how to undo it (None: the store's transaction undoes it)."""

    def settle(self, slugs: str | tuple[str, ...], how: str) -> Callable[[], None] | None:
        """Write ``slugs`` (one slug, or several in their order, at once)
        into the ledger ``how`` (integrated, abandoned); return how to undo
        it (None: the store's transaction undoes it)."""

    def mark_running(self, slug: str, body: dict[str, Any]) -> None:
        """Say ``slug`` runs under the lease ``body`` describes (a marker
        a directory's runner sees; a database keeps leases in its state)."""

    def unmark_running(self, slug: str, token: int | None) -> None:
        """Take away ``slug``'s running marker written under ``token``."""

    def mark_finished(self, slug: str, body: dict[str, Any]) -> Callable[[], None] | None:
        """Write ``slug``'s result ``body``; return how to undo it (None: the
        store's transaction undoes it)."""

    def blocked_mark(self, slug: str) -> bool:
        """Whether ``slug``'s result is the blocked mark ``next`` wrote."""

    def unmark_blocked(self, slug: str) -> Callable[[], None] | None:
        """Take away ``next``'s blocked mark on ``slug``; return its undo."""

    def say(self, at: str, words: str, owner_ids: tuple[int, int] | None) -> str | None:
        """Say one line of plain ``words`` where the operator reads what
        happened (a directory's progress.log; a database has its log only);
        a note for stderr when it could not be said, else None."""

    def tell_claim(self, claim: Claim, skipped: tuple[Skipped, ...], at: str) -> list[str]:
        """After a claim is recorded: mark blocked the lanes it met before
        the one it chose (``decided`` for the request's own lock); notes."""

    def declare(self, text: str, sha256: str) -> bool:
        """Make ``text`` (of digest ``sha256``) the storm's declaration, under
        the request's lock; False when it already is (nothing written).
        ``NotHere`` where a file is the declaration."""

    def cut(self, keep_intact: bool) -> Cut:
        """What a reset of the unreadable log would keep (``keep_intact``:
        its longest prefix that verifies from line 1; else nothing) and
        lose (every line after it, each named), read now; writes nothing.
        ``NotHere`` where the store cannot reset."""

    def start_over(self, body: dict[str, Any], at: str, by: str, cut: Cut) -> dict[str, Any]:
        """Keep the unreadable log aside and begin a new one whose first
        line is ``body`` (``reset``) with its ``abandons`` set to the bytes
        kept aside; return that event. The new log begins with what ``cut``
        keeps (``reset --keep-intact``), and ``body`` after it says what was
        kept and lost. ``NotHere`` where the store cannot."""

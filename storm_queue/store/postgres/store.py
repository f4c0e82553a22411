"""A storm kept in PostgreSQL, for runners on many hosts: the same request
path and the same pure core as a directory storm, with rows where the
directory has files.

- the writers' lock is a transaction-scoped advisory lock, and one request
  is one transaction: it reads the state rows, plans, appends its log lines
  (the same JSON lines, ``seq`` and ``prev`` chain as ``priority.log``) and
  writes the rows they change, or nothing at all;
- readers take one repeatable-read snapshot and never replay the log: the
  state row holds the lane state the log folds to at its last line;
- the caller is ``session_user`` as the server authenticated it; the
  operator is the role that ran ``init``.

The driver (``driver``: psycopg2) is imported only here, and only for a
URL root.
"""

from __future__ import annotations

from contextlib import contextmanager

from ...core import config, fold, logread
from ...core.authority import LANE_ENV, Judged, Verdict, decide
from ...core.errors import Aborted, Busy, NoStorm, NotHere, StormUnreadable, Unreachable
from ...core.framing import digest, frame
from ...core.lane import Refusal, Snapshot
from ...core.statebody import dump_state, load_state
from ...wall import now
from .connect import (  # noqa: F401 -- the names others import from here
    CONNECT_TIMEOUT,
    GRANT_HINT,
    Created,
    _Known,
    _words,
    alive,
    connect,
    create,
    insert_state,
    shown,
)
from . import driver
from .log import fold_on, older_format
from .queries import q
from .rows import Rows, Writes
from .version import BOUNDARY, current, not_newer
from .version import read as read_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping

    from ...core.outcome import Request
    from ...core.queuetext import Skipped
    from ...core.resolver import View
    from .upkeep import Upkeep

#: a writer rewrites the state row's body once the log is this many lines past it
STATE_EVERY = 32
#: the schema version from which the storm's lock is a table only the operator may lock (``lock_storm``);
#: an upgrade from an earlier one takes that version's advisory lock (``lock_storm_advisory``)
TABLE_LOCK = BOUNDARY
#: what a runner role may ask; its every other request is refused (``not_operator``), recorded
RUNNER_VERBS = ("claim", "renew", "finish", "release", "recover")
#: a storm object folds the lines after the state it knows, rather than read the body, up to this many
FOLD_AT_MOST = 4 * STATE_EVERY


def _busy(wait: float) -> Busy:
    return Busy(f"another writer held the storm for longer than {wait:g} s; nothing was recorded, "
                "ask again (or pass a longer --wait)")


def _no_storm(root: str) -> NoStorm:
    return NoStorm(f"the database {root} holds no storm: create one with storm-queue init URL")


class Database:
    """One storm in a PostgreSQL database, named by its libpq URL (the
    ``store.interface.Store`` of a storm for runners on many hosts)."""

    def __init__(self, url: str, env: Mapping[str, str] | None = None, wait: float = 30.0):
        import os

        self.root = shown(url)
        self.env = dict(os.environ if env is None else env)
        self.wait = wait
        self.url = url
        self._conn = None
        self._writing_now = False
        self._rows = Rows()  # the lane, settled and result rows as last read
        self._pending: tuple[int, bytes] | None = None
        self._state_known: _Known | None = None  # the newest state this object has read or committed
        self._written: _Known | None = None  # what the open transaction will make known once it commits
        self._body_seq = 0  # the line the state row's body folds to, as last read
        self._runs_counted = 0  # the runs the server folded, as served.catch_up last counted them
        self._catch_up_after = 0  # served.answered: how far behind the body is before it asks to catch up again
        self._created: str | None = None  # when the storm was made (or migrated here), read once
        self._decl: tuple[str | None, config.Declaration] | None = None
        self._session_user: str | None = None
        self._version: int | None = None  # the schema's version, as read on this connection
        self._kind: tuple[str, str | None] | None = None  # (role, as what it was granted), as read on this connection
        self._runner = False  # the request under way is a runner role's: the server decides and writes it
        self._operator_read: str | None = None  # the operator, as declaration() last read it, for the next _roles

    @property
    def conn(self):
        """The storm's one connection, reused from request to request; a new
        one when there is none yet, or the last one was closed, or it died
        while idle (``alive``): nothing of a request was sent on it since,
        so nothing can be doubled."""
        if self._conn is None or not alive(self._conn):
            self.close()
            self._conn, self._session_user, self._version, self._kind = connect(self.url), None, None, None
        return self._conn

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """The driver's errors as the storm's own."""
        try:
            yield
        except (driver.errors.UndefinedTable, driver.errors.InvalidSchemaName):
            raise _no_storm(self.root) from None
        except driver.errors.InsufficientPrivilege as exc:
            raise StormUnreadable(f"role {self._who()} may not read the storm in {self.root} ({_words(exc, self.url)}); "
                                  f"{GRANT_HINT}") from None
        except driver.errors.LockNotAvailable:
            raise _busy(self.wait) from None
        except (driver.OperationalError, driver.errors.ReadOnlySqlTransaction) as exc:  # before any write
            from .faults import not_done

            raise not_done(self, "the read", exc) or Unreachable(
                f"the connection to {self.root} was lost ({_words(exc, self.url)}); nothing changed, a retry is "
                "safe") from None

    def _who(self) -> str:
        try:
            return self.conn.execute(q("session_user")).fetchone()[0]
        except Exception:  # noqa: BLE001 -- only ever used in a message
            return "this role"

    # -- reading ---------------------------------------------------------

    def declaration(self) -> config.Declaration:
        """What the last ``declare`` recorded (none: no source, default runner
        settings), read now; parsed again only when its text changed. A
        schema newer than this storm-queue's is refused here, before any
        command reads or writes (``NotHere``, exit 2)."""
        with self._errors():
            conn = self.conn
            try:
                row = conn.execute(q("read_declaration")).fetchone()
            except driver.OperationalError:  # the first statement of a request: a read, so it is asked again
                if not conn.closed:  # once, on a new connection, when its connection had died unseen by ``alive``
                    raise
                row = self.conn.execute(q("read_declaration")).fetchone()
        text = row[0] if row is not None else None
        self._operator_read = row[1] if row is not None else None  # the request's _roles asks no more
        not_newer(self)
        if self._decl is None or self._decl[0] != text:
            self._decl = (text, config.Declaration(False) if text is None else config.parse(text))
        return self._decl[1]

    def _load(self) -> logread.LogRead:
        """The state at the log's head and the rows a snapshot needs, read in
        the current transaction: the state this object already knows, or
        else the state row's body, with the few lines after it folded on."""
        conn = self.conn
        known = self._state_known
        lines = None
        if known is None:
            head = conn.execute(q("read_head")).fetchone()
            changed = None
        else:  # the head, the lines after the state this object knows, the rows changed since
            head = conn.execute(q("read_head")).fetchone()
            lines = conn.execute(q("lines_after"), (known.seq, FOLD_AT_MOST + 1)).fetchall()
            changed = self._rows.changed(conn).fetchall()
        seq, last, body_seq, body_digest, gone = head
        self._body_seq = body_seq
        state = None
        if known is not None and known.seq <= seq and (known.seq >= body_seq or seq - known.seq <= FOLD_AT_MOST):
            state = fold_on(self.conn, known, seq, last, [r for r in lines if r[0] <= seq])  # None: not the log it knew
        if state is None:
            (body,), = conn.execute(q("read_state_body")).fetchall()
            try:
                base = _Known(body_seq, body_digest, load_state(body))
            except ValueError as exc:
                if not older_format(body):
                    raise logread.Damage(self.root, f"the state row cannot be read ({exc})",
                                         hint=logread.RESTORE_HINT) from None
                # written by an earlier storm-queue: fold the whole log, and let the next writer rewrite the row
                base, self._body_seq = _Known(0, None, fold.EMPTY), -STATE_EVERY
            state = fold_on(self.conn, base, seq, last)
            if state is None:
                raise logread.Damage(self.root, f"the log's lines after line {body_seq} do not follow the state row "
                                    f"to line {seq}", hint=logread.RESTORE_HINT)
        self._state_known = _Known(seq, last, state)
        self._rows.read(conn, gone, changed)
        if self._created is None:
            created = conn.execute(q("read_created")).fetchone()
            self._created = created[0] if created else ""
        return logread.LogRead(self.root, state, seq, last, log_exists=True)

    def read(self, decl: config.Declaration) -> logread.LogRead:
        """The state row and the lines after it, in the request's
        transaction, or else in one repeatable-read snapshot of its own."""
        if self._writing_now:
            return self._load()
        with self._errors(), self.conn.transaction():
            self.conn.execute(q("read_only_snapshot"))
            return self._load()

    def snapshot(self, log: logread.LogRead, at: str | None = None) -> Snapshot:
        """The lane, settled and result rows as last read (``rows.Rows``;
        a lane row a hand edit made unreadable as a queue.txt line is
        skipped, as that line would be)."""
        rows = self._rows
        results = rows.results
        tokens = {}
        for slug, run in log.state.runs.items():
            if run.lease is not None and slug in results:
                token = results[slug]
                tokens[slug] = token if type(token) is int and token > 0 else None
        unattended = self._decl is not None and self._decl[1].runner.unattended
        # every lane and integration since the storm was made (or migrated here) is recorded
        return Snapshot(dict(rows.lanes), rows.ledgers(unattended), log.state, at or now(), tokens, rows.skipped_lines(),
                        (self._created or "", self._created or ""))

    def serve(self, req: Request, holder: str | None = None) -> Any:
        """A runner request the server decides in one round trip, timed by
        its clock (``served``; ``holder``: a claim's holder when it names
        none), or None."""
        from .served import answered

        return answered(self, req, holder, _busy, FOLD_AT_MOST)

    def effects(self, decl: config.Declaration) -> Writes:
        return Writes(self)

    def decided(self, decl: config.Declaration, view: View, skipped: tuple[Skipped, ...]) -> list[str]:
        """As the operator: the blocked rows, in a transaction of their own."""
        if not view.to_block:
            return []
        who, op = self._roles()
        if who != op and self._granted(who) != "runner":
            return [f"next: role {who} is not the storm's operator ({op}), so blocked lanes are not marked"]
        try:
            current(self, "blocked lanes were not marked")
        except NotHere as exc:
            return [f"next: {exc}"]
        if who != op:  # a runner's: the server computes the marks, as the claim's walk does, and writes them
            with self._errors():
                self.conn.execute(q("serve_decided"), (max(1, int(self.wait * 1000)),))
            return []
        from .rows import mark_blocked

        with self._errors(), self._locked():
            mark_blocked(self.conn, view.to_block, now())
        return []

    def history(self, each: Callable[[bytes, dict[str, Any]], None], decl: config.Declaration | None = None) -> logread.LogRead:
        """Every line from one snapshot, checked as a directory log's reader checks it."""
        from . import log

        with self._errors():
            not_newer(self)
        return log.history(self, each)

    def verify(self, progress: Callable[[int], None] | None = None):
        """The lines from the first, and the state row against them (``log.verify``)."""
        from . import log

        with self._errors():
            not_newer(self)
        return log.verify(self, progress)

    def changes(self, every: bool = False):
        """The process's LISTEN connection to this URL, shared, for every
        commit that may let a lane be claimed or end a lease (and, with
        ``every``, the log's head read every ``changes.POLL`` seconds)."""
        from .changes import Changes

        return Changes(self.url, every)

    # -- requests ----------------------------------------------------------

    def _roles(self) -> tuple[str, str | None]:
        """The caller (session_user) and the operator (None: this role may not read the storm)."""
        with self._errors():
            conn = self.conn  # first: a new connection forgets the last one's session_user
            if self._session_user is None:
                self._session_user = conn.execute(q("session_user")).fetchone()[0]
            who = self._session_user
        operator, self._operator_read = self._operator_read, None
        if operator is not None:  # read with the declaration this request began with (an operator never changes)
            return who, operator
        with self._errors():
            try:
                if self.conn.status == driver.IDLE:
                    row = self.conn.execute(q("read_operator")).fetchone()  # autocommit: one statement
                else:
                    with self.conn.transaction():  # a savepoint: a refusal must not abort the transaction around it
                        row = self.conn.execute(q("read_operator")).fetchone()
            except driver.errors.InsufficientPrivilege:
                return who, None
        return who, row[0] if row else None

    def judge(self, req: Request, decl: config.Declaration, operator_only: bool) -> Judged:
        """The session's role against the role that ran ``init``; a role
        the operator granted as a runner may claim, renew, finish and
        release leases and recover expired ones (``RUNNER_VERBS``), as ``runner:ROLE``, and
        its other requests are refused ``not_operator``, not recorded (the
        server records only the requests it serves for a runner); a role
        granted as a reader is ``reader:ROLE``, refused every request (not
        recorded: it may not write). A request whose text the server cannot
        carry is refused ``not_carried``, not recorded."""
        from .connect import not_carried

        who, op = self._roles()
        lane = self.env.get(LANE_ENV)
        verdict = decide(lane, who == op, who, op or "unknown to this role",
                         "whose role created the storm", decl, req.source, operator_only, verb=req.verb)
        carried = not_carried(req, lane)
        if carried is not None:  # text the server cannot take: no line can carry it
            return Judged(Verdict(verdict.by, carried), None, "a database storm cannot carry it", who)
        kind = self._granted(who) if who != op and verdict.refusal is not None and \
            verdict.refusal.code == "not_operator" else None
        self._runner = kind == "runner"
        if kind == "reader":
            return Judged(Verdict(f"reader:{who}", Refusal(
                "not_operator", f"role {who} is a reader of this storm: it may read it, and nothing more; "
                f"{verdict.refusal.message}")), None, f"role {who} cannot write the storm of {op}", who)
        if self._runner:
            if req.verb in RUNNER_VERBS and req.source is None and not operator_only:
                return Judged(Verdict(f"runner:{who}", None), None, "", who)  # (an older schema: writing refuses it)
            return Judged(Verdict(f"runner:{who}", Refusal(
                "not_operator", f"role {who} is a runner of this storm: it may claim, renew, finish and release "
                f"leases and recover expired ones, and nothing more; only the operator ({op}) or a source the operator declares "
                "may change the priority lane")), None,
                f"role {who} is a runner: the server records only the requests it serves for a runner", who)
        unrecordable = "" if who == op else f"role {who} cannot write the storm of {op or 'another role'}"
        return Judged(verdict, None, unrecordable, who)

    @property
    def upkeep(self) -> Upkeep:
        """The store's own upkeep (``interface.Upkeep``, ``upkeep.Upkeep``)."""
        from .upkeep import Upkeep

        return Upkeep(self)

    def _granted(self, who: str) -> str | None:
        """As what the operator granted the session's role ``who`` (runner,
        reader, None), read once a connection; None before version 2."""
        if self._kind is None or self._kind[0] != who:
            kinds: set[str] = set()
            try:
                if read_version(self) >= 2:
                    from .members import granted

                    with self._errors():
                        kinds = granted(self.conn)
            except StormUnreadable:  # a role that may not read the storm: granted nothing
                pass
            self._kind = (who, "runner" if "runner" in kinds else "reader" if kinds else None)
        return self._kind[1]

    @contextmanager
    def writing(self, req: Request, decl: config.Declaration, owner_ids: tuple[int, int] | None) -> Iterator[None]:
        """``_locked``, with the server's words for what went wrong as the
        storm's: a lock not had in ``wait`` seconds is ``Busy``; a deadlock
        or serialization failure the server resolved by aborting is
        ``Aborted``; a lost connection is answered with whether the request
        committed (``faults.lost``)."""
        self._pending = None
        upgrading = req.verb == "upgrade"
        if not upgrading:
            current(self, f"the {req.verb} was not recorded")
        try:
            with self._locked():
                yield
        except driver.errors.LockNotAvailable:
            raise _busy(self.wait) from None
        except (driver.errors.UndefinedTable, driver.errors.InvalidSchemaName):
            raise _no_storm(self.root) from None
        except driver.errors.DataCorrupted as exc:  # the insert check found the log's head is not its last line
            raise logread.Damage(self.root, f"{_words(exc, self.url)}; storm-queue verify names the line") from None
        except (driver.errors.SerializationFailure, driver.errors.DeadlockDetected) as exc:
            raise Aborted(f"the database aborted the request ({_words(exc, self.url)}): nothing changed, "
                          "a retry is safe") from None
        except (driver.OperationalError, driver.errors.ReadOnlySqlTransaction) as exc:
            from .faults import lost, not_done

            raise (not_done(self, f"the {req.verb}", exc) or lost(self, req.verb, exc)) from None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One transaction holding the storm's lock, waiting at most
        ``wait`` seconds for it; once it commits, the state its lines fold
        to is this object's to start the next request from. The lock is held
        from its statement to the COMMIT, while this process plans (an
        operator's request); the runner requests the server decides
        (``served``) hold it only inside the server."""
        self._written = None
        conn = self.conn
        try:
            with conn.transaction():
                conn.execute(q("set_lock_timeout").format(max(1, int(self.wait * 1000))))
                conn.execute(q("lock_storm") if read_version(self) >= TABLE_LOCK else q("lock_storm_advisory"))
                self._writing_now = True
                try:
                    yield
                finally:
                    self._writing_now = False
        except BaseException:
            self._state_known = self._written = None
            raise
        if self._written is not None:
            self._state_known, self._written = self._written, None

    def append(self, log: logread.LogRead, bodies: list[dict[str, Any]], at: str, by: str,
               owner_ids: tuple[int, int] | None) -> list[dict[str, Any]]:
        """``INSERT`` the lines (the insert check moves the state row's
        head) and every ``STATE_EVERY`` lines the body, in the request's
        transaction. Never a runner role's: the server writes its lines."""
        if self._runner:
            from ...core.errors import StormError

            raise StormError("a runner role's request is decided and written by the server alone; this one was not "
                             "served, so nothing was recorded")
        framed = frame(bodies, log.seq, log.digest, at, by)
        events = [event for event, _ in framed]
        last_event, last_line = framed[-1]
        head, last = last_event["seq"], digest(last_line)
        state = fold.replay(events, log.state)
        with self.conn.cursor() as cur:
            cur.execute(q("insert_events"), ([event["seq"] for event, _ in framed], [line for _, line in framed]))
            if read_version(self) < BOUNDARY:  # (a schema before the insert check, which moves the head)
                cur.execute(q("move_head"), (head, last))
            if head - self._body_seq >= STATE_EVERY:
                cur.execute(q("move_body"), (dump_state(state), head, last, head))
        self._pending = (head, last_line)
        self._written = _Known(head, last, state)
        return events

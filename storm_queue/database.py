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

The driver (psycopg 3) is imported only here, and only for a URL root.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from . import config, fold
from .authority import LANE_ENV, decide
from .desk import Listing, Outcome, Storm, now
from .errors import Busy, InitRefused, NoStorm, NotHere, RecordFailed, StormError, StormUnreadable
from .lane import Snapshot
from .ledger import Ledgers
from .log import reader
from .log.checkpoint import dump_state, load_state
from .log.framing import Malformed, decode, digest, sha256
from .log.writer import frame
from .queuefile import Lane, split_deps
from .records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping

#: the advisory lock of the storm (one storm per database): two int4 keys
LOCK_KEYS = (0x73746F72, 0x6D71)
GRANT_HINT = ("the operator can grant reading with: GRANT USAGE ON SCHEMA storm_queue TO ROLE; "
              "GRANT SELECT ON ALL TABLES IN SCHEMA storm_queue TO ROLE")


def shown(url: str) -> str:
    """``url`` with any password replaced by ``***``: what may be printed."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "the database URL"
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _password(url: str) -> str | None:
    from urllib.parse import unquote, urlsplit

    try:
        pw = urlsplit(url).password
    except ValueError:
        return None
    return unquote(pw) if pw else None


def _words(exc: BaseException, url: str) -> str:
    """The server's or driver's message in one line, never carrying the password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    pw = _password(url)
    return text.replace(pw, "***") if pw else text


def _driver():
    try:
        import psycopg
    except ImportError:
        raise NoStorm("this root is a database URL, and storm-queue's PostgreSQL support is not installed: "
                      "install storm-queue[postgresql]") from None
    return psycopg


#: seconds to wait for the server when the URL sets no ``connect_timeout``
CONNECT_TIMEOUT = 10


def _connect_timeout(url: str) -> dict[str, int]:
    """``connect_timeout`` for the driver: none when the URL sets its own
    (libpq's parameter, which then wins), else ``CONNECT_TIMEOUT``."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url).get("connect_timeout")
    except Exception:  # noqa: BLE001 -- a malformed URL is refused by connect() itself, with its words
        given = None
    return {} if given not in (None, "") else {"connect_timeout": CONNECT_TIMEOUT}


def connect(url: str):
    """A connection (autocommit; transactions are explicit); ``NoStorm``
    (exit 2) saying why when the server cannot be reached or refuses.
    A ``connect_timeout`` in the URL bounds the wait for the server
    (default ``CONNECT_TIMEOUT`` seconds)."""
    psycopg = _driver()
    try:
        return psycopg.connect(url, autocommit=True, application_name="storm-queue", **_connect_timeout(url))
    except psycopg.Error as exc:
        raise NoStorm(f"cannot connect to the database storm {shown(url)}: {_words(exc, url)}") from None
    except Exception as exc:  # noqa: BLE001 -- a malformed URL is the driver's ProgrammingError or ValueError
        raise NoStorm(f"cannot connect to the database storm {shown(url)}: {_words(exc, url)}") from None


#: a writer rewrites the state row's body once the log is this many lines past it
STATE_EVERY = 32
#: a storm object folds the lines after the state it knows, rather than read the body, up to this many
FOLD_AT_MOST = 4 * STATE_EVERY


def insert_state(conn, seq: int, last: str | None, state: fold.LaneState) -> None:
    """The state row of a new storm whose log ends at line ``seq`` (digest
    ``last``) and folds to ``state``."""
    conn.execute("INSERT INTO storm_queue.state (id, seq, digest, body, body_seq, body_digest) "
                 "VALUES (1, %s, %s, %s, %s, %s)", (seq, last, dump_state(state), seq, last))


@dataclass(frozen=True)
class _Known:
    """The lane ``state`` the log folds to at line ``seq`` (digest ``last``)."""

    seq: int
    last: str | None
    state: fold.LaneState


def _older_format(body: str) -> bool:
    """Whether a state row's body is a state of an earlier format (which an
    upgrade leaves behind), rather than a damaged one."""
    import json

    from .log.checkpoint import FORMAT

    try:
        v = json.loads(body).get("v")
    except (ValueError, AttributeError):
        return False
    return type(v) is int and 1 <= v < FORMAT


def schema_sql() -> str:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.sql"), encoding="utf-8") as f:
        return f.read()


@dataclass(frozen=True)
class Created:
    """What ``init URL`` made."""

    root: str
    operator: str
    files: tuple[str, ...] = ("schema storm_queue",)


def create(url: str) -> Created:
    """Create the storm in the database ``url`` names and record its first
    line; the connecting role becomes its operator. ``InitRefused`` (exit
    2, nothing changed) when the database already holds a storm."""
    psycopg = _driver()
    conn = connect(url)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", LOCK_KEYS)
            role, db = conn.execute("SELECT session_user, current_database()").fetchone()
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'storm_queue'").fetchone()
            if found:
                raise InitRefused(f"the database {db} ({shown(url)}) already holds a storm (schema storm_queue); "
                                  "nothing was changed")
            conn.execute(schema_sql())
            at = now()
            (event, line), = frame([{"action": "init", "storm": db, "operator": role}], 0, None, at, f"operator:{role}")
            conn.execute("INSERT INTO storm_queue.storm (id, operator, created) VALUES (1, %s, %s)", (role, at))
            conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (1, %s)", (line,))
            state = fold.replay([event])
            insert_state(conn, 1, digest(line), state)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise InitRefused(f"role cannot create a storm in {shown(url)}: {_words(exc, url)}; "
                          "the role needs CREATE on the database") from None
    except psycopg.errors.DuplicateSchema:
        raise InitRefused(f"the database {shown(url)} already holds a storm (schema storm_queue); nothing was changed") from None
    except psycopg.Error as exc:
        raise StormError(f"init of {shown(url)} failed, nothing was created: {_words(exc, url)}") from None
    finally:
        conn.close()
    return Created(shown(url), role)


class DatabaseStorm(Storm):
    """One storm in a PostgreSQL database, named by its libpq URL."""

    def __init__(self, url: str, env: Mapping[str, str] | None = None, wait: float = 30.0):
        super().__init__(shown(url), env, wait)
        self.url = url
        self._conn = None
        self._writing_now = False
        self._rows: dict[str, Any] = {}
        self._pending: tuple[int, bytes] | None = None
        self._state_known: _Known | None = None  # the newest state this object has read or committed
        self._written: _Known | None = None  # what the open transaction will make known once it commits
        self._body_seq = 0  # the line the state row's body folds to, as last read
        self._decl: tuple[str | None, config.Declaration] | None = None
        self._session_user: str | None = None
        self._lanes: tuple[list[tuple], dict[str, Lane]] | None = None  # the lane rows last read, and their lanes

    @property
    def conn(self):
        """The storm's one connection, reused from request to request; a new
        one when there is none yet or the last one was closed or broken."""
        if self._conn is None or self._conn.closed:
            self._conn, self._session_user = connect(self.url), None
        return self._conn

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """The driver's errors as the storm's own."""
        psycopg = _driver()
        try:
            yield
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
            raise NoStorm(f"the database {self.root} holds no storm: create one with storm-queue init URL") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StormUnreadable(f"role {self._who()} may not read the storm in {self.root} ({_words(exc, self.url)}); "
                                  f"{GRANT_HINT}") from None
        except psycopg.errors.LockNotAvailable:
            raise Busy(f"another writer held the storm for longer than {self.wait:g} s; nothing was recorded, "
                       "ask again (or pass a longer --wait)") from None
        except psycopg.OperationalError as exc:  # before any write: nothing of this command was recorded
            raise RecordFailed(f"the connection to {self.root} failed ({_words(exc, self.url)}); nothing was recorded",
                               recorded=False) from None

    def _who(self) -> str:
        try:
            return self.conn.execute("SELECT session_user").fetchone()[0]
        except Exception:  # noqa: BLE001 -- only ever used in a message
            return "this role"

    # -- reading ---------------------------------------------------------

    def directory(self, command: str) -> str:
        raise NotHere(f"{command} examines a directory storm's files and does not yet examine a database storm; "
                      "use storm-queue verify (the log and the state row) and storm-queue list")

    def declaration(self) -> config.Declaration:
        """What the last ``declare`` recorded (none: no source, default runner
        settings), read now; parsed again only when its text changed."""
        with self._errors():
            row = self.conn.execute("SELECT declaration FROM storm_queue.storm").fetchone()
        text = row[0] if row is not None else None
        if self._decl is None or self._decl[0] != text:
            self._decl = (text, config.Declaration(False) if text is None else config.parse(text))
        return self._decl[1]

    def log_path(self, decl: config.Declaration) -> str:
        return self.root

    def _load(self) -> reader.LogRead:
        """The state at the log's head and the rows a snapshot needs, read in
        the current transaction: the state this object already knows, or
        else the state row's body, with the few lines after it folded on."""
        conn = self.conn
        seq, last, body_seq, body_digest = conn.execute(
            "SELECT seq, digest, body_seq, body_digest FROM storm_queue.state").fetchone()
        self._body_seq = body_seq
        known = self._state_known
        state = None
        if known is not None and known.seq <= seq and (known.seq >= body_seq or seq - known.seq <= FOLD_AT_MOST):
            state = self._fold_on(known, seq, last)  # None: the log is not the one it knew
        if state is None:
            (body,), = conn.execute("SELECT body FROM storm_queue.state").fetchall()
            try:
                base = _Known(body_seq, body_digest, load_state(body))
            except ValueError as exc:
                if not _older_format(body):
                    raise reader.Damage(self.root, f"the state row cannot be read ({exc}); "
                                        "storm-queue verify checks the log") from None
                # written by an earlier storm-queue: fold the whole log, and let the next writer rewrite the row
                base, self._body_seq = _Known(0, None, fold.EMPTY), -STATE_EVERY
            state = self._fold_on(base, seq, last)
            if state is None:
                raise reader.Damage(self.root, f"the log's lines after line {body_seq} do not follow the state row "
                                    f"to line {seq}; storm-queue verify checks the log")
        self._state_known = _Known(seq, last, state)
        lanes = conn.execute("SELECT slug, issue, deps, pos FROM storm_queue.lane ORDER BY pos").fetchall()
        settled = conn.execute("SELECT slug, ledger FROM storm_queue.settled").fetchall()
        created = conn.execute("SELECT created FROM storm_queue.storm").fetchone()
        # a snapshot needs only which lanes have a result, and the token a finish wrote there when it is a
        # whole number (jsonb keeps numbers as numerics: 1e0 is 1), as text, so no JSON is parsed here
        results = conn.execute("SELECT slug, CASE WHEN jsonb_typeof(body -> 'token') = 'number' THEN body ->> 'token' END "
                               "FROM storm_queue.result").fetchall()
        self._rows = {"lanes": lanes, "settled": settled, "created": created[0] if created else "",
                      "results": {slug: int(token) if token and token.isascii() and token.isdigit() else None for slug, token in results}}
        return reader.LogRead(self.root, state, seq, last, log_exists=True)

    def _fold_on(self, known: _Known, seq: int, last: str | None) -> fold.LaneState | None:
        """``known``'s state with the lines after it up to line ``seq``
        folded on; None unless those lines are its chain's next, one by one,
        and the last of them has the digest ``last``."""
        if known.seq == seq:
            return known.state if known.last == last else None
        rows = self.conn.execute("SELECT seq, line FROM storm_queue.event WHERE seq > %s AND seq <= %s ORDER BY seq",
                                 (known.seq, seq)).fetchall()
        prev, events = known.last, []
        for n, (line_seq, line) in enumerate(rows, known.seq + 1):
            line = bytes(line)
            try:
                event = decode(line)
            except Malformed:
                return None
            if line_seq != n or event["seq"] != n or event["prev"] != prev:
                return None
            events.append(event)
            prev = digest(line)
        if len(events) != seq - known.seq or prev != last:
            return None
        return fold.replay(events, known.state)

    def _read(self, decl: config.Declaration) -> reader.LogRead:
        if self._writing_now:
            return self._load()
        with self._errors(), self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return self._load()

    def _snapshot(self, log: reader.LogRead, at: str | None = None) -> Snapshot:
        rows = self._rows
        if self._lanes is None or self._lanes[0] != rows["lanes"]:  # the same rows make the same lanes
            self._lanes = (rows["lanes"], {slug: Lane(slug, issue, tuple(deps), pos) for slug, issue, deps, pos in rows["lanes"]})
        lanes = dict(self._lanes[1])
        settled = rows["settled"]
        results = rows["results"]
        led = Ledgers(frozenset(s for s, how in settled if how == "integrated"),
                      frozenset(s for s, how in settled if how == "abandoned"),
                      frozenset(results), {}, False)
        tokens = {}
        for slug, run in log.state.runs.items():
            if run.lease is not None and slug in results:
                token = results[slug]
                tokens[slug] = token if type(token) is int and token > 0 else None
        # every lane and integration since the storm was made (or migrated here) is recorded
        return Snapshot(lanes, led, log.state, at or now(), tokens, (), (rows["created"], rows["created"]))

    def listing(self, decl: config.Declaration | None = None, waits: bool = True) -> Listing:
        with self._errors():
            return super().listing(decl, waits)

    def why(self, slug: str):
        with self._errors():
            return super().why(slug)

    def _lines(self) -> Iterator[bytes]:
        """Every log line, by seq, streamed from one snapshot."""
        with self._errors(), self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            with self.conn.cursor(name="storm_queue_lines") as cur:
                cur.itersize = 2000
                cur.execute("SELECT seq, line FROM storm_queue.event ORDER BY seq")
                for seq, line in cur:
                    yield seq, bytes(line)

    def history(self, each: Callable[[bytes, dict[str, Any]], None], decl: config.Declaration | None = None) -> reader.LogRead:
        """Every line, oldest first, checked as a directory log's reader checks it."""
        out = reader.LogRead(self.root, log_exists=True)
        folder = fold.Fold()
        for line, event in self._checked():
            folder.step(event)
            out.seq, out.digest, out.length = event["seq"], digest(line), out.length + len(line)
            each(line, event)
        out.state = folder.state()
        return out

    def _checked(self) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """The lines and their events; ``reader.Damage`` at the first that breaks framing, seq or chain."""
        prev, offset, expected = None, 0, 1
        for seq, line in self._lines():
            try:
                event = decode(line)
            except Malformed as exc:
                raise reader.Damage(self.root, f"line {expected} is malformed: {exc}", expected, offset) from None
            if seq != expected or event["seq"] != expected:
                raise reader.Damage(self.root, f"line {expected} has seq {event['seq']}, expected {expected}", expected, offset)
            if event["prev"] != prev:
                raise reader.Damage(self.root, f"line {expected} breaks the chain: its prev does not match line "
                                    f"{expected - 1}", expected, offset)
            yield line, event
            prev, offset, expected = digest(line), offset + len(line), expected + 1

    def verify(self, progress: Callable[[int], None] | None = None):
        """Check every line from the first (``audit.check_lines``, the rules
        a directory log is checked by), and that the state row's body with
        the lines after it folds to what the full replay does."""
        from .log.audit import Problem, check_lines

        out = check_lines((line for _, line in self._lines()), self.root, progress)
        if out.problem is not None:
            return out
        with self._errors(), self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            seq, last, body, body_seq, body_digest = self.conn.execute(
                "SELECT seq, digest, body, body_seq, body_digest FROM storm_queue.state").fetchone()
            if seq != out.lines:  # a writer appended since the lines were read: its state row is newer
                out.warnings.append(f"the log grew to line {seq} during the audit; the state row was not compared")
                return out
            try:
                folded = self._fold_on(_Known(body_seq, body_digest, load_state(body)), seq, last)
            except ValueError:
                folded = None
        out.checkpoint_line = body_seq
        agrees = last == out.digest and folded == out.state
        out.checkpoint = "agrees" if agrees else "disagrees"
        if not agrees:
            out.problem = Problem(f"the state row (its body at line {body_seq}, with the lines after it) is not what "
                                  "the whole log folds to; commands trust it, so the order they give is not the log's",
                                  body_seq, out.length)
        return out

    def next(self) -> tuple[Listing, list[str]]:
        """Decide; then, as the operator, mark blocked the lanes met before
        the chosen one (rows, where a directory writes result.json)."""
        listing = self.listing()
        if not listing.view.to_block:
            return listing, []
        who, op = self._roles()
        if who != op:
            return listing, [f"next: role {who} is not the storm's operator ({op}), so blocked lanes are not marked"]
        with self._errors(), self._writing(self.root, None):
            self._tell(listing.view, (), now(), self.root)
        return listing, []

    # -- requests ----------------------------------------------------------

    def _roles(self) -> tuple[str, str | None]:
        """The caller (session_user) and the operator (None: this role may not read the storm)."""
        psycopg = _driver()
        with self._errors():
            conn = self.conn  # first: a new connection forgets the last one's session_user
            if self._session_user is None:
                self._session_user = conn.execute("SELECT session_user").fetchone()[0]
            who = self._session_user
        try:
            if self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                row = self.conn.execute("SELECT operator FROM storm_queue.storm").fetchone()  # autocommit: one statement
            else:
                with self.conn.transaction():  # a savepoint: a refusal must not abort the transaction around it
                    row = self.conn.execute("SELECT operator FROM storm_queue.storm").fetchone()
        except psycopg.errors.InsufficientPrivilege:
            return who, None
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
            raise NoStorm(f"the database {self.root} holds no storm: create one with storm-queue init URL") from None
        return who, row[0] if row else None

    def _judge(self, decl: config.Declaration, source: str | None, operator_only: bool):
        who, op = self._roles()
        verdict = decide(self.env.get(LANE_ENV), who == op, who, op or "unknown to this role",
                         "whose role created the storm", decl, source, operator_only)
        unrecordable = "" if who == op else f"role {who} cannot write the storm of {op or 'another role'}"
        return verdict, None, unrecordable, _Role(who)

    def _declaration_or_none(self) -> config.Declaration:
        try:
            return self.declaration()
        except StormUnreadable:
            return config.Declaration(False)

    #: ``adopt`` on a database storm: a recorded no-op
    NOTHING_TO_ADOPT = "nothing to adopt: a database storm keeps its log in rows, never in the earlier tool's format"

    def _request(self, req, shape, plan, dry_run: bool = False, decl: config.Declaration | None = None,
                 operator_only: bool = False, on_unknown=None) -> Outcome:
        """The one request path, in one transaction; a conflict the server
        resolves by aborting is a refusal (``reorder_conflict``), and a lost
        connection is answered with whether the request committed.
        ``on_unknown`` is not passed on: a database storm holds no earlier
        tool's log, so an unknown order stays exit 3, for ``adopt`` too."""
        psycopg = _driver()
        self._pending = None
        try:
            with self._errors_of_requests():
                return super()._request(req, shape, plan, dry_run, decl or self._declaration_or_none(), operator_only)
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as exc:
            return self._conflict(req, exc)
        except psycopg.OperationalError as exc:
            raise self._lost(req.verb, exc) from None

    @contextmanager
    def _errors_of_requests(self) -> Iterator[None]:
        psycopg = _driver()
        try:
            yield
        except psycopg.errors.LockNotAvailable:
            raise Busy(f"another writer held the storm for longer than {self.wait:g} s; nothing was recorded, "
                       "ask again (or pass a longer --wait)") from None
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
            raise NoStorm(f"the database {self.root} holds no storm: create one with storm-queue init URL") from None

    def _conflict(self, req, exc: Exception) -> Outcome:
        """Record (best effort) and answer a transaction the server aborted."""
        message = f"the database aborted the request ({_words(exc, self.url)}): nothing changed, a retry is safe"
        by, recorded = "unknown", False
        try:
            verdict, _, _, _ = self._judge(self._declaration_or_none(), req.source, False)
            by = verdict.by
            with self._writing(self.root, None):
                log = self._load()
                body = {"action": "refused", "requested": req.verb, "slug": req.slug, "code": "reorder_conflict",
                        "message": message, "authorised": verdict.admitted}
                self._append(log, [body], now(), by, None)
            recorded = True
        except Exception:  # noqa: BLE001 -- the answer stands whether or not its record could be made
            pass
        return Outcome("refused", req.verb, req.slug, by, "reorder_conflict",
                       message if recorded else f"{message} (not recorded)", recorded=recorded)

    def _lost(self, verb: str, exc: Exception) -> RecordFailed:
        """What is true after the connection broke during a request."""
        why = _words(exc, self.url)
        pending, self._pending, self._conn = self._pending, None, None
        if pending is None:
            return RecordFailed(f"the connection to {self.root} was lost before the {verb} was recorded ({why}), "
                                "so it did not happen; ask again", recorded=False)
        seq, line = pending
        try:
            conn = connect(self.url)
            try:
                row = conn.execute("SELECT line FROM storm_queue.event WHERE seq = %s", (seq,)).fetchone()
            finally:
                conn.close()
        except Exception:  # noqa: BLE001 -- the server is still away: say so
            return RecordFailed(f"the connection to {self.root} was lost while the {verb} committed ({why}), and the "
                                f"server cannot be asked whether line {seq} was written; check storm-queue log before "
                                "asking again", recorded=None)
        if row is not None and bytes(row[0]) == line:
            return RecordFailed(f"the connection to {self.root} was lost ({why}), but the {verb} was committed as "
                                f"line {seq}; do not ask again", recorded=True)
        return RecordFailed(f"the connection to {self.root} was lost before the {verb} committed ({why}), so it did "
                            "not happen; ask again", recorded=False)

    @contextmanager
    def _writing(self, log_path: str, owner_ids: tuple[int, int] | None) -> Iterator[None]:
        """One transaction holding the storm's advisory lock, waiting at most
        ``wait`` seconds for it; once it commits, the state its lines fold
        to is this object's to start the next request from."""
        self._written = None
        try:
            with self.conn.transaction():
                self.conn.execute(f"SET LOCAL lock_timeout = {max(1, int(self.wait * 1000))}")
                self.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", LOCK_KEYS)
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

    def _append(self, log: reader.LogRead, bodies: list[dict[str, Any]], at: str, by: str,
                owner_ids: tuple[int, int] | None) -> list[dict[str, Any]]:
        framed = frame(bodies, log.seq, log.digest, at, by)
        with self.conn.cursor() as cur:
            cur.executemany("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)",
                            [(event["seq"], line) for event, line in framed])
        events = [event for event, _ in framed]
        last_event, last_line = framed[-1]
        head, last = last_event["seq"], digest(last_line)
        state = fold.replay(events, log.state)
        if head - self._body_seq >= STATE_EVERY:
            self.conn.execute("UPDATE storm_queue.state SET seq = %s, digest = %s, body = %s, body_seq = %s, "
                              "body_digest = %s", (head, last, dump_state(state), head, last))
        else:
            self.conn.execute("UPDATE storm_queue.state SET seq = %s, digest = %s", (head, last))
        self._pending = (head, last_line)
        self._written = _Known(head, last, state)
        return events

    def _queue(self, log_path: str, line: str) -> None:
        fields = line.split()
        deps = split_deps(fields[2]) if len(fields) > 2 else ()
        self.conn.execute("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)",
                          (fields[0], fields[1], list(deps)))

    def _settle(self, slug: str, how: str) -> None:
        self.conn.execute("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, %s)", (slug, how, now()))

    def _mark_finished(self, slug: str, body: dict[str, Any]) -> None:
        from psycopg.types.json import Jsonb

        self.conn.execute("INSERT INTO storm_queue.result (slug, body) VALUES (%s, %s) "
                          "ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body", (slug, Jsonb(body)))

    def _blocked_mark(self, slug: str) -> bool:
        from .ledger import is_blocked_mark

        row = self.conn.execute("SELECT body FROM storm_queue.result WHERE slug = %s", (slug,)).fetchone()
        return row is not None and is_blocked_mark(row[0])

    def _unmark_blocked(self, slug: str) -> None:
        """Delete ``next``'s blocked mark in the request's transaction (it has no undo of its own)."""
        if self._blocked_mark(slug):
            self.conn.execute("DELETE FROM storm_queue.result WHERE slug = %s", (slug,))

    def _mark_running(self, slug: str, body: dict[str, Any]) -> None:
        """A database storm keeps leases in its state row alone: no marker."""

    def _unmark_running(self, slug: str, token: int | None) -> None:
        """No marker to take away (see ``_mark_running``)."""

    def _say(self, at: str, words: str, owner_ids: tuple[int, int] | None) -> None:
        """A database storm's record is its log; there is no progress.log."""

    def _tell(self, view, skipped, at: str, log_path: str) -> list[str]:
        """Mark blocked, in rows, the lanes ``view`` met before the one it chose."""
        from psycopg.types.json import Jsonb

        for row in view.to_block:
            body = {"status": "blocked", "blocked_on": list(row.waits_on), "at": at, "by": "storm-queue next"}
            self.conn.execute("INSERT INTO storm_queue.result (slug, body) VALUES (%s, %s) ON CONFLICT (slug) DO NOTHING",
                              (row.slug, Jsonb(body)))
        return []

    # -- the declaration ----------------------------------------------------

    def declare(self, path: str, reason: str | None = None, key: str | None = None) -> Outcome:
        """Record the file at ``path`` as the storm's declaration (operator only)."""
        import json
        import tomllib

        from .outcome import Request, Step
        from .shapes import optional_text

        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise NoStorm(f"cannot read {path} ({exc.strerror}); nothing was declared") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidDeclaration(f"{path} is not UTF-8 text; nothing was declared") from None
        decl = config.parse(text)
        if decl.error:
            raise InvalidDeclaration(f"{path}: {decl.error}; nothing was declared")
        content = json.loads(json.dumps(tomllib.loads(text), default=str))
        sha = sha256(raw).hexdigest()
        req = Request("declare", None, optional_text(reason), None, optional_text(key), (sha,))

        def plan(snap: Snapshot, by: str):
            current = self.conn.execute("SELECT declaration_sha256 FROM storm_queue.storm").fetchone()[0]
            body = {"action": "declare", "sha256": sha, "declaration": content}
            if current == sha:
                body["noop"] = "the storm already holds this declaration"
                return Step(Outcome("noop", "declare", None, by, message=f"nothing to do: {body['noop']}"), [body])

            def before() -> None:
                self.conn.execute("UPDATE storm_queue.storm SET declaration = %s, declaration_sha256 = %s", (text, sha))

            return Step(Outcome("done", "declare", None, by, message=f"the storm's declaration is now {path} (sha256 {sha[:16]})"),
                        [body], before=before)

        return self._request(req, None, plan, operator_only=True)


class InvalidDeclaration(NotHere):
    """A file ``declare`` cannot record: nothing changed (exit 2)."""


@dataclass(frozen=True)
class _Role:
    """The caller of a database storm, as the request path names it."""

    name: str


@dataclass(frozen=True)
class Migrated:
    """What ``migrate`` carried: the database, the lines, and what a database cannot hold."""

    root: str
    lines: int
    lanes: int
    left: tuple[str, ...]


def migrate(directory: str, url: str, env: Mapping[str, str], wait: float = 30.0) -> Migrated:
    """Carry the directory storm at ``directory`` into the empty database
    ``url`` (the directory's operator only): lanes, ledgers, results,
    leases, the declaration and every line of its log with its seq and
    chain; then record on the directory a last line naming where it went."""
    from . import authority, ledger, queuefile
    from .errors import Refused, UnknownOrder
    from .log import lock, writer

    psycopg = _driver()
    src = Storm(directory, env, wait)
    who, op = authority.caller(src.env), authority.owner(directory)
    decl = src.declaration()
    verdict = authority.judge(who, op, decl, None, operator_only=True)
    if not verdict.admitted:
        raise Refused(verdict.refusal.code, f"{verdict.refusal.message}; nothing was migrated", 1, False)
    if decl.log_error:
        raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; nothing was migrated")
    log_path = src.log_path(decl)
    conn = connect(url)
    try:
        with lock.held(log_path, wait, may_create=True):
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", LOCK_KEYS)
                role = conn.execute("SELECT session_user").fetchone()[0]
                if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'storm_queue'").fetchone():
                    raise InitRefused(f"the database {shown(url)} already holds a storm; migrate needs an empty one; "
                                      "nothing was migrated")
                conn.execute(schema_sql())
                batch: list[tuple[int, bytes]] = []

                def each(line: bytes, event: dict[str, Any]) -> None:
                    batch.append((event["seq"], line))
                    if len(batch) >= 1000:
                        flush()

                def flush() -> None:
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", batch)
                    batch.clear()

                log = reader.read(log_path, use_checkpoint=False, each=each)
                if log.state.moved_to:
                    raise NotHere(f"this storm already moved to {log.state.moved_to}; nothing was migrated")
                if log.fresh or not log.seq:
                    raise NotHere(f"{directory} has recorded nothing yet: start the database storm with storm-queue init URL")
                flush()
                at = now()
                body = {"action": "migrate", "to": shown(url)}
                if log.torn:
                    raise NotHere("the log ends in a torn write: make one request there first (it repairs it), then migrate")
                queue = queuefile.read(os.path.join(directory, "queue.txt"))
                led = ledger.read(directory)
                conn.execute("INSERT INTO storm_queue.storm (id, operator, created, declaration, declaration_sha256) "
                             "VALUES (1, %s, %s, %s, %s)", (role, at, *_declaration_text(directory, decl)))
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)",
                                    [(lane.slug, lane.issue, list(lane.deps)) for lane in queue.lanes])
                    cur.executemany("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, %s)",
                                    [(s, "integrated", at) for s in sorted(led.integrated)]
                                    + [(s, "abandoned", at) for s in sorted(led.abandoned - led.integrated)])
                    cur.executemany("INSERT INTO storm_queue.result (slug, body) VALUES (%s, %s)",
                                    [(s, _result_json(directory, s)) for s in sorted(led.finished)])
                insert_state(conn, log.seq, log.digest, log.state)
                left = tuple([f"queue.txt line {s.line} (skipped there)" for s in queue.skipped]
                             + [f"the running marker of {s} (no lease behind it)" for s in led.running
                                if log.state.run(s).lease is None]
                             + (["UNATTENDED"] if led.unattended else []))
            # the database holds the storm now: the directory's last line says where it went
            writer.append(reader.read(log_path), [body], at, verdict.by)
    except psycopg.Error as exc:
        raise StormError(f"migrate to {shown(url)} failed, nothing was migrated: {_words(exc, url)}") from None
    finally:
        conn.close()
    return Migrated(shown(url), log.seq, len(queue.lanes), left)


def _declaration_text(directory: str, decl: config.Declaration) -> tuple[str | None, str | None]:
    if not decl.present:
        return None, None
    with open(os.path.join(directory, "storm.toml"), "rb") as f:
        raw = f.read()
    return raw.decode("utf-8"), sha256(raw).hexdigest()


def _result_json(directory: str, slug: str):
    """A lane's result.json as a JSON value for the result row (its text when it is not JSON)."""
    import json

    from psycopg.types.json import Jsonb

    from .ledger import LANES, MARKS, RESULT

    try:
        with open(os.path.join(directory, LANES, slug, MARKS, RESULT), "rb") as f:
            raw = f.read(1 << 20)
        body = json.loads(raw)
    except (OSError, ValueError):
        body = None
    return Jsonb(body if isinstance(body, dict) else {"status": "finished", "migrated_text": repr(body)})

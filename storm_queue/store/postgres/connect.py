"""The PostgreSQL edge of a database storm: connecting (``driver``:
psycopg2, imported only for a URL root), the URL as it may be shown
(never a password), the schema, and ``init URL`` (``create``)."""

from __future__ import annotations

from ...core import fold
from ...core.errors import InitRefused, NoStorm, StormError, Unreachable
from ...core.framing import digest, frame
from ...core.records import dataclass
from ...core.statebody import dump_state
from ...roots import hide, shown  # noqa: F401 -- shown: what others import from here
from ...wall import now
from . import driver
from .queries import q, schema, schema_version
from .version import BOUNDARY

GRANT_HINT = "the operator can grant reading with: storm-queue grant reader ROLE"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...core.lane import Refusal
    from ...core.outcome import Request


def _words(exc: BaseException | str, url: str) -> str:
    """The server's or driver's message in one line, never carrying a
    password (``roots.hide``)."""
    return hide(" ".join(str(exc).split()) or type(exc).__name__, url)


#: seconds to wait for the server when the URL sets no ``connect_timeout``
CONNECT_TIMEOUT = 10


#: what a failed connection says when it can never work as given: a login
#: the server refuses, a role or database it does not know, a URL that is
#: not one, a host name that does not exist (libpq's and the server's
#: words, in English); anything else is a server away for now
NEVER = ("authentication", "password", "does not exist", "pg_hba.conf", "permission denied", "invalid", "missing",
         "Name or service not known", "does not support SSL", "certificate")


#: how a password is given so that a URL carries it readably, or not at all
PASSWORD_HINT = ("percent-encode each @ / ? # & % and space in the password (%40 %2F %3F %23 %26 %25 %20), or leave "
                 "the password out of the URL: libpq reads it from ~/.pgpass (or the file PGPASSFILE names), or from "
                 "a service file (service=NAME in the URL)")
#: what libpq says when the server asks for a password and none was given
NO_PASSWORD = ("; give it in ~/.pgpass (HOST:PORT:DBNAME:USER:PASSWORD, mode 0600), in the file PGPASSFILE names, "
               "in a service file (~/.pg_service.conf or PGSERVICEFILE, with service=NAME in the URL), or "
               "percent-encoded in the URL")


def readable(url: str) -> dict[str, str]:
    """libpq's reading of the database URL ``url`` (its parameters), when
    it reads the URL's passwords exactly where ``shown`` masks them (the
    same parameters, less the passwords, as ``without_password(url)``).
    ``NoStorm`` (exit 2, the password masked) for a root that is not a
    ``postgresql://`` URL, one libpq cannot read (its words quoted only
    where they show no password: ``passwords.kept_words``), and one whose
    password holds a character that should have been percent-encoded, so
    that libpq would read part of it as the host, the port or the
    database, and might quote it."""
    from ...core.passwords import SECRET_PARAMS, kept_words
    from ...roots import must_be_url, without_password

    must_be_url(url)
    try:
        given = driver.conninfo(url)
    except driver.Error as exc:
        said = kept_words(str(exc).strip(), url)
        raise NoStorm(f"the database URL {shown(url)} cannot be read: {said}; if it carries a "
                      f"password, {PASSWORD_HINT}") from None
    try:
        bare = driver.conninfo(without_password(url))
    except driver.Error:
        bare = None
    if bare != {k: v for k, v in given.items() if k not in SECRET_PARAMS}:
        raise NoStorm(f"the password in the database URL {shown(url)} holds a character libpq reads as part of the "
                      f"URL (a raw @, /, ? or &), so it would connect to the wrong place: {PASSWORD_HINT}; nothing "
                      "was done")
    return given


#: the session option every connection starts with: a backslash in a string literal is a backslash, as the
#: storm's functions are written and as the driver quotes from the first statement on (a role or database set
#: to standard_conforming_strings = off had every line the client sent refused by the insert check)
STANDARD_STRINGS = "-c standard_conforming_strings=on"


def connect(url: str):
    """A connection (autocommit; transactions are explicit). A server that
    refuses (a wrong password, a role or database it does not know) or a
    URL that can never work is ``NoStorm`` (exit 2); a server that cannot
    be reached now (down, restarting, full, a refused or timed-out
    connection) is ``Unreachable`` (exit 5: nothing changed, a retry is
    safe). A URL that is not one, or whose password libpq would read
    elsewhere than ``shown`` masks it, is refused first (``readable``). A ``connect_timeout`` in the URL bounds the wait for the
    server (default ``CONNECT_TIMEOUT`` seconds). (No driver on this
    machine is ``NoStorm``, saying what to install: ``driver``.) Its search_path is
    ``pg_catalog, pg_temp`` (``fix_search_path``): no statement it runs
    resolves a name in a schema another role may create objects in. Its
    string literals are standard from its start (``STANDARD_STRINGS``,
    after the URL's own ``options``), whatever the role's or database's
    setting."""
    params = readable(url)
    timeout = {} if params.get("connect_timeout") not in (None, "") else {"connect_timeout": CONNECT_TIMEOUT}
    options = " ".join(filter(None, (params.get("options"), STANDARD_STRINGS)))
    try:
        conn = driver.connect(url, application_name="storm-queue", options=options, **timeout)
        try:
            conn.execute(q("fix_search_path"))
        except BaseException:
            conn.close()
            raise
        return conn
    except driver.OperationalError as exc:
        why = _words(exc, url)
        if "no password supplied" in why:
            why += NO_PASSWORD
        if not any(words in why for words in NEVER):
            raise Unreachable(f"cannot connect to the database storm {shown(url)}: {why}; nothing changed, "
                              "a retry is safe") from None
        raise NoStorm(f"cannot connect to the database storm {shown(url)}: {why}") from None
    except driver.Error as exc:  # a malformed URL, or text the server cannot carry (a NUL)
        raise NoStorm(f"cannot connect to the database storm {shown(url)}: {_words(exc, url)}") from None


def alive(conn) -> bool:
    """Whether ``conn`` is open, asked of its socket without a round trip:
    an idle connection the server ended (a terminated backend, a restart)
    has the server's last words, or the socket's end, waiting to be read.
    A connection in a transaction is left to its own statements."""
    if conn.closed:
        return False
    return conn.status != driver.IDLE or conn.alive()


def insert_state(conn, seq: int, last: str | None, state: fold.LaneState) -> None:
    """The state row of a new storm whose log ends at line ``seq`` (digest
    ``last``) and folds to ``state``: written before its lines (from schema
    version 9 their insert check moves the head)."""
    conn.execute(q("insert_state"), (seq, last, dump_state(state), seq, last))


def write_head(conn, seq: int, last: str | None, state: fold.LaneState) -> None:
    """A new storm's log, once its lines are in, ends at line ``seq``
    (digest ``last``) and folds to ``state``: the state row says so (the
    head as the insert check moved it, from schema version 9)."""
    conn.execute(q("write_head"), (seq, last, dump_state(state), seq, last))


@dataclass(frozen=True)
class _Known:
    """The lane ``state`` the log folds to at line ``seq`` (digest ``last``)."""

    seq: int
    last: str | None
    state: fold.LaneState


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
    conn = connect(url)
    db = ""

    def held() -> InitRefused:
        return InitRefused(f"the database {db} ({shown(url)}) already holds a storm (schema storm_queue); nothing was "
                           "changed")

    try:
        with conn.transaction():  # (a second init waits on the schema's name until this one ends, then is refused)
            role, db = conn.execute(q("session_user_and_database")).fetchone()
            found = conn.execute(q("storm_exists")).fetchone()
            if found:
                raise held()
            conn.execute(schema())
            at = now()
            (event, line), = frame([{"action": "init", "storm": db, "operator": role}], 0, None, at, f"operator:{role}")
            conn.execute(q("insert_storm"), (role, at))
            from .policy import write_policy
            from .unicode import write_unprintable

            if schema_version() >= 5:  # (the runner policy: storm_queue.storm.runner, sql/schema.sql)
                write_policy(conn, None)
            if schema_version() >= BOUNDARY:
                write_unprintable(conn)
            insert_state(conn, 0, None, fold.EMPTY)  # the head the first line follows (the insert check moves it)
            conn.execute(q("insert_events"), ([1], [line]))
            write_head(conn, 1, digest(line), fold.replay([event]))
    except driver.errors.InsufficientPrivilege as exc:
        raise InitRefused(f"role cannot create a storm in {shown(url)}: {_words(exc, url)}; "
                          "the role needs CREATE on the database") from None
    except driver.Error as exc:
        if isinstance(exc, driver.errors.DuplicateSchema) or exc.diag.constraint_name == "pg_namespace_nspname_index":
            raise held() from None  # (one that waited on the schema's name for another's commit meets the catalog's key)
        raise StormError(f"init of {shown(url)} failed, nothing was created: {_words(exc, url)}") from None
    finally:
        conn.close()
    return Created(shown(url), role)


#: the longest name, key, source, holder or lane value the server takes (a reason or a note longer than its
#: own limit is refused and recorded without it: ``core/shapes``)
TEXT_MOST = 4096


def not_carried(req: Request, lane: str | None = None, holder: str | None = None) -> Refusal | None:
    """Why the server cannot take ``req`` as asked, or None: a text that
    holds a NUL or is not Unicode (PostgreSQL's text holds neither); and
    of a request the server serves, a name, key, source, holder or lane
    value over ``TEXT_MOST`` characters, a token that is not a whole number
    (a TTL that is not is the API's TypeError: ``shapes.optional_seconds``),
    a token or TTL of more than ``names.FIGURE_DIGITS`` digits (the driver
    cannot write it). Refused by the client, never recorded: no request
    carrying it can reach the log."""
    from ...core.lane import Refusal
    from ...core.names import FIGURE_DIGITS

    texts = [req.slug, req.reason, req.source, req.key, lane, holder,
             *(a for a in req.args if isinstance(a, str))]
    for text in texts:
        if text is not None and ("\x00" in text or not _encodes(text)):
            return Refusal("not_carried", "a text of this request holds a NUL character or is not valid Unicode, which "
                           "a database storm cannot carry: ask without it")
    if req.verb not in ("claim", "renew", "finish", "release", "recover"):  # (the operator's request path records them)
        return None
    args = tuple(req.args) + (None,) * 5  # (as a caller that judges a request asks it: whoami, with none)
    long = [t for t in (req.slug, req.source, req.key, lane, holder, args[0] if isinstance(args[0], str) else None)
            if t is not None and len(t) > TEXT_MOST]
    if req.verb == "finish" and isinstance(args[1], str) and len(args[1]) > TEXT_MOST:
        long.append(args[1])
    if long:
        return Refusal("not_carried", f"a name, key, source, holder or lane value of this request is longer than "
                       f"{TEXT_MOST:,} characters, which a database storm does not take")
    if req.verb in ("renew", "finish", "release") and req.args and type(args[0]) is not int:  # (a TTL: optional_seconds)
        return Refusal("not_carried", "the token of this request is not a whole number, which a database storm "
                       "does not take")
    if any(type(a) is int and abs(a) >= 10**FIGURE_DIGITS for a in req.args):
        return Refusal("not_carried", f"a number of this request (a token or a TTL) has more than {FIGURE_DIGITS:,} "
                       "digits, which a database storm does not take")
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

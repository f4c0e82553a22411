"""The driver of a database storm: PostgreSQL's own client library, libpq,
called through ``ctypes``, with the small part of a DB-API connection the
store uses (``connect``, ``Connection.execute``, ``transaction``,
``copy_out`` for a whole log, the server's errors as classes by SQLSTATE).

Why not psycopg, which wraps the same libpq: importing psycopg loads some
300 modules and costs a command 300-700 ms, more than the rest of a
``bump`` on a database storm (issue 21, item 6); ``ctypes`` and libpq
cost about 10 ms. libpq itself is the system's (Debian's ``libpq5``), or
else the one the ``postgresql`` extra's psycopg-binary wheel ships, found
on ``sys.path`` without importing psycopg.

What it promises, as psycopg does where the store relies on it:

- ``%s`` and ``%(name)s`` placeholders (``%%`` a percent sign) when
  parameters are given; a statement without parameters may be a script of
  several (the simple query protocol). Parameters: None, bool, int (sent
  as int2, int4, int8 or numeric by size), float, str (type left to the
  server; a NUL is refused, never cut), bytes (bytea, binary), ``Jsonb``,
  and lists of those (arrays).
- Values come back as Python values by column type: integers, bool,
  float, numeric as ``Decimal``, bytea as ``bytes``, json and jsonb
  parsed, one-dimensional or nested arrays as lists; anything else as the
  server's text.
- ``execute(query, params, prepare=True)`` prepares the statement on the
  connection the first time and sends only its parameters after (no
  parsing or planning on the server at each call); its placeholders take
  their types from the statement, so each is cast (``%s::bigint``).
- Autocommit: each statement commits alone, unless inside ``transaction()``
  (BEGIN … COMMIT; nested: a savepoint).
- Every wait for the server is a ``poll`` in Python, so Ctrl-C interrupts
  it: the statement is cancelled on the server and the connection closed.
- Errors: ``Error`` and the DB-API classes under it; a server error is the
  class of its SQLSTATE (``errors.LockNotAvailable``, …), a lost
  connection ``OperationalError``. The message is the server's or libpq's,
  after its severity, as psycopg words it.
"""

from __future__ import annotations

import ctypes
import os
import select
import sys

_c = ctypes.c_char_p
_p = ctypes.c_void_p
_i = ctypes.c_int


# -- errors --------------------------------------------------------------------


class Error(Exception):
    """Anything the server or libpq refused; ``sqlstate`` is the server's code, if it gave one."""

    sqlstate: str | None = None


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


#: the DB-API class of each SQLSTATE class (its first two characters), as psycopg maps them
_BY_CLASS = {"08": OperationalError, "0A": NotSupportedError, "20": ProgrammingError, "21": ProgrammingError,
             "22": DataError, "23": IntegrityError, "24": InternalError, "25": InternalError, "26": InternalError,
             "27": InternalError, "28": OperationalError, "2B": InternalError, "2D": InternalError,
             "2F": InternalError, "34": ProgrammingError, "38": InternalError, "39": InternalError,
             "3B": InternalError, "3D": ProgrammingError, "3F": ProgrammingError, "40": OperationalError,
             "42": ProgrammingError, "44": ProgrammingError, "53": OperationalError, "54": OperationalError,
             "55": OperationalError, "57": OperationalError, "58": OperationalError, "F0": InternalError,
             "HV": OperationalError, "P0": InternalError, "XX": InternalError}


class errors:
    """The server errors the store tells apart, by SQLSTATE."""

    class InsufficientPrivilege(ProgrammingError):
        sqlstate = "42501"

    class UndefinedTable(ProgrammingError):
        sqlstate = "42P01"

    class UndefinedColumn(ProgrammingError):
        sqlstate = "42703"

    class UndefinedFunction(ProgrammingError):
        sqlstate = "42883"

    class DuplicateSchema(ProgrammingError):
        sqlstate = "42P06"

    class InvalidSchemaName(ProgrammingError):
        sqlstate = "3F000"

    class LockNotAvailable(OperationalError):
        sqlstate = "55P03"

    class SerializationFailure(OperationalError):
        sqlstate = "40001"

    class DeadlockDetected(OperationalError):
        sqlstate = "40P01"

    class QueryCanceled(OperationalError):
        sqlstate = "57014"

    class AdminShutdown(OperationalError):
        sqlstate = "57P01"

    class DependentObjectsStillExist(InternalError):
        sqlstate = "2BP01"

    class RaiseException(InternalError):
        sqlstate = "P0001"


_BY_STATE = {cls.sqlstate: cls for cls in vars(errors).values() if isinstance(cls, type)}


def _server_error(state: str | None, message: str) -> Error:
    cls = _BY_STATE.get(state or "") or _BY_CLASS.get((state or "")[:2], DatabaseError if state else OperationalError)
    exc = cls(message)
    exc.sqlstate = state
    return exc


def _after_severity(raw: bytes | None) -> str:
    """libpq's message without the severity it may begin with (``ERROR:``, ``FATAL:``)."""
    text = (raw or b"").decode("utf-8", "replace").strip()
    word, colon, rest = text.partition(":")
    return rest.strip() if colon and word.isupper() and word.isalpha() else text


# -- the library ---------------------------------------------------------------


class _PGnotify(ctypes.Structure):
    _fields_ = [("relname", _c), ("be_pid", _i), ("extra", _c)]


class _ConninfoOption(ctypes.Structure):
    _fields_ = [("keyword", _c), ("envvar", _c), ("compiled", _c), ("val", _c), ("label", _c),
                ("dispchar", _c), ("dispsize", _i)]


_PROTOTYPES = {
    "PQconnectStartParams": (_p, [ctypes.POINTER(_c), ctypes.POINTER(_c), _i]), "PQconnectPoll": (_i, [_p]),
    "PQstatus": (_i, [_p]), "PQerrorMessage": (_c, [_p]), "PQfinish": (None, [_p]),
    "PQsocket": (_i, [_p]), "PQbackendPID": (_i, [_p]), "PQtransactionStatus": (_i, [_p]),
    "PQsendQuery": (_i, [_p, _c]),
    "PQsendQueryParams": (_i, [_p, _c, _i, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(_c),
                               ctypes.POINTER(_i), ctypes.POINTER(_i), _i]),
    "PQsendPrepare": (_i, [_p, _c, _c, _i, ctypes.POINTER(ctypes.c_uint)]),
    "PQsendQueryPrepared": (_i, [_p, _c, _i, ctypes.POINTER(_c), ctypes.POINTER(_i), ctypes.POINTER(_i), _i]),
    "PQconsumeInput": (_i, [_p]), "PQisBusy": (_i, [_p]), "PQgetResult": (_p, [_p]),
    "PQresultStatus": (_i, [_p]), "PQresultErrorMessage": (_c, [_p]), "PQresultErrorField": (_c, [_p, _i]),
    "PQntuples": (_i, [_p]), "PQnfields": (_i, [_p]), "PQftype": (ctypes.c_uint, [_p, _i]),
    "PQgetvalue": (_p, [_p, _i, _i]), "PQgetlength": (_i, [_p, _i, _i]), "PQgetisnull": (_i, [_p, _i, _i]),
    "PQcmdTuples": (_c, [_p]), "PQclear": (None, [_p]),
    "PQnotifies": (ctypes.POINTER(_PGnotify), [_p]), "PQfreemem": (None, [_p]),
    "PQgetCancel": (_p, [_p]), "PQcancel": (_i, [_p, _c, _i]), "PQfreeCancel": (None, [_p]),
    "PQconninfoParse": (ctypes.POINTER(_ConninfoOption), [_c, ctypes.POINTER(_c)]),
    "PQconninfoFree": (None, [_p]), "PQlibVersion": (_i, []),
    "PQgetCopyData": (_i, [_p, ctypes.POINTER(_p), _i]),
}

_lib = None
#: libpq's notices and warnings (a server's FATAL on an idle connection among them) go nowhere:
#: by default libpq prints them on stderr, and the storm's own errors say what happened
_NOTICES = ctypes.CFUNCTYPE(None, _p, _c)
_quiet = _NOTICES(lambda arg, message: None)


def _candidates() -> list[str]:
    """Where libpq may be: the system's, then a psycopg-binary wheel's on ``sys.path``."""
    found = ["libpq.5.dylib" if sys.platform == "darwin" else "libpq.so.5"]
    for place in sys.path:
        for libs in (os.path.join(place or ".", "psycopg_binary.libs"), os.path.join(place or ".", "psycopg_binary", ".dylibs")):
            try:
                names = sorted(os.listdir(libs))
            except OSError:
                continue
            found += [os.path.join(libs, n) for n in names if n.startswith("libpq")]
    return found


def library():
    """libpq, loaded on first use, its functions typed. ``ImportError``
    saying what to install when there is none."""
    global _lib
    if _lib is None:
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError:
                continue
        else:
            from ctypes.util import find_library

            path = find_library("pq")
            if path is None:
                raise ImportError("libpq, PostgreSQL's client library, is not installed")
            lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        lib.PQsetNoticeProcessor.restype, lib.PQsetNoticeProcessor.argtypes = _p, [_p, _NOTICES, _p]
        _lib = lib
    return _lib


def conninfo(text: str) -> dict[str, str]:
    """The parameters a connection string or URL sets (libpq's parser);
    ``ProgrammingError`` with libpq's words for one that is not."""
    lib = library()
    err = _c()
    opts = lib.PQconninfoParse(_text(text), ctypes.byref(err))
    if not opts:
        message = _after_severity(err.value) if err.value else "out of memory"
        if err.value:
            lib.PQfreemem(ctypes.cast(err, _p))
        raise ProgrammingError(f"invalid connection string: {message}" if "invalid" not in message else message)
    try:
        found, n = {}, 0
        while opts[n].keyword is not None:
            if opts[n].val is not None:
                found[opts[n].keyword.decode()] = opts[n].val.decode("utf-8", "replace")
            n += 1
        return found
    finally:
        lib.PQconninfoFree(ctypes.cast(opts, _p))


# -- values ----------------------------------------------------------------------


class Jsonb:
    """A value sent as ``jsonb``."""

    __slots__ = ("obj",)

    def __init__(self, obj: object):
        self.obj = obj


def _json(text: str):
    import json

    return json.loads(text)


def _json_text(obj: object) -> str:
    import json

    return json.dumps(obj)


def _decimal(text: str):
    from decimal import Decimal

    return Decimal(text)


def _bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    raise DataError("bytea in escape format: set bytea_output = hex")


#: a column's text as a Python value, by its type's oid (not here: the text itself)
_LOADS = {16: lambda s: s == "t", 17: _bytea, 20: int, 21: int, 23: int, 26: int, 700: float, 701: float,
          1700: _decimal, 114: _json, 3802: _json}
#: an array type's oid: its element type's
_ELEMENT = {1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1028: 26, 1021: 700, 1022: 701, 1231: 1700,
            199: 114, 3807: 3802, 1009: 25, 1015: 1043, 1002: 18, 1003: 19}


def _array(text: str, load) -> list:
    """A (nested) array in the server's text form, each element given to ``load``."""
    out: list = []
    stack = [out]
    i, n = 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "{":
            inner: list = []
            stack[-1].append(inner)
            stack.append(inner)
            i += 1
        elif ch == "}":
            stack.pop()
            i += 1
        elif ch == ",":
            i += 1
        elif ch == '"':
            j, parts = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    j += 1
                parts.append(text[j])
                j += 1
            stack[-1].append(load("".join(parts)))
            i = j + 1
        else:
            j = i
            while text[j] not in ",}":
                j += 1
            word = text[i:j]
            stack[-1].append(None if word == "NULL" else load(word))
            i = j
    return out


def _loader(oid: int):
    if oid in _LOADS:
        return _LOADS[oid]
    element = _ELEMENT.get(oid)
    if element is not None:
        inner = _LOADS.get(element, str)
        return lambda s: _array(s, inner)
    return None


def _dump(value: object) -> tuple[int, bytes | None, int]:
    """``(oid, bytes, format)`` a parameter is sent as (format 1: binary)."""
    if value is None:
        return 0, None, 0
    if value is True or value is False:
        return 16, b"t" if value else b"f", 0
    if isinstance(value, int):
        oid = 21 if -(1 << 15) <= value < 1 << 15 else 23 if -(1 << 31) <= value < 1 << 31 else \
            20 if -(1 << 63) <= value < 1 << 63 else 1700
        return oid, str(value).encode(), 0
    if isinstance(value, float):
        text = "NaN" if value != value else "Infinity" if value == float("inf") else \
            "-Infinity" if value == float("-inf") else repr(value)
        return 701, text.encode(), 0
    if isinstance(value, str):
        return 0, _text(value), 0
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 17, bytes(value), 1
    if isinstance(value, Jsonb):
        return 3802, _text(_json_text(value.obj)), 0
    if isinstance(value, (list, tuple)):
        oids = {_dump(v)[0] for v in value if v is not None}
        oid = {frozenset({17}): 1001, frozenset({0}): 1009}.get(frozenset(oids), 0)
        return oid, _text(_array_literal(value)), 0
    raise ProgrammingError(f"cannot send a {type(value).__name__} to the server")


def _text(value: str) -> bytes:
    if "\x00" in value:
        raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return value.encode("utf-8")


def _array_literal(values) -> str:
    def one(v: object) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, (list, tuple)):
            return _array_literal(v)
        if isinstance(v, (bytes, bytearray, memoryview)):
            return '"\\\\x' + bytes(v).hex() + '"'
        text = ("t" if v else "f") if isinstance(v, bool) else _json_text(v.obj) if isinstance(v, Jsonb) else str(v)
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "{" + ",".join(one(v) for v in values) + "}"


_converted: dict[tuple[str, bool], tuple[str, tuple]] = {}


def _placeholders(query: str, named: bool) -> tuple[str, tuple[str, ...] | None]:
    """``query`` with ``%s`` (``%(name)s`` when ``named``) as ``$1``, ``$2``, …
    and ``%%`` as ``%``; and what fills each in order (names, or indexes)."""
    key = (query, named)
    if key in _converted:
        return _converted[key]
    out, names, by_name = [], [], {}
    parts = query.split("%")
    out.append(parts[0])
    i = 1
    while i < len(parts):
        part = parts[i]
        if part == "" and i + 1 < len(parts):  # %%
            out.append("%" + parts[i + 1])
            i += 2
            continue
        if not named and part.startswith("s"):
            names.append(str(len(names)))
            out.append(f"${len(names)}{part[1:]}")
        elif named and part.startswith("(") and ")s" in part:
            name, rest = part[1:].split(")s", 1)
            if name not in by_name:
                names.append(name)
                by_name[name] = len(names)
            out.append(f"${by_name[name]}{rest}")
        else:
            raise ProgrammingError(f"only '%s', '%(name)s' and '%%' are placeholders: {query[:60]!r}")
        i += 1
    found = ("".join(out), tuple(names) if named else tuple(range(len(names))))
    _converted[key] = found
    return found


# -- the connection --------------------------------------------------------------

IDLE, ACTIVE, INTRANS, INERROR, UNKNOWN = range(5)  # PQtransactionStatus
_OK = 0  # PQstatus: CONNECTION_OK
_EMPTY, _COMMAND_OK, _TUPLES_OK, _COPY_OUT, _FATAL = 0, 1, 2, 3, 7


class Cursor:
    """The rows of one statement, fetched whole."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._rows: list[tuple] = []
        self._at = 0
        self.rowcount = -1

    def execute(self, query: str, params=None, prepare: bool = False) -> Cursor:
        self._rows, self.rowcount = self._conn._run(query, params, prepare=prepare)
        self._at = 0
        return self

    def executemany(self, query: str, seq) -> None:
        for params in seq:
            self.execute(query, params)

    def fetchone(self) -> tuple | None:
        if self._at < len(self._rows):
            self._at += 1
            return self._rows[self._at - 1]
        return None

    def fetchall(self) -> list[tuple]:
        rows, self._at = self._rows[self._at:], len(self._rows)
        return rows

    def __iter__(self):
        return iter(self.fetchall())

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *_: object) -> None:
        pass


class _Info:
    """What psycopg's ``conn.info`` tells that the tests ask: the backend's pid."""

    def __init__(self, conn: Connection):
        self._conn = conn

    @property
    def backend_pid(self) -> int:
        return library().PQbackendPID(self._conn._pg)


class Connection:
    """One connection to the server (see the module's promises)."""

    def __init__(self, pg: int):
        self._pg = pg
        self._depth = 0
        self._waiting = None  # a poll object of the socket, made on the first wait
        self._prepared: dict[str, bytes] = {}  # each statement prepared on this connection: its name
        self.info = _Info(self)

    @property
    def closed(self) -> bool:
        return self._pg is None

    @property
    def status(self) -> int:
        """The transaction status (``IDLE``, ``INTRANS``, …; ``UNKNOWN`` once closed)."""
        return UNKNOWN if self._pg is None else library().PQtransactionStatus(self._pg)

    def fileno(self) -> int:
        return library().PQsocket(self._pg)

    def close(self) -> None:
        if self._pg is not None:
            pg, self._pg = self._pg, None
            library().PQfinish(pg)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- at interpreter exit the library may be gone already
            pass

    def execute(self, query: str, params=None, prepare: bool = False) -> Cursor:
        return Cursor(self).execute(query, params, prepare)

    def cursor(self) -> Cursor:
        return Cursor(self)

    def transaction(self):
        """A block in one transaction (BEGIN … COMMIT; in one already, a
        savepoint), rolled back when the block raises."""
        from contextlib import contextmanager

        @contextmanager
        def block():
            if self._depth == 0 and self.status == IDLE:
                begin, end, undo = "BEGIN", "COMMIT", "ROLLBACK"
            else:
                point = f"storm_queue_{self._depth}"
                begin, end, undo = f"SAVEPOINT {point}", f"RELEASE SAVEPOINT {point}", \
                    f"ROLLBACK TO SAVEPOINT {point}; RELEASE SAVEPOINT {point}"
            self._run(begin, None)
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                if not self.closed and self.status in (INTRANS, INERROR):
                    try:
                        self._run(undo, None)
                    except Error:
                        pass
                raise
            self._depth -= 1
            self._run(end, None)

        return block()

    def _consume(self) -> None:
        """Read what the server sent (notifications stay queued for ``notifies``);
        ``OperationalError`` when the connection is gone."""
        if self._pg is None or not library().PQconsumeInput(self._pg):
            raise self._lost()

    def notifies(self) -> list[tuple[str, str]]:
        """The notifications the server sent so far, ``(channel, payload)``,
        each returned once; ``OperationalError`` when the connection is gone."""
        lib = library()
        self._consume()
        heard = []
        while note := lib.PQnotifies(self._pg):
            heard.append((note.contents.relname.decode("utf-8", "replace"),
                          (note.contents.extra or b"").decode("utf-8", "replace")))
            lib.PQfreemem(ctypes.cast(note, _p))
        return heard

    def alive(self) -> bool:
        """Whether the connection is open, asked of its socket without a
        round trip (what the server sent meanwhile is read; a notification
        among it stays for ``notifies``)."""
        if self._pg is None:
            return False
        waiting = select.poll()
        waiting.register(self.fileno(), select.POLLIN)
        try:
            for _ in range(8):  # the server's last words, then the socket's end: each read once
                if not waiting.poll(0):
                    break
                self._consume()
        except (OSError, OperationalError):
            return False
        return library().PQstatus(self._pg) == _OK

    def copy_out(self, query: str):
        """The rows of ``query`` (no parameters), streamed by ``COPY … TO
        STDOUT (FORMAT binary)``: each a tuple of its fields in the server's
        binary form (``bytes``; None for NULL). A result costs a few library
        calls a value, this a few a row: what reading a whole log wants.
        Left part way, the connection is closed (a COPY cannot be left half read)."""
        lib = library()
        self._run(f"COPY ({query}) TO STDOUT (FORMAT binary)", None, copy=True)
        import struct

        short, long = struct.Struct("!h").unpack_from, struct.Struct("!i").unpack_from
        buf, at_start, done = _p(), True, False
        get, free, string_at, into = lib.PQgetCopyData, lib.PQfreemem, ctypes.string_at, ctypes.byref(buf)
        try:
            while True:
                n = get(self._pg, into, 1)
                if n == 0:
                    self._readable(lib)
                    if not lib.PQconsumeInput(self._pg):
                        raise self._lost()
                    continue
                if n == -1:
                    break
                if n < 0:
                    raise self._lost()
                data = string_at(buf, n)
                free(buf)
                at = 0
                if at_start:  # the signature (11 bytes), the flags, the extension's length, the extension
                    at, at_start = 19 + long(data, 15)[0], False
                count, = short(data, at)
                if count < 0:  # the trailer
                    continue
                at += 2
                fields = []
                for _ in range(count):
                    size, = long(data, at)
                    at += 4
                    if size < 0:
                        fields.append(None)
                    else:
                        fields.append(data[at:at + size])
                        at += size
                yield tuple(fields)
            self._result(lib)
            done = True
        finally:
            if not done:
                self.close()

    # -- one statement ------------------------------------------------------

    def _lost(self) -> OperationalError:
        message = _after_severity(library().PQerrorMessage(self._pg)) if self._pg else "the connection is closed"
        self.close()
        return OperationalError(message or "the connection to the server was lost")

    def _run(self, query: str, params, copy: bool = False, prepare: bool = False) -> tuple[list[tuple], int]:
        """Send ``query`` (with ``params``; ``prepare``: as a statement
        prepared on this connection, prepared first if it is not yet), wait
        for its result, and return its rows and row count; the server's
        error as its class. With ``copy``, return once the server begins a
        COPY's data."""
        lib = library()
        if self._pg is None:
            raise OperationalError("the connection is closed")
        if params is None:
            sent = lib.PQsendQuery(self._pg, _text(query))
        else:
            named = isinstance(params, dict)
            sql, names = _placeholders(query, named)
            try:
                values = [params[n] for n in names] if named else list(params)
            except KeyError as exc:
                raise ProgrammingError(f"no parameter named {exc} was given") from None
            if len(values) != len(names):
                raise ProgrammingError(f"the query has {len(names)} placeholders and {len(values)} parameters were given")
            n = len(values)
            oids, datas, lengths, formats = (ctypes.c_uint * n)(), (_c * n)(), (_i * n)(), (_i * n)()
            for k, value in enumerate(values):
                oid, data, binary = _dump(value)
                oids[k], datas[k], formats[k], lengths[k] = oid, data, binary, len(data) if binary else 0
            if prepare:
                name = self._prepared.get(sql)
                if name is None:  # prepared once it is known good: a statement refused is not remembered
                    name = f"storm_queue_{len(self._prepared) + 1}".encode()
                    if not lib.PQsendPrepare(self._pg, name, _text(sql), n, None):
                        raise self._lost()
                    self._result(lib)
                    self._prepared[sql] = name
                sent = lib.PQsendQueryPrepared(self._pg, name, n, datas, lengths, formats, 0)
            else:
                sent = lib.PQsendQueryParams(self._pg, _text(sql), n, oids, datas, lengths, formats, 0)
        if not sent:
            raise self._lost()
        return self._result(lib, copy)

    def _result(self, lib, copy: bool = False) -> tuple[list[tuple], int]:
        last, failure = None, None
        try:
            while True:
                self._wait(lib)
                res = lib.PQgetResult(self._pg)
                if not res:
                    break
                status = lib.PQresultStatus(res)
                if copy and status == _COPY_OUT and failure is None:
                    lib.PQclear(res)
                    return [], -1
                if status == _FATAL or status not in (_EMPTY, _COMMAND_OK, _TUPLES_OK):
                    if failure is None:
                        state = lib.PQresultErrorField(res, ord("C"))
                        failure = (state.decode() if state else None,
                                   _after_severity(lib.PQresultErrorMessage(res)))
                    lib.PQclear(res)
                    continue
                if last is not None:
                    lib.PQclear(last)
                last = res
            if failure is not None:
                state, message = failure
                if lib.PQstatus(self._pg) != _OK:
                    message = message or str(self._lost())
                    self.close()
                raise _server_error(state, message or "the server gave no reason")
            return _rows(lib, last) if last else ([], -1)
        finally:
            if last:
                lib.PQclear(last)

    def _wait(self, lib) -> None:
        """Until a result can be had without blocking."""
        while lib.PQisBusy(self._pg):
            self._readable(lib)
            if not lib.PQconsumeInput(self._pg):
                raise self._lost()

    def _readable(self, lib) -> None:
        """Until the server sends something; Ctrl-C (any exception) cancels
        the statement on the server and closes the connection."""
        if self._waiting is None:
            self._waiting = select.poll()
            self._waiting.register(lib.PQsocket(self._pg), select.POLLIN)
        try:
            self._waiting.poll()
        except BaseException:
            cancel = lib.PQgetCancel(self._pg)
            if cancel:
                lib.PQcancel(cancel, ctypes.create_string_buffer(256), 256)
                lib.PQfreeCancel(cancel)
            self.close()
            raise


def _rows(lib, res) -> tuple[list[tuple], int]:
    """The rows of a result, each value as its column's type loads it, and the row count."""
    count = lib.PQcmdTuples(res)
    rowcount = int(count) if count else -1
    ntuples, nfields = lib.PQntuples(res), lib.PQnfields(res)
    if not nfields:
        return [], rowcount
    loads = [_loader(lib.PQftype(res, k)) for k in range(nfields)]
    getvalue, getlength, isnull, string_at = lib.PQgetvalue, lib.PQgetlength, lib.PQgetisnull, ctypes.string_at
    rows = []
    for r in range(ntuples):
        row = []
        for k, load in enumerate(loads):
            size = getlength(res, r, k)
            if not size and isnull(res, r, k):
                row.append(None)
                continue
            text = string_at(getvalue(res, r, k), size).decode("utf-8")
            row.append(text if load is None else load(text))
        rows.append(tuple(row))
    return rows, rowcount if rowcount >= 0 else ntuples


def quote_ident(name: str) -> str:
    """``name`` as an SQL identifier, quoted."""
    return '"' + _text(name).decode("utf-8").replace('"', '""') + '"'


def connect(dsn: str, **params: object) -> Connection:
    """A connection to the server ``dsn`` (a URL or ``key=value`` string)
    names, ``params`` (``application_name``, ``connect_timeout``, …) over
    it, its client encoding UTF-8. ``OperationalError`` with libpq's words
    when it cannot be had (or ``connect_timeout`` seconds, the URL's or
    ``params``', passed without an answer from a host); ``ProgrammingError``
    for a ``dsn`` that is not one. The connection is made step by step
    (``PQconnectStartParams``, ``PQconnectPoll``): its notices are quieted
    before the server says anything, and Ctrl-C interrupts the wait."""
    lib = library()
    given = conninfo(dsn)  # a malformed one: its own error, before any connection is tried
    keys = ["dbname", *params, "client_encoding"]
    values = [dsn, *(str(v) for v in params.values()), "UTF8"]
    timeout = str(params.get("connect_timeout", given.get("connect_timeout", "")))
    timeout = max(2, int(timeout)) if timeout.isdigit() and int(timeout) > 0 else None  # libpq's reading of it
    n = len(keys)
    pg = lib.PQconnectStartParams((_c * (n + 1))(*(_text(k) for k in keys), None),
                                  (_c * (n + 1))(*(_text(v) for v in values), None), 1)
    if not pg:
        raise OperationalError("out of memory")
    lib.PQsetNoticeProcessor(pg, _quiet, None)
    try:
        _connected(lib, pg, timeout)
    except BaseException:
        lib.PQfinish(pg)
        raise
    return Connection(pg)


_FAILED, _READING, _WRITING, _POLL_OK = 0, 1, 2, 3  # PostgresPollingStatusType


def _connected(lib, pg, timeout: float | None) -> None:
    """Drive ``PQconnectPoll`` until the connection is made; ``OperationalError``
    when it fails, or when a host gives no answer for ``timeout`` seconds."""
    import time

    state, fd, deadline = _WRITING, None, None
    while lib.PQstatus(pg) != 1:  # CONNECTION_BAD
        if state == _POLL_OK:
            return
        if state == _FAILED:
            break
        if lib.PQsocket(pg) != fd:  # a new host, or a new attempt at one: its own time
            fd = lib.PQsocket(pg)
            deadline = None if timeout is None else time.monotonic() + timeout
        waiting = select.poll()
        waiting.register(fd, select.POLLIN if state == _READING else select.POLLOUT)
        left = None if deadline is None else max(0, deadline - time.monotonic())
        if not waiting.poll(None if left is None else int(left * 1000) + 1):
            raise OperationalError(f"connection to the server timed out after {timeout} seconds")
        state = lib.PQconnectPoll(pg)
    raise OperationalError(_after_severity(lib.PQerrorMessage(pg)) or "cannot connect")

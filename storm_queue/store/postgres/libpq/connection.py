"""A connection: made step by step (``connect``), statements sent and their
rows read (``Connection``, ``Cursor``), transactions, COPY, notifications."""

from __future__ import annotations

import ctypes
import select

from .binding import _c, _i, _p, _quiet, conninfo, library
from .exceptions import Error, OperationalError, ProgrammingError, _after_severity, _server_error
from .values import _dump, _loader, _placeholders, _text



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
        self._converted: dict[tuple[str, bool], tuple[str, tuple]] = {}  # each query's placeholders as $n, on this connection
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
            key = (query, named)
            if key not in self._converted:
                self._converted[key] = _placeholders(query, named)
            sql, names = self._converted[key]
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

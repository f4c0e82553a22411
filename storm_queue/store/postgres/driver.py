"""The driver of a database storm: psycopg2 (the ``postgresql`` extra
installs psycopg2-binary), imported only for a database root, and the
little a store asks of a connection beyond it.

What a connection (``connect``) promises:

- ``execute(query, params)`` returns psycopg2's cursor: ``%s`` and
  ``%(name)s`` placeholders (``%%`` a percent sign) when parameters are
  given; without them a statement may be a script of several. Autocommit:
  each statement commits alone, unless inside ``transaction()`` (BEGIN …
  COMMIT; nested: a savepoint). A text holding a NUL is ``DataError``.
- Values as psycopg2 decodes them (integers, bool, float, numeric as
  ``Decimal``, json and jsonb parsed, arrays as lists, timestamps as
  ``datetime``), but bytea as ``bytes``; ``Jsonb(obj)`` sends a jsonb.
- Every wait for the server (connecting included) is a ``poll`` in Python
  (psycopg2's wait callback, set when this module is imported): Ctrl-C
  interrupts it, the statement is cancelled on the server and psycopg2
  closes the connection. ``connect_timeout`` bounds each host's attempt
  at a connection (psycopg2 connects asynchronously under a wait
  callback, so libpq's own timer does not run).
- ``rows(query)``: every row of a long result (a whole log), read by one
  ``COPY (query) TO STDOUT (FORMAT binary)`` and streamed (at most
  ``COPY_HELD`` chunks held), each field as its binary form. psycopg2
  refuses ``copy_expert`` while a wait callback is set, and the callback
  is the process's: a COPY lifts it for its own length, one COPY at a
  time, in a thread of its own, while the caller waits in Python, so
  Ctrl-C still ends the read at once (the COPY cancelled on the server,
  the connection kept). A statement another thread starts meanwhile waits
  for the server in libpq, not interruptibly.
- ``notifies()`` for LISTEN, ``alive()`` without a round trip.
- The server's notices (a ``RAISE NOTICE``, a server's ``FATAL`` on an
  idle connection) are never printed: the last ``NOTICES_KEPT`` are kept
  on the connection (``notices``), and a connection lost after the server
  said why is ``OperationalError`` carrying its words (``terminating
  connection due to administrator command``), which libpq's own (``server
  closed the connection unexpectedly``) do not.
- Errors: psycopg2's, a server error the class of its SQLSTATE
  (``errors.LockNotAvailable``, …), a lost or closed connection
  ``OperationalError``. No psycopg2 installed: importing this module is
  ``NoStorm`` (exit 2), saying what to install.
"""

from __future__ import annotations

import _signal
import _thread
import select
import struct as _struct
import time
from collections import deque
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

# psycopg2 is imported with SIGINT and SIGTERM held back: its module init
# imports ssl and clears whatever error that import raised, so an interrupt
# raised in it (the command line's Interrupted) would be lost and a `claim
# --wait` would go on waiting; held back, the signal arrives as the import ends.
_held = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM})
try:
    try:
        import psycopg2
    except ImportError:
        from ...core.errors import NoStorm

        raise NoStorm("this root is a database URL, and its driver, psycopg2, is not installed: install "
                      "storm-queue[postgresql] (it brings psycopg2-binary)") from None
    import psycopg2.errors as errors
    from psycopg2 import (DatabaseError, DataError, Error, IntegrityError, InterfaceError, InternalError,  # noqa: F401
                          NotSupportedError, OperationalError, ProgrammingError)
    from psycopg2 import extensions as _ext
    from psycopg2._json import Json as _Json
finally:
    _signal.pthread_sigmask(_signal.SIG_SETMASK, _held)

IDLE, ACTIVE, INTRANS, INERROR, UNKNOWN = (_ext.TRANSACTION_STATUS_IDLE, _ext.TRANSACTION_STATUS_ACTIVE,
                                          _ext.TRANSACTION_STATUS_INTRANS, _ext.TRANSACTION_STATUS_INERROR,
                                          _ext.TRANSACTION_STATUS_UNKNOWN)
#: how the server's notice on an idle connection begins when it ends the session (a FATAL always
#: does; an immediate shutdown's words come as a WARNING)
ENDING = ("FATAL:", "WARNING:  terminating connection")
#: how many of the server's notices a connection keeps (the newest)
NOTICES_KEPT = 20
#: the bytes of a COPY's output handed from the thread that reads it at a time, and how many such chunks may wait
COPY_CHUNK, COPY_HELD = 1 << 18, 16
#: the longest a row read waits in that thread for its chunk to fill
COPY_LINGER = 0.05
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
#: held by the COPY that has lifted the process's wait callback
_copying = _thread.allocate_lock()

_BYTEA = _ext.new_type((17,), "STORM_QUEUE_BYTEA",
                       lambda value, cur: None if value is None else bytes(psycopg2.BINARY(value, cur)))
_BYTEA_ARRAY = _ext.new_array_type((1001,), "STORM_QUEUE_BYTEA_ARRAY", _BYTEA)


class Jsonb(_Json):
    """A value sent as ``jsonb``."""

    def getquoted(self) -> bytes:
        return super().getquoted() + b"::jsonb"


def conninfo(text: str) -> dict[str, str]:
    """The parameters a connection string or URL sets (libpq's parser);
    ``ProgrammingError`` with libpq's words for one that is not, or for
    one with a percent-encoded byte that is not UTF-8 text (libpq would
    take the bytes; the driver cannot give them back as text)."""
    try:
        return _ext.parse_dsn(text)
    except UnicodeDecodeError:
        raise ProgrammingError("a percent-encoded value in it is not UTF-8 text once decoded") from None


def quote_ident(name: str) -> str:
    """``name`` as an SQL identifier, quoted."""
    if "\x00" in name:
        raise DataError("an SQL identifier cannot contain NUL (0x00) characters")
    return '"' + name.replace('"', '""') + '"'


def _wait(conn) -> None:
    """psycopg2's wait callback: until ``conn`` is done with the server,
    each wait a ``poll`` of its socket. Ctrl-C (any exception) cancels the
    statement on the server, and psycopg2 closes the connection. While a
    connection is made, each host's attempt has ``connect_timeout``
    seconds (a new socket: a new host, or a new attempt at one)."""

    timeout, fd, deadline = _connect_timeout(conn), None, None
    while True:
        state = conn.poll()
        if state == _ext.POLL_OK:
            return
        if conn.fileno() != fd:
            fd = conn.fileno()
            deadline = None if timeout is None else time.monotonic() + timeout
        waiting = select.poll()
        waiting.register(fd, select.POLLIN if state == _ext.POLL_READ else select.POLLOUT)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            ready = waiting.poll(None if left is None else int(left * 1000) + 1)
        except BaseException:
            try:
                conn.cancel()
            except Error:  # not connected yet: nothing runs on the server
                pass
            raise
        if not ready and left is not None:
            raise OperationalError(f"connection to the server timed out after {timeout} seconds")


def _connect_timeout(conn) -> int | None:
    """While ``conn`` is being made, its ``connect_timeout`` as libpq reads
    it (at least 2 seconds; none when 0 or not given), else None."""
    if conn.status != _ext.STATUS_SETUP:
        return None
    value = _ext.parse_dsn(conn.dsn).get("connect_timeout", "")
    return max(2, int(value)) if value.isdigit() and int(value) > 0 else None


_ext.set_wait_callback(_wait)


def _why_lost(raw, exc: OperationalError) -> OperationalError:
    """``exc``, or, for a connection the server ended after saying why in
    a notice, an ``OperationalError`` carrying its words too."""
    said = [n for n in raw.notices if n.startswith("FATAL:")] if raw.closed else []
    if not said or exc.pgcode:
        return exc
    return OperationalError(f"{' '.join(str(exc).split())} ({said[-1].partition(':')[2].strip()})")


class _Cursor(_ext.cursor):
    """psycopg2's cursor, its refusal of a NUL as ``DataError`` and a lost
    connection's error carrying the server's reason (``_why_lost``)."""

    def execute(self, query, vars=None):
        try:
            return super().execute(query, vars)
        except ValueError as exc:
            raise DataError(str(exc)) from None
        except OperationalError as exc:
            raise _why_lost(self.connection, exc) from None

    def executemany(self, query, vars_list) -> None:
        for params in vars_list:
            self.execute(query, params)


class _Sink:
    """Where ``copy_expert`` writes a COPY's output: handed on by ``give``
    in chunks of ``COPY_CHUNK`` bytes, or of what came in ``COPY_LINGER``
    seconds when rows come slowly."""

    def __init__(self, give) -> None:
        self.give, self.held, self.since = give, bytearray(), time.monotonic()

    def write(self, data) -> int:
        self.held += data
        if len(self.held) >= COPY_CHUNK or time.monotonic() - self.since >= COPY_LINGER:
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self.held:
            self.give(bytes(self.held))
            self.held = bytearray()
        self.since = time.monotonic()


def _binary_rows(out: queue.Queue) -> Iterator[tuple[bytes | None, ...]]:
    """The rows of a binary COPY's output, its chunks taken from ``out``
    until None (an exception taken is raised); ``DataError`` for output
    that is not one."""
    head, field = _struct.Struct(">h").unpack_from, _struct.Struct(">i").unpack_from
    buf, pos, started = b"", 0, False
    while (chunk := out.get()) is not None:
        if isinstance(chunk, BaseException):
            raise chunk
        buf = buf[pos:] + chunk if pos < len(buf) else chunk
        pos, end = 0, len(buf)
        if not started:
            if end < 19:
                continue
            if buf[:11] != _COPY_SIGNATURE:
                raise DataError("a COPY's output is not in the binary format")
            pos, started = 19 + field(buf, 15)[0], True
        while end - pos >= 2:
            (count,) = head(buf, pos)
            if count == -1:
                return
            row, at = [], pos + 2
            for _ in range(count):
                if end - at < 4:
                    break
                (size,) = field(buf, at)
                at += 4
                if size == -1:
                    row.append(None)
                elif end - at < size:
                    break
                else:
                    row.append(buf[at:at + size])
                    at += size
            else:
                yield tuple(row)
                pos = at
                continue
            break
    raise DataError("a COPY's output ended before its trailer")


class Connection:
    """One connection to the server (see the module's promises); ``raw``
    is psycopg2's."""

    def __init__(self, raw):
        self.raw = raw
        self.info = raw.info
        self._depth = 0
        raw.notices = deque(maxlen=NOTICES_KEPT)
        _ext.register_type(_BYTEA, raw)
        _ext.register_type(_BYTEA_ARRAY, raw)

    @property
    def closed(self) -> bool:
        return bool(self.raw.closed)

    @property
    def status(self) -> int:
        """The transaction status (``IDLE``, ``INTRANS``, …; ``UNKNOWN`` once closed)."""
        return UNKNOWN if self.raw.closed else self.raw.info.transaction_status

    @property
    def notices(self) -> list[str]:
        """The server's last notices, oldest first, each as libpq words it (its severity first)."""
        return list(self.raw.notices)

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def execute(self, query, params=None) -> _Cursor:
        """A cursor, ``query`` executed (see the module's promises)."""
        if self.raw.closed:
            raise OperationalError("the connection is closed")
        cur = self.raw.cursor()
        cur.execute(query, params)
        return cur

    def cursor(self) -> _Cursor:
        return self.raw.cursor()

    def transaction(self):
        """A block in one transaction (BEGIN … COMMIT; in one already, a
        savepoint), rolled back when the block raises."""

        @contextmanager
        def block():
            if self._depth == 0 and self.status == IDLE:
                begin, end, undo = "BEGIN", "COMMIT", "ROLLBACK"
            else:
                point = f"storm_queue_{self._depth}"
                begin, end, undo = f"SAVEPOINT {point}", f"RELEASE SAVEPOINT {point}", \
                    f"ROLLBACK TO SAVEPOINT {point}; RELEASE SAVEPOINT {point}"
            self.execute(begin)
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                if not self.closed and self.status in (INTRANS, INERROR):
                    try:
                        self.execute(undo)
                    except Error:
                        pass
                raise
            self._depth -= 1
            self.execute(end)

        return block()

    def rows(self, query: str) -> Iterator[tuple[bytes | None, ...]]:
        """Every row of ``query`` (no parameters), each field as its binary
        form (``bytes``: an int8 its 8 bytes big-endian, a bytea its bytes, a
        text its UTF-8; None for NULL), read by one ``COPY ... TO STDOUT
        (FORMAT binary)`` and streamed. Left part way (or interrupted), the
        COPY is cancelled on the server and its error ends the transaction
        around it; the connection stays open."""
        import queue
        import threading

        if self.raw.closed:
            raise OperationalError("the connection is closed")
        raw, out, gone = self.raw, queue.Queue(COPY_HELD), threading.Event()

        def give(item) -> None:  # to the reader, unless it has gone
            while not gone.is_set():
                try:
                    return out.put(item, timeout=0.05)
                except queue.Full:
                    pass

        def copy() -> None:
            try:
                with _copying:
                    _ext.set_wait_callback(None)
                    try:
                        with raw.cursor() as cur:
                            cur.copy_expert(f"COPY ({query}) TO STDOUT (FORMAT binary)", sink)
                    finally:
                        _ext.set_wait_callback(_wait)
                sink.flush()
                give(None)
            except BaseException as exc:  # noqa: BLE001 -- raised again in the reader's thread
                give(exc if not isinstance(exc, OperationalError) else _why_lost(raw, exc))

        sink = _Sink(give)
        worker = threading.Thread(target=copy, name="storm-queue-copy", daemon=True)
        worker.start()
        try:
            yield from _binary_rows(out)
        except BaseException:
            gone.set()
            if worker.is_alive():
                try:
                    raw.cancel()
                except Error:
                    pass
            raise
        finally:
            gone.set()
            worker.join(60)

    def notifies(self) -> list[tuple[str, str]]:
        """The notifications the server sent so far, ``(channel, payload)``,
        each returned once; ``OperationalError`` when the connection is gone."""
        if self.raw.closed:
            raise OperationalError("the connection is closed")
        try:
            self.raw.poll()
        except OperationalError as exc:
            raise _why_lost(self.raw, exc) from None
        heard = [(n.channel, n.payload) for n in self.raw.notifies]
        self.raw.notifies.clear()
        return heard

    def alive(self) -> bool:
        """Whether the connection is open, asked of its socket without a
        round trip (what the server sent meanwhile is read; a notification
        among it stays for ``notifies``). A connection whose server has
        said it ends it (a ``FATAL`` notice: ``pg_terminate_backend``, a
        shutdown; ``ENDING``) is not, even before the socket's end arrives
        (its backend may leave ``pg_stat_activity`` before its socket
        closes): it is closed."""
        if self.raw.closed:
            return False
        waiting = select.poll()
        waiting.register(self.raw.fileno(), select.POLLIN)
        try:
            for _ in range(8):  # the server's last words, then the socket's end: each read once
                if not waiting.poll(0):
                    break
                self.raw.poll()
        except (OSError, Error):
            return False
        if any(n.startswith(ENDING) for n in self.raw.notices):
            self.raw.close()  # what is left of it is the socket's end
            return False
        return not self.raw.closed and self.raw.info.status == 0  # libpq's CONNECTION_OK


def connect(dsn: str, **params: object) -> Connection:
    """A connection to the server ``dsn`` (a URL or ``key=value`` string)
    names, ``params`` (``application_name``, ``connect_timeout``, …) over
    it, its client encoding UTF-8. ``OperationalError`` with libpq's words
    when it cannot be had (or ``connect_timeout`` seconds, the URL's or
    ``params``', passed without an answer from a host); ``ProgrammingError``
    for a ``dsn`` that is not one. Its notices are kept from the start
    (psycopg2 takes them before the server says anything), and Ctrl-C
    interrupts the wait."""
    raw = psycopg2.connect(dsn, client_encoding="UTF8", cursor_factory=_Cursor, **params)
    raw.autocommit = True
    return Connection(raw)

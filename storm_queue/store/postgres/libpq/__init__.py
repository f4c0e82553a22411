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

from .binding import conninfo, library
from .connection import ACTIVE, IDLE, INERROR, INTRANS, UNKNOWN, Connection, Cursor, connect, quote_ident
from .exceptions import (DatabaseError, DataError, Error, IntegrityError, InterfaceError, InternalError,
                         NotSupportedError, OperationalError, ProgrammingError, errors)
from .values import Jsonb

__all__ = ["ACTIVE", "IDLE", "INERROR", "INTRANS", "UNKNOWN", "Connection", "Cursor", "DataError", "DatabaseError",
           "Error", "IntegrityError", "InterfaceError", "InternalError", "Jsonb", "NotSupportedError",
           "OperationalError", "ProgrammingError", "conninfo", "connect", "errors", "library", "quote_ident"]

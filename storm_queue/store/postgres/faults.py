"""What a database storm answers when the connection breaks during a
request: whether it committed, asked of the server (``lost``). A request
the server aborts (a deadlock, a serialization failure) is the request
path's ``Aborted``, answered as a recorded ``reorder_conflict``."""

from __future__ import annotations

from ...core.errors import RecordFailed, Unreachable
from .connect import _words, connect
from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .session import Session as Database  # what it asks of store.Database, without importing it


def not_done(store: Database, what: str, exc: Exception) -> Unreachable | None:
    """The server's refusal of a whole transaction, which leaves nothing
    written (``Unreachable``, exit 5: a retry is safe), or None: a
    statement it cancelled (the role's or the URL's ``statement_timeout``,
    an administrator's ``pg_cancel_backend``), or a server that is
    read-only now (a standby, ``default_transaction_read_only``). ``what``
    names the request (``the bump``) or the read."""
    from . import driver

    primary = getattr(getattr(exc, "diag", None), "message_primary", None)  # (not the PL/pgSQL context)
    why = _words(primary or exc, store.url)
    if isinstance(exc, driver.errors.QueryCanceled):
        return Unreachable(f"the server cancelled {what} ({why}: a statement_timeout of the role, the database or "
                           "the URL, or an administrator); nothing changed, a retry is safe")
    if isinstance(exc, driver.errors.ReadOnlySqlTransaction):
        return Unreachable(f"the server of {store.root} is read-only now ({why}: a standby, or "
                           f"default_transaction_read_only on), so {what} was not recorded; nothing changed: ask "
                           "the primary, or again once it is writable")
    return None


def refused_served(store: Database, verb: str, exc: Exception, ask: str) -> RecordFailed | Unreachable:
    """What is true after the server refused a statement of a served call
    (``not_done``'s refusals): the call's own transaction may have been
    committed before the statement refused (the one that makes it
    durable), so the server is asked, on the same connection, by the
    token the call was asked as: written (``RecordFailed``, recorded
    True, made durable first), or nothing changed (``not_done``); or the
    server cannot be asked (recorded None)."""
    from . import driver

    try:
        row = store.conn.execute(q("read_asked"), (ask,)).fetchone()
        if row is not None:
            store.conn.execute(q("make_durable"))
    except driver.Error:
        return RecordFailed(f"the server refused part of the {verb} ({_words(exc, store.url)}), and cannot be asked "
                            "whether it was recorded; check storm-queue log before asking again", recorded=None)
    if row is not None:
        return RecordFailed(f"the server refused the end of the {verb} ({_words(exc, store.url)}), but the {verb} was "
                            f"committed (its last line is line {row[0]}); do not ask again", recorded=True)
    refused = not_done(store, f"the {verb}", exc)
    assert refused is not None  # (called for not_done's refusals only)
    return refused


def lost(store: Database, verb: str, exc: Exception) -> RecordFailed | Unreachable:
    """What is true after the connection broke during a request: nothing
    of its lines was sent (``Unreachable``, exit 5: a retry is safe), or
    the line the request was committing (``store._pending``) is on the
    log, or not, or the server cannot be asked (``RecordFailed``, exit
    4). The broken connection is dropped."""
    why = _words(exc, store.url)
    pending, store._pending = store._pending, None
    store.close()
    if pending is None:  # nothing of the request's lines was sent: exit 5, as for a server not reached
        return Unreachable(f"the connection to {store.root} was lost before the {verb} was sent ({why}); "
                           "nothing changed, a retry is safe")
    seq, line = pending
    try:
        conn = connect(store.url)
        try:
            row = conn.execute(q("read_line"), (seq,)).fetchone()
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 -- the server is still away: say so
        return RecordFailed(f"the connection to {store.root} was lost while the {verb} committed ({why}), and the "
                            f"server cannot be asked whether line {seq} was written; check storm-queue log before "
                            "asking again", recorded=None)
    if row is not None and bytes(row[0]) == line:
        return RecordFailed(f"the connection to {store.root} was lost ({why}), but the {verb} was committed as "
                            f"line {seq}; do not ask again", recorded=True)
    return RecordFailed(f"the connection to {store.root} was lost before the {verb} committed ({why}), so it did "
                        "not happen; ask again", recorded=False)


#: how long a client waits, after its connection broke during a served call, for the server process that
#: served it to end (its transaction is then over, committed or not) before it asks whether its lines were written
BACKEND_GONE_WAIT = 10.0


def lost_served(store: Database, verb: str, exc: Exception, ask: str, pid: int) -> RecordFailed | Unreachable:
    """What is true after the connection broke during a served call (the
    server decides and writes in it: one statement, its own transaction):
    asked of the server on a new connection once the process that served
    the call has ended, by the token the call was asked as
    (``storm_queue.asked`` keeps the last line a served request wrote, an
    hour): written (``RecordFailed``, recorded True, naming the line), not
    written (recorded False: ask again), or the server cannot be asked,
    or its process has not ended yet (recorded None). The broken
    connection is dropped."""
    import time

    why = _words(exc, store.url)
    store.close()
    try:
        conn = connect(store.url)
        try:
            end = time.monotonic() + BACKEND_GONE_WAIT
            while not conn.execute(q("backend_gone"), (pid,)).fetchone()[0]:
                if time.monotonic() >= end:
                    raise TimeoutError
                time.sleep(0.05)
            row = conn.execute(q("read_asked"), (ask,)).fetchone()
            if row is not None:  # committed, perhaps not yet flushed (served_durably): durable before it is said
                conn.execute(q("make_durable"))
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 -- the server is still away, or its process still runs: say so
        return RecordFailed(f"the connection to {store.root} was lost during the {verb} ({why}), and the server "
                            "cannot be asked whether it was recorded; check storm-queue log before asking again",
                            recorded=None)
    if row is not None:
        return RecordFailed(f"the connection to {store.root} was lost ({why}), but the {verb} was committed (its "
                            f"last line is line {row[0]}); do not ask again", recorded=True)
    return RecordFailed(f"the connection to {store.root} was lost before the {verb} committed ({why}), so it did "
                        "not happen; ask again", recorded=False)

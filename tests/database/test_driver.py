"""What the store's connection promises (storm_queue/store/postgres/driver.py,
over psycopg2): what the store sends reaches the server as given and comes
back as it went (text of any Unicode, bytes with NULs, arrays with quotes,
backslashes and the word NULL), bytea as bytes; what cannot be carried is
refused, never cut; the server's errors come back as their SQLSTATE's
class; a long result is read whole in batches; LISTEN; Ctrl-C cancels a
wait; connect_timeout holds; the server's notices are kept, never printed."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.store.postgres import driver


@contextmanager
def ctrl_c_after(seconds: float):
    """A real SIGINT sent to this process ``seconds`` into the block, with
    Python's own handler in place for it (the suite may run with SIGINT
    ignored), and the handler before it back afterwards."""
    import os
    import signal

    was = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        yield
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, was)

pytestmark = pytest.mark.postgresql

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@pytest.fixture(scope="module")
def conn(pg_server):
    c = driver.connect(pg_server.admin_url())
    yield c
    c.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, data=st.binary(max_size=40), texts=st.lists(st.one_of(st.none(), TEXT, st.just("NULL")), max_size=5),
       blobs=st.lists(st.binary(max_size=8), max_size=4), number=st.integers(-(1 << 70), 1 << 70))
def test_what_is_sent_comes_back_as_it_went(conn, text, data, texts, blobs, number) -> None:
    row = conn.execute("SELECT %s::text, %s, %s::text[], %s::bytea[], %s::numeric, octet_length(%s)",
                       (text, data, texts, blobs, number, data)).fetchone()
    assert row == (text, data, texts, blobs, Decimal(number), len(data))


def test_values_come_back_as_their_types(conn) -> None:
    row = conn.execute("SELECT 1::int2, 2::int4, 3::int8, true, false, NULL::text, 1.5::float8, '{\"a\": [1]}'::jsonb, "
                       "'[2]'::json, ARRAY[[1, 2], [3, 4]], ARRAY[true, NULL], 'x'::name, now()::date::text").fetchone()
    assert row[:12] == (1, 2, 3, True, False, None, 1.5, {"a": [1]}, [2], [[1, 2], [3, 4]], [True, None], "x")
    assert conn.execute("SELECT %s, %s, %s", (driver.Jsonb({"k": "v"}), 2.25, False)).fetchone() == ({"k": "v"}, 2.25, False)


def test_placeholders_named_and_escaped(conn) -> None:
    assert conn.execute("SELECT %(a)s::int + %(b)s::int, %(a)s::int, 7 %% 4", {"a": 1, "b": 2}).fetchone() == (3, 1, 3)
    assert conn.execute("SELECT '100%'").fetchone() == ("100%",)  # no parameters: the text is sent as it is
    with pytest.raises(TypeError, match="not all arguments converted"):
        conn.execute("SELECT %s", (1, 2))
    with pytest.raises(KeyError):
        conn.execute("SELECT %(a)s", {"b": 1})


def test_a_nul_is_refused_never_cut(conn) -> None:
    with pytest.raises(driver.DataError, match="NUL"):
        conn.execute("SELECT %s", ("a\x00b",))
    with pytest.raises(driver.DataError, match="NUL"):
        conn.execute("SELECT %s::text[]", (["a\x00b"],))
    assert conn.status == driver.IDLE and conn.execute("SELECT 1").fetchone() == (1,)


def test_server_errors_are_their_sqlstates_class(conn) -> None:
    with pytest.raises(driver.errors.UndefinedTable) as caught:
        conn.execute("SELECT * FROM no_such_table")
    assert caught.value.pgcode == "42P01" and "no_such_table" in str(caught.value) and "ERROR" not in str(caught.value)
    with pytest.raises(driver.errors.RaiseException, match="said so"):
        conn.execute("DO $$ BEGIN RAISE EXCEPTION 'said so'; END $$")
    with pytest.raises(driver.IntegrityError) as caught:  # a class the store does not name: its DB-API class
        conn.execute("SELECT 1 WHERE (SELECT NULL::int) IS NOT NULL; CREATE TEMP TABLE u (a int UNIQUE); "
                     "INSERT INTO u VALUES (1), (1)")
    assert caught.value.pgcode == "23505"
    assert conn.status == driver.IDLE


def test_transactions_nest_as_savepoints(conn) -> None:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS t (a int)")
    conn.execute("TRUNCATE t")
    with conn.transaction():
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(driver.errors.UndefinedTable), conn.transaction():
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("SELECT * FROM no_such_table")
        assert conn.status == driver.INTRANS
    with pytest.raises(ZeroDivisionError), conn.transaction():
        conn.execute("INSERT INTO t VALUES (3)")
        1 / 0
    assert conn.execute("SELECT array_agg(a) FROM t").fetchone() == ([1],) and conn.status == driver.IDLE


def test_rows_reads_a_long_result_whole_by_copy_within_its_transaction(conn) -> None:
    """rows: every row, each field's binary form (NULL: None), chunk
    boundaries anywhere in a row; an error is its SQLSTATE's class; the
    wait callback is back after each read; a read left part way cancels its
    COPY, and the connection reads again after the transaction."""
    import psycopg2.extensions

    n = 3 * driver.COPY_CHUNK // 40
    with conn.transaction():
        rows = list(conn.rows("SELECT g::int8, decode(repeat(lpad(to_hex(g), 8, '0'), g % 5), 'hex'), "
                              f"CASE WHEN g % 3 = 0 THEN NULL ELSE 'é' || g END FROM generate_series(1, {n}) g"))
    assert rows == [(g.to_bytes(8, "big"), g.to_bytes(4, "big") * (g % 5), None if g % 3 == 0 else f"é{g}".encode())
                    for g in range(1, n + 1)]
    assert psycopg2.extensions.get_wait_callback() is driver._wait
    assert conn.execute("SELECT 1").fetchone() == (1,) and conn.status == driver.IDLE
    with pytest.raises(driver.errors.UndefinedTable), conn.transaction():
        list(conn.rows("SELECT * FROM no_such_table"))
    assert conn.status == driver.IDLE and psycopg2.extensions.get_wait_callback() is driver._wait
    with pytest.raises(driver.errors.InFailedSqlTransaction), conn.transaction():  # left part way: cancelled
        rows = conn.rows("SELECT g, pg_sleep(0.001) FROM generate_series(1, 100000) g")
        assert next(rows) == ((1).to_bytes(4, "big"), b"")
        rows.close()
        conn.execute("SELECT 1")
    with conn.transaction():  # and the next read is one of its own
        assert list(conn.rows("SELECT 1")) == [((1).to_bytes(4, "big"),)]
    assert psycopg2.extensions.get_wait_callback() is driver._wait


def test_ctrl_c_ends_a_copy_at_once_and_cancels_it_on_the_server(pg_server) -> None:
    """A real SIGINT while a COPY waits for the server (its rows slow to
    come): KeyboardInterrupt long before the COPY could end, the statement
    cancelled there, the connection kept, the wait callback back."""
    import time

    import psycopg2.extensions

    conn, other = driver.connect(pg_server.admin_url()), driver.connect(pg_server.admin_url())
    pid = conn.info.backend_pid
    began = time.monotonic()
    with ctrl_c_after(0.3), pytest.raises(KeyboardInterrupt), conn.transaction():
        list(conn.rows("SELECT pg_sleep(30)"))
    assert time.monotonic() - began < 20 and psycopg2.extensions.get_wait_callback() is driver._wait
    assert not conn.closed and conn.status == driver.IDLE and conn.execute("SELECT 2").fetchone() == (2,)
    assert other.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND query LIKE 'COPY%%' "
                         "AND state = 'active'", (pid,)).fetchone() == (0,)
    conn.close()
    other.close()


def test_notifications_and_a_connection_ended_by_the_server(pg_server) -> None:
    listening, other = driver.connect(pg_server.admin_url()), driver.connect(pg_server.admin_url())
    listening.execute("LISTEN probe")
    other.execute("NOTIFY probe, 'hello'")
    other.execute("SELECT pg_sleep(0.05)")
    assert listening.alive() and listening.notifies() == [("probe", "hello")] and listening.notifies() == []
    other.execute("SELECT pg_terminate_backend(%s)", (listening.info.backend_pid,))
    for _ in range(100):
        if not listening.alive():
            break
        other.execute("SELECT pg_sleep(0.02)")
    assert listening.closed
    with pytest.raises(driver.OperationalError):
        listening.execute("SELECT 1")
    other.close()


def test_a_connection_whose_server_said_it_ends_it_is_not_alive_before_its_socket_ends(pg_server) -> None:
    """The server's FATAL (``pg_terminate_backend``) read, the socket's end
    not yet: the backend can leave pg_stat_activity in between, and a
    request sent then is lost. Its words alone make the connection dead
    (closed), as libpq hands them over (a notice, on an idle connection)."""
    conn = driver.connect(pg_server.admin_url())
    assert conn.alive()
    conn.raw.notices.append("WARNING:  something the server says and lives on\n")
    assert conn.alive() and not conn.closed
    conn.raw.notices.append("FATAL:  terminating connection due to administrator command\n")
    assert not conn.alive() and conn.closed


def test_a_wait_is_interruptible_and_cancelled_on_the_server(pg_server) -> None:
    """Ctrl-C (a real SIGINT, which interrupts the wait's poll) while the
    server works: KeyboardInterrupt long before the statement could end,
    the statement cancelled there, and the connection closed (psycopg2's
    wait callback, the driver's). The pid's row is read at once: a
    statement still running would be active for half a minute yet."""
    import time

    import psycopg2.extensions

    assert psycopg2.extensions.get_wait_callback() is driver._wait
    conn, other = driver.connect(pg_server.admin_url()), driver.connect(pg_server.admin_url())
    pid = conn.info.backend_pid
    began = time.monotonic()
    with ctrl_c_after(0.3), pytest.raises(KeyboardInterrupt):
        conn.execute("SELECT pg_sleep(30)")
    assert time.monotonic() - began < 20 and conn.closed
    for _ in range(100):
        if other.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active'", (pid,)).fetchone() == (0,):
            break
        other.execute("SELECT pg_sleep(0.02)")
    else:
        pytest.fail("the interrupted statement still runs on the server")
    other.close()


def test_a_connection_that_cannot_be_had_says_why(pg_server, tmp_path) -> None:
    with pytest.raises(driver.OperationalError, match="No such file or directory"):
        driver.connect(f"postgresql://nobody@/postgres?host={tmp_path}")
    with pytest.raises(driver.ProgrammingError, match="invalid"):
        driver.connect("postgresql://[broken")
    assert driver.conninfo("postgresql://u@h:5/d?connect_timeout=3") == {"user": "u", "host": "h", "port": "5",
                                                                        "dbname": "d", "connect_timeout": "3"}


def test_the_servers_notices_are_kept_never_printed_and_a_lost_connection_says_why(pg_server, capfd) -> None:
    """A notice (RAISE NOTICE, a FATAL on an idle connection) is kept on the
    connection, the newest NOTICES_KEPT of them, never written to stderr;
    a connection the server ended says the server's reason."""
    conn, other = driver.connect(pg_server.admin_url()), driver.connect(pg_server.admin_url())
    try:
        for n in range(driver.NOTICES_KEPT + 5):
            conn.execute("DO $$ BEGIN RAISE NOTICE 'note %%', %s; END $$", (n,))
        assert len(conn.notices) == driver.NOTICES_KEPT and conn.notices[-1].startswith("NOTICE:")
        assert f"note {driver.NOTICES_KEPT + 4}" in conn.notices[-1]
        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        other.execute("SELECT pg_sleep(0.1)")
        with pytest.raises(driver.OperationalError, match="terminating connection due to administrator command"):
            conn.execute("SELECT 1")
        assert conn.closed
    finally:
        conn.close()
        other.close()
    out, err = capfd.readouterr()
    assert "NOTICE" not in err and "FATAL" not in err and "note" not in err


def test_a_server_that_never_answers_is_given_up_after_connect_timeout() -> None:
    """A listening socket that never says a word: the connection is given up
    after connect_timeout seconds (under the wait callback psycopg2 connects
    asynchronously, so libpq's own timer does not run: the callback's does)."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        began = time.monotonic()
        with pytest.raises(driver.OperationalError, match="timed out after 2 seconds"):
            driver.connect(f"postgresql://nobody@127.0.0.1:{port}/db?connect_timeout=2")
        assert 1.9 <= time.monotonic() - began < 30


def test_ctrl_c_interrupts_a_connect_too() -> None:
    """A host that never answers: a real SIGINT ends the wait for it long
    before its connect_timeout (the wait callback runs while connecting)."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        began = time.monotonic()
        with ctrl_c_after(0.3), pytest.raises(KeyboardInterrupt):
            driver.connect(f"postgresql://nobody@127.0.0.1:{port}/db?connect_timeout=60")
        assert time.monotonic() - began < 30


#: a child that is sent SIGTERM (its handler raising, as the command line's does) just as psycopg2's module
#: init imports ssl: the finder sends it, so the signal lands exactly there, every time
_SIGNAL_IN_THE_IMPORT = r'''
import os, signal, sys

class Interrupted(BaseException):
    pass

def raised(signum, frame):
    raise Interrupted(signum)

class SignalAtSsl:
    def find_spec(self, name, path=None, target=None):
        if name == "ssl":
            os.kill(os.getpid(), signal.SIGTERM)
        return None

assert "ssl" not in sys.modules and "psycopg2" not in sys.modules
signal.signal(signal.SIGTERM, raised)
sys.meta_path.insert(0, SignalAtSsl())
try:
    from storm_queue.store.postgres import driver
except Interrupted:
    print("interrupted", "psycopg2" in sys.modules)
    sys.exit(0)
print("lost")
'''


def test_an_interrupt_while_psycopg2_is_imported_is_not_lost() -> None:
    """psycopg2's module init imports ssl and clears any error raised
    there: a SIGTERM landing in it would be lost (a ``claim --wait`` then
    waited on, about one start in twenty-five under test). The driver
    holds the signals back for its import, so the interrupt arrives as
    the import ends."""
    import subprocess
    import sys

    from tests.conftest import clean_env

    done = subprocess.run([sys.executable, "-c", _SIGNAL_IN_THE_IMPORT], capture_output=True, text=True,
                          env=clean_env(), timeout=60)
    assert (done.returncode, done.stdout) == (0, "interrupted True\n"), done.stderr


def test_a_wait_whose_connection_is_lost_before_listen_counts_it_as_a_change(pg_server, pg_url, monkeypatch) -> None:
    """A server that ends the waiting claim's connection between connect
    and LISTEN (seen in the crash run: an immediate restart at that moment)
    is no crash: the wait says the storm may have changed (the claim asks
    again, and meets the server as it is), and the next wait listens anew."""
    from storm_queue.store.postgres import changes

    real = changes.connect

    def ended_at_once(url: str):
        conn = real(url)
        with pg_server.admin(driver.conninfo(url)["dbname"]) as killer:  # (it waits until the backend has ended)
            assert killer.execute("SELECT pg_terminate_backend(%s, 10000)", (conn.info.backend_pid,)).fetchone()[0]
        return conn

    monkeypatch.setattr(changes, "connect", ended_at_once)
    with changes.Changes(pg_url) as waiting:
        monkeypatch.setattr(changes, "connect", real)
        assert waiting.wait(5.0) is True  # listening again: what changed meanwhile was not heard, so ask again
        assert waiting.wait(0.2) is False  # listening: nothing changed since

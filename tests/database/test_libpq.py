"""The driver (storm_queue/store/postgres/libpq/): libpq through ctypes.
What the store sends reaches the server as given and comes back as it
went (text of any Unicode, bytes with NULs, arrays with quotes,
backslashes and the word NULL); what cannot be carried is refused, never
cut; the server's errors come back as their SQLSTATE's class; every libpq
the driver may load (the system's, a psycopg-binary wheel's) serves."""

from __future__ import annotations

import ctypes
import threading
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.store.postgres import libpq

pytestmark = pytest.mark.postgresql

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@pytest.fixture(scope="module")
def conn(pg_server):
    c = libpq.connect(pg_server.admin_url())
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
    assert conn.execute("SELECT %s, %s, %s", (libpq.Jsonb({"k": "v"}), 2.25, False)).fetchone() == ({"k": "v"}, 2.25, False)


def test_placeholders_named_and_escaped(conn) -> None:
    assert conn.execute("SELECT %(a)s::int + %(b)s::int, %(a)s::int, 7 %% 4", {"a": 1, "b": 2}).fetchone() == (3, 1, 3)
    assert conn.execute("SELECT '100%'").fetchone() == ("100%",)  # no parameters: the text is sent as it is
    with pytest.raises(libpq.ProgrammingError, match="placeholders"):
        conn.execute("SELECT %s", (1, 2))
    with pytest.raises(libpq.ProgrammingError):
        conn.execute("SELECT %(a)s", {"b": 1})


def test_a_prepared_statement_is_prepared_once_and_takes_any_values(pg_server) -> None:
    """prepare=True: prepared on the first call (one server-side statement
    per text, kept across a rolled-back transaction), then only the values
    are sent: of any size, NULL too; a statement the server refuses is
    not remembered, and the next call prepares it again."""
    c = libpq.connect(pg_server.admin_url())
    try:
        query = "SELECT %s::bigint + 1, %s::text"
        assert c.execute(query, (1, "a"), prepare=True).fetchone() == (2, "a")
        with pytest.raises(libpq.DataError, match='division by zero'):
            with c.transaction():
                assert c.execute(query, (1 << 40, None), prepare=True).fetchone() == ((1 << 40) + 1, None)
                c.execute("SELECT 1 / 0")
        assert c.execute(query, (-5, "b"), prepare=True).fetchone() == (-4, "b")
        prepared = c.execute("SELECT statement FROM pg_prepared_statements").fetchall()
        assert [row[0] for row in prepared] == ["SELECT $1::bigint + 1, $2::text"]
        with pytest.raises(libpq.errors.UndefinedTable):
            c.execute("SELECT * FROM no_such_table WHERE %s::int = 1", (1,), prepare=True)
        c.execute("CREATE TEMP TABLE no_such_table (n int)")
        assert c.execute("SELECT * FROM no_such_table WHERE %s::int = 1", (1,), prepare=True).fetchall() == []
        assert len(c.execute("SELECT statement FROM pg_prepared_statements").fetchall()) == 2
    finally:
        c.close()


def test_a_nul_is_refused_never_cut(conn) -> None:
    with pytest.raises(libpq.DataError, match="NUL"):
        conn.execute("SELECT %s", ("a\x00b",))
    with pytest.raises(libpq.DataError, match="NUL"):
        conn.execute("SELECT %s::text[]", (["a\x00b"],))
    assert conn.status == libpq.IDLE and conn.execute("SELECT 1").fetchone() == (1,)


def test_server_errors_are_their_sqlstates_class(conn) -> None:
    with pytest.raises(libpq.errors.UndefinedTable) as caught:
        conn.execute("SELECT * FROM no_such_table")
    assert caught.value.sqlstate == "42P01" and "no_such_table" in str(caught.value) and "ERROR" not in str(caught.value)
    with pytest.raises(libpq.errors.RaiseException, match="said so"):
        conn.execute("DO $$ BEGIN RAISE EXCEPTION 'said so'; END $$")
    with pytest.raises(libpq.IntegrityError) as caught:  # a class the store does not name: its DB-API class
        conn.execute("SELECT 1 WHERE (SELECT NULL::int) IS NOT NULL; CREATE TEMP TABLE u (a int UNIQUE); "
                     "INSERT INTO u VALUES (1), (1)")
    assert caught.value.sqlstate == "23505"
    assert conn.status == libpq.IDLE


def test_transactions_nest_as_savepoints(conn) -> None:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS t (a int)")
    conn.execute("TRUNCATE t")
    with conn.transaction():
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(libpq.errors.UndefinedTable), conn.transaction():
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("SELECT * FROM no_such_table")
        assert conn.status == libpq.INTRANS
    with pytest.raises(ZeroDivisionError), conn.transaction():
        conn.execute("INSERT INTO t VALUES (3)")
        1 / 0
    assert conn.execute("SELECT array_agg(a) FROM t").fetchone() == ([1],) and conn.status == libpq.IDLE


def test_copy_out_streams_every_row_and_a_copy_left_part_way_closes(conn, pg_server) -> None:
    rows = list(conn.copy_out("SELECT g::int8, decode(lpad(to_hex(g), 4, '0'), 'hex'), NULL::text "
                              "FROM generate_series(1, 5000) g"))
    assert rows == [(g.to_bytes(8, "big"), g.to_bytes(2, "big"), None) for g in range(1, 5001)]
    assert conn.execute("SELECT 1").fetchone() == (1,) and conn.status == libpq.IDLE
    with pytest.raises(libpq.errors.UndefinedTable):
        list(conn.copy_out("SELECT * FROM no_such_table"))
    assert conn.status == libpq.IDLE
    other = libpq.connect(pg_server.admin_url())
    rows = other.copy_out("SELECT g FROM generate_series(1, 100000) g")
    next(rows)
    rows.close()
    assert other.closed


def test_notifications_and_a_connection_ended_by_the_server(pg_server) -> None:
    listening, other = libpq.connect(pg_server.admin_url()), libpq.connect(pg_server.admin_url())
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
    with pytest.raises(libpq.OperationalError):
        listening.execute("SELECT 1")
    other.close()


def test_a_wait_is_interruptible_and_cancelled_on_the_server(pg_server) -> None:
    """Ctrl-C while the server works: the statement is cancelled there, and the connection closed."""
    import _thread

    conn, other = libpq.connect(pg_server.admin_url()), libpq.connect(pg_server.admin_url())
    pid = conn.info.backend_pid
    threading.Timer(0.3, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        conn.execute("SELECT pg_sleep(30)")
    assert conn.closed
    for _ in range(100):
        if other.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active'", (pid,)).fetchone() == (0,):
            break
        other.execute("SELECT pg_sleep(0.02)")
    else:
        pytest.fail("the interrupted statement still runs on the server")
    other.close()


def test_a_connection_that_cannot_be_had_says_why(pg_server, tmp_path) -> None:
    with pytest.raises(libpq.OperationalError, match="No such file or directory"):
        libpq.connect(f"postgresql://nobody@/postgres?host={tmp_path}")
    with pytest.raises(libpq.ProgrammingError, match="invalid"):
        libpq.connect("postgresql://[broken")
    assert libpq.conninfo("postgresql://u@h:5/d?connect_timeout=3") == {"user": "u", "host": "h", "port": "5",
                                                                        "dbname": "d", "connect_timeout": "3"}


def test_every_libpq_the_driver_may_load_serves(pg_server) -> None:
    """The system's libpq and a psycopg-binary wheel's (the ``postgresql`` extra), each on its own."""
    loadable, served = [], []
    binding = libpq.binding
    for path in binding._candidates():
        try:
            ctypes.CDLL(path)
        except OSError:
            continue
        loadable.append(path)
        was, real = binding._lib, binding._candidates
        binding._lib, binding._candidates = None, (lambda: [path])
        try:
            c = libpq.connect(pg_server.admin_url())
            assert c.execute("SELECT %s::text || 'k'", ("o",)).fetchone() == ("ok",)
            c.close()
            served.append(path)
        finally:
            binding._candidates, binding._lib = real, was
    assert served == loadable and any("psycopg_binary.libs" in p for p in served), loadable  # the test extra installs the wheel


def test_a_server_that_never_answers_is_given_up_after_connect_timeout() -> None:
    """A listening socket that never says a word: the connection is given up
    after connect_timeout seconds (the driver drives libpq's connection
    itself, so libpq's own timer does not)."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        began = time.monotonic()
        with pytest.raises(libpq.OperationalError, match="timed out after 2 seconds"):
            libpq.connect(f"postgresql://nobody@127.0.0.1:{port}/db?connect_timeout=2")
        assert 1.9 <= time.monotonic() - began < 30

"""The database tests' own server and fixtures (tests/pgserver.py, the pg_*
fixtures in tests/conftest.py): a fresh empty database per test owned by
a plain role, restarts that keep committed data and drop connections,
scram-sha-256 over TCP, and the skip-or-fail rules."""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import clean_env, in_ci, skip_or_fail
from tests.pgserver import PgServer, find_bindir, free_port

if in_ci():
    import psycopg2  # noqa: F401 -- under CI a missing driver is a failure, not a skip
else:
    pytest.importorskip("psycopg2", reason="psycopg2 is not importable; pip install -e '.[test,postgresql]'")
from storm_queue.store.postgres import driver  # noqa: E402 -- the store's driver, after the check above


def _who(url: str) -> tuple[str, str]:
    """(session_user, current_database()) of a connection to URL."""
    with driver.connect(url) as conn:
        return conn.execute("SELECT session_user::text, current_database()::text").fetchone()


def _own_server(pg_server: PgServer) -> None:
    """Skip unless the session's server is one this run started."""
    if pg_server.external_url is not None:
        pytest.skip("the server $STORM_QUEUE_TEST_URL names is not ours to inspect")


@pytest.mark.postgresql
def test_fresh_database_is_empty_and_owned_by_its_role(pg_url, pg_server):
    role, dbname = _who(pg_url)
    assert role.startswith("op_") and dbname.startswith("storm_")
    with pg_server.admin(dbname) as conn:
        owner = conn.execute("SELECT pg_get_userbyid(datdba)::text FROM pg_database WHERE datname = %s",
                             (dbname,)).fetchone()[0]
        schemas = [r[0] for r in conn.execute(
            "SELECT nspname::text FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname <> 'information_schema' ORDER BY 1")]
        tables = conn.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                              "WHERE n.nspname = 'public'").fetchone()[0]
    assert owner == role
    assert schemas == ["public"] and tables == 0
    with driver.connect(pg_url) as conn:  # the owner may make the store's schema
        conn.execute("CREATE SCHEMA storm_queue")
        conn.execute("CREATE TABLE storm_queue.t (x int)")


@pytest.mark.postgresql
def test_the_role_is_not_a_superuser(pg_url):
    with driver.connect(pg_url) as conn:
        row = conn.execute("SELECT rolsuper, rolcreaterole, rolcreatedb, rolcanlogin FROM pg_roles "
                           "WHERE rolname = session_user").fetchone()
        assert row == (False, False, False, True)
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("CREATE ROLE intruder SUPERUSER")


@pytest.mark.postgresql
def test_two_databases_are_distinct(pg_url, pg_database):
    other = pg_database()
    assert other != pg_url
    (role_a, db_a), (role_b, db_b) = _who(pg_url), _who(other)
    assert role_a != role_b and db_a != db_b
    with driver.connect(pg_url) as conn:
        conn.execute("CREATE TABLE only_in_a (x int)")
    with driver.connect(other) as conn:
        assert conn.execute("SELECT to_regclass('only_in_a')").fetchone()[0] is None


@pytest.mark.postgresql
def test_a_stranger_role_connects_but_owns_nothing(pg_url, pg_role, pg_server):
    stranger = pg_role()
    url = pg_server.url_as(pg_url, stranger)
    assert _who(url) == (stranger, _who(pg_url)[1])
    with driver.connect(pg_url) as conn:
        conn.execute("CREATE SCHEMA storm_queue")
    with driver.connect(url) as conn:
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE storm_queue.t (x int)")


@pytest.mark.postgresql
def test_drop_ends_connections_and_removes_database_and_role(pg_server):
    tag = secrets.token_hex(4)
    role, dbname = pg_server.create_role(f"op_{tag}"), f"storm_{tag}"
    try:
        pg_server.create_database(dbname, owner=role)
        held = driver.connect(pg_server.url(dbname, role))
        pg_server.drop_database(dbname)
        pg_server.drop_role(role)
        with pytest.raises(driver.OperationalError):
            held.execute("SELECT 1")
        held.close()
        with pg_server.admin() as conn:
            assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (dbname,)).fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)).fetchone()[0] == 0
    finally:
        pg_server.drop_database(dbname)
        pg_server.drop_role(role)


@pytest.mark.postgresql
def test_restart_immediate_keeps_committed_data_and_drops_connections(pg_url, pg_server):
    with driver.connect(pg_url) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
    idle = driver.connect(pg_url)
    idle.execute("SELECT 1")
    open_tx = driver.connect(pg_url)
    open_tx.execute("BEGIN")
    open_tx.execute("INSERT INTO t VALUES (2)")  # never committed
    pg_server.restart("immediate")
    for conn in (idle, open_tx):
        with pytest.raises(driver.OperationalError):
            conn.execute("SELECT 1")
        conn.close()
    with driver.connect(pg_url) as conn:
        assert conn.execute("SELECT array_agg(x ORDER BY x) FROM t").fetchone()[0] == [1]
    assert "immediate shutdown request" in pg_server.log_text()


@pytest.mark.postgresql
def test_own_server_runs_in_its_private_directory_on_a_socket_only(pg_server):
    _own_server(pg_server)
    st = pg_server.dir.stat()
    runner = "postgres" if os.geteuid() == 0 else None
    assert st.st_mode & 0o777 == 0o700
    assert st.st_uid == (pwd.getpwnam(runner).pw_uid if runner else os.geteuid())
    with pg_server.admin() as conn:
        assert conn.execute("SHOW unix_socket_directories").fetchone()[0] == str(pg_server.dir)
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == ""
        assert conn.execute("SELECT inet_server_addr()").fetchone()[0] is None  # a unix socket
    assert (pg_server.dir / ".s.PGSQL.5432").exists()


@pytest.fixture(scope="module")
def tcp_server():
    """A second server of our own that also listens on 127.0.0.1:<free port>."""
    if find_bindir() is None:
        skip_or_fail("no PostgreSQL server binaries for a TCP server; apt-get install postgresql")
    server = PgServer(tcp=("127.0.0.1", free_port())).start()
    yield server
    server.stop()
    assert not server.running


@pytest.mark.postgresql
def test_tcp_with_scram_password_and_refusals(tcp_server):
    password = "p@ss:w/rd %&?#'"  # every part of a URL that needs escaping
    role = tcp_server.create_role("runner_tcp", password=password)
    tcp_server.create_database("storm_tcp", owner=role)
    url = tcp_server.url("storm_tcp", role, host="127.0.0.1")
    assert url.startswith(f"postgresql://runner_tcp:p%40ss%3Aw%2Frd%20%25%26%3F%23%27@127.0.0.1:{tcp_server.port}/")
    with driver.connect(url) as conn:
        addr, user = conn.execute("SELECT host(inet_server_addr()), session_user::text").fetchone()
        assert (addr, user) == ("127.0.0.1", role)
    with tcp_server.admin() as conn:
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)).fetchone()[0]
        assert stored.startswith("SCRAM-SHA-256$")
    with pytest.raises(driver.OperationalError, match="password authentication failed"):
        driver.connect(tcp_server.url("storm_tcp", role, password="wrong", host="127.0.0.1"))
    with pytest.raises(driver.OperationalError):  # TCP never trusts: no password, no entry
        driver.connect(tcp_server.url("storm_tcp", role, password="", host="127.0.0.1"))
    assert "password authentication failed" in tcp_server.log_text()


def test_url_percent_encodes_the_socket_directory():
    server = PgServer()
    server.dir = Path("/tmp/a dir&x=y")  # never started: url() only formats
    try:
        url = server.url("db", "me")
        assert url == "postgresql://me@/db?host=/tmp/a%20dir%26x%3Dy&port=5432"
        assert driver.conninfo(url)["host"] == "/tmp/a dir&x=y"
    finally:
        server.dir = None


# -- the skip-or-fail rules and $STORM_QUEUE_TEST_URL, in a pytest of their own

PROBE = '''
import sys
import pytest
import tests.pgserver
{patch}

def test_probe(pg_url, pg_server):
    from storm_queue.store.postgres import driver

    with driver.connect(pg_url) as conn:
        assert conn.execute("SELECT session_user::text").fetchone()[0].startswith("op_")
    assert pg_server.dir is None  # started nothing of its own

def test_restart(pg_server):
    pg_server.restart()
'''


def _probe(tmp_path: Path, patch: str = "", **env: str) -> subprocess.CompletedProcess:
    """Run PROBE (after PATCH) in a pytest of its own with the repo's
    fixtures, in an environment without CI or STORM_QUEUE_TEST_URL but ENV."""
    (tmp_path / "test_probe.py").write_text(PROBE.format(patch=textwrap.dedent(patch)))
    base = {k: v for k, v in clean_env().items() if k not in ("CI", "STORM_QUEUE_TEST_URL")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "tests.conftest",
                           "-p", "no:cacheprovider", str(tmp_path / "test_probe.py")],
                          capture_output=True, text=True, cwd=tmp_path, env={**base, **env}, timeout=120)


NO_BINARIES = "tests.pgserver.find_bindir = lambda: None"
NO_PSYCOPG = "sys.modules['psycopg2'] = None"


@pytest.mark.parametrize("patch, says", [(NO_BINARIES, "apt-get install postgresql"),
                                         (NO_PSYCOPG, "psycopg2 is not importable")])
def test_missing_prerequisite_skips_locally_and_fails_under_ci(tmp_path, patch, says):
    """A real process: a pytest session of its own."""
    local = _probe(tmp_path, patch)
    assert local.returncode == 0 and "2 skipped" in local.stdout, local.stdout + local.stderr
    assert says in local.stdout
    ci = _probe(tmp_path, patch, CI="true")
    assert ci.returncode != 0 and "2 errors" in ci.stdout, ci.stdout + ci.stderr
    assert says in ci.stdout and "CI is set" in ci.stdout


@pytest.mark.postgresql
def test_an_existing_server_named_by_the_environment(tmp_path, pg_server):
    """A real process: a pytest session of its own."""
    _own_server(pg_server)
    with pg_server.admin() as conn:
        before = conn.execute("SELECT count(*) FROM pg_database").fetchone()[0]
        roles_before = conn.execute("SELECT count(*) FROM pg_roles").fetchone()[0]
    done = _probe(tmp_path, STORM_QUEUE_TEST_URL=pg_server.admin_url())
    assert done.returncode == 0 and "1 passed, 1 skipped" in done.stdout, done.stdout + done.stderr
    assert "cannot restart a server it did not start" in done.stdout
    with pg_server.admin() as conn:  # it cleaned up after itself
        assert conn.execute("SELECT count(*) FROM pg_database").fetchone()[0] == before
        assert conn.execute("SELECT count(*) FROM pg_roles").fetchone()[0] == roles_before


def _fake_pg_config(tmp_path: Path, bindir: Path) -> str:
    """A PATH whose pg_config says BINDIR (and the usual PATH after it)."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "pg_config").write_text(f"#!/bin/sh\necho '{bindir}'\n")
    (fake / "pg_config").chmod(0o755)
    return f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"


def test_find_bindir_takes_pg_config_when_it_holds_the_server(tmp_path, monkeypatch):
    server_bin = tmp_path / "server"
    server_bin.mkdir()
    for name in ("initdb", "pg_ctl"):
        (server_bin / name).write_text("#!/bin/sh\n")
        (server_bin / name).chmod(0o755)
    monkeypatch.setenv("PATH", _fake_pg_config(tmp_path, server_bin))
    assert find_bindir() == server_bin


def test_find_bindir_passes_over_a_client_only_pg_config(tmp_path, monkeypatch):
    """libpq-dev's pg_config names /usr/bin, where no initdb lives: the
    newest /usr/lib/postgresql/*/bin is taken instead, or None."""
    client_bin = tmp_path / "client"
    client_bin.mkdir()
    monkeypatch.setenv("PATH", _fake_pg_config(tmp_path, client_bin))
    found = find_bindir()
    assert found != client_bin
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert (found is None) == (not installed)
    if found is not None:
        assert found.parent.parent == Path("/usr/lib/postgresql") and (found / "initdb").exists()

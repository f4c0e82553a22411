"""A password given for a database storm is never written down: not in a
message, a listing, a ``--json`` document, nor the log (issue "many hosts,
safely", item 1). Against a real server: scram-sha-256 over TCP on
127.0.0.1, and the unix socket (whose ``trust`` ignores the password, which
must still never be shown)."""

from __future__ import annotations

import json
import secrets
from urllib.parse import quote

import pytest

from tests.conftest import clean_env, log_events, make_storm, run_cli, skip_or_fail, write_log
from tests.pgserver import PgServer, find_bindir, free_port

SECRET = "Pw-s3cret:@/?&%=#"  # needs escaping in every part of a URL


@pytest.fixture(scope="module")
def tcp_server():
    """A server of our own that also listens on 127.0.0.1 with scram-sha-256."""
    if find_bindir() is None:
        skip_or_fail("no PostgreSQL server binaries for a TCP server; apt-get install postgresql")
    server = PgServer(tcp=("127.0.0.1", free_port()), settings={"fsync": "off"}).start()
    yield server
    server.stop()


@pytest.fixture
def tcp_storm(tcp_server):
    """(server, role, url without password) of a fresh storm over TCP, its
    role's password SECRET; dropped after the test."""
    tag = secrets.token_hex(4)
    role, db = f"op_{tag}", f"storm_{tag}"
    tcp_server.create_role(role, password=SECRET)
    tcp_server.create_database(db, owner=role)
    bare = f"postgresql://{role}@127.0.0.1:{tcp_server.port}/{db}"
    done = run_cli(None, "init", with_userinfo(bare), env=clean_env())
    assert done.returncode == 0, done.stderr
    yield tcp_server, role, bare
    tcp_server.drop_database(db)
    tcp_server.drop_role(role)


def with_userinfo(bare: str, pw: str = SECRET) -> str:
    return bare.replace("@", f":{quote(pw, safe='')}@", 1)


def with_query(bare: str, pw: str = SECRET, name: str = "password") -> str:
    return f"{bare}{'&' if '?' in bare else '?'}{name}={quote(pw, safe='')}"


def never_said(done, *secrets_: str) -> None:
    said = done.stdout + done.stderr
    for pw in secrets_ or (SECRET, quote(SECRET, safe="")):
        assert pw not in said, (done.args, said)
    assert "Traceback" not in done.stderr and "error ignored" not in done.stderr, done.stderr


@pytest.mark.postgresql
def test_no_form_of_the_password_is_printed_over_tcp(tcp_storm) -> None:
    server, role, bare = tcp_storm
    forms = [(with_userinfo(bare), {}), (with_query(bare), {}), (bare, {"PGPASSWORD": SECRET})]
    for url, extra in forms:
        env = clean_env(**extra)
        assert run_cli(url, "add", f"l{len(extra)}{secrets.token_hex(2)}", "1", env=env).returncode == 0
        for args in (("list",), ("list", "--json"), ("next",), ("why", "nosuch"), ("doctor",), ("log", "--json"),
                     ("bump", "nosuch", "--json"), ("claim", "--json"), ("verify", "--json")):
            done = run_cli(url, *args, env=env)
            assert done.returncode in (0, 1, 2, 3), (args, done.stderr)
            never_said(done)
        listed = json.loads(run_cli(url, "list", "--json", env=env).stdout)
        assert listed["root"] in (bare, server.url_as(bare, role)) or "***" in listed["root"], listed["root"]
        assert SECRET not in listed["root"]
    header = run_cli(with_query(bare), "list", env=clean_env()).stdout.splitlines()[0]
    assert header == f"storm: {bare}?password=***", header


@pytest.mark.postgresql
def test_a_refused_login_quotes_the_server_without_the_password(tcp_storm) -> None:
    server, role, bare = tcp_storm
    wrong = "Wr0ng-" + secrets.token_hex(4)
    for url, extra in ((with_userinfo(bare, wrong), {}), (with_query(bare, wrong), {}),
                       (with_query(bare, wrong, "PASSWORD"), {}), (bare, {"PGPASSWORD": wrong}),
                       (with_query(bare, wrong, "sslpassword"), {"PGPASSWORD": wrong})):
        for args in (("list",), ("bump", "a", "--json"), ("init",)):
            argv = ("init", url) if args == ("init",) else args
            done = run_cli(None if args == ("init",) else url, *argv, env=clean_env(**extra))
            assert done.returncode == 2, (url, args, done.stdout, done.stderr)
            never_said(done, wrong, quote(wrong, safe=""))
            assert "storm-queue:" in done.stderr


@pytest.mark.postgresql
def test_the_unix_socket_never_shows_a_password_it_ignores(pg_server, pg_url) -> None:
    assert run_cli(None, "init", pg_url).returncode == 0
    for url in (with_query(pg_url), with_userinfo(pg_url)):
        for args in (("list", "--json"), ("add", "a1", "1", "--json"), ("bump", "zz"), ("next",)):
            done = run_cli(url, *args)
            never_said(done)


@pytest.mark.postgresql
def test_migrate_records_the_url_without_its_password_and_says_it_masked(tcp_storm, tmp_path) -> None:
    server, role, bare = tcp_storm
    tag = secrets.token_hex(4)
    db = f"storm_{tag}"
    server.create_database(db, owner=role)
    target = bare.rsplit("/", 1)[0] + f"/{db}?sslmode=disable"
    try:
        root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
        assert run_cli(root, "bump", "b").returncode == 0
        done = run_cli(None, "migrate", str(root), with_query(target), "--json")
        assert done.returncode == 0, done.stderr
        never_said(done)
        last = log_events(root)[-1]
        assert last["action"] == "migrate" and last["to"] == target
        assert SECRET not in (root / "priority.log").read_text()
        for args in (("bump", "a"), ("log",), ("log", "--json"), ("list",), ("doctor",), ("next",)):
            never_said(run_cli(root, *args))
        doctor = json.loads(run_cli(root, "doctor", "--json").stdout)  # no password recorded: only the move (item 6)
        assert [f["code"] for f in doctor["findings"]] == ["moved"] and doctor["moved"] == target
    finally:
        server.drop_database(db)


def test_doctor_names_a_password_an_earlier_release_recorded(tmp_path) -> None:
    """An earlier release wrote ``migrate``'s URL with a query password into
    the directory's log: doctor says which line and to change it; every
    command that shows the line masks it."""
    root = make_storm(tmp_path / "storm", "a 1\n")
    leaked = f"postgresql://op@db.example/storm?password={quote(SECRET, safe='')}"
    write_log(root, [{"action": "bump", "slug": "a", "issue": "1", "deps": [], "moved": ["a"], "removed": []},
                     {"action": "migrate", "to": leaked}])
    done = run_cli(root, "doctor", "--json")
    assert done.returncode == 1, done.stdout
    (finding,) = [f for f in json.loads(done.stdout)["findings"] if f["code"] == "password_recorded"]
    assert finding["severity"] == "error" and finding["subject"] == "priority.log:2"
    assert "change that role's password" in finding["fix"]
    text = run_cli(root, "doctor")
    assert "line 2 records a database password" in text.stdout
    for args in (("doctor",), ("log",), ("log", "--json"), ("bump", "a"), ("list", "--json"), ("next",)):
        never_said(run_cli(root, *args))
    masked = [json.loads(line) for line in run_cli(root, "log", "--json").stdout.splitlines()]
    assert masked[-2]["to"] == masked[-1]["moved"] == "postgresql://op@db.example/storm?password=***"
    assert SECRET in (root / "priority.log").read_text(errors="replace") or quote(SECRET, safe="") in (
        root / "priority.log").read_text()  # the log itself stays append-only


# -- issue 33, item 9: every form a password is written in, well or badly -----------------------

#: a part of SECRET that a URL with SECRET written raw would hand libpq as its host, port or database
FRAGMENTS = ("Pw-s3cret", "s3cret")


def bad_forms(bare: str, pw: str = SECRET) -> dict[str, str]:
    """The ways a user writes the storm's root with its password so that
    libpq would not read it as that password (or a URL at all): each is
    refused (exit 2) with the password masked."""
    role_host, db = bare.removeprefix("postgresql://").rsplit("/", 1)
    role, host = role_host.split("@")
    address, port = host.rsplit(":", 1)
    enc = quote(pw, safe="")
    quoted = "'" + pw.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return {
        "userinfo as typed": f"postgresql://{role}:{pw}@{host}/{db}",
        "query as typed": f"postgresql://{role}@{host}/{db}?password={pw}",
        "keyword/value": f"host={address} port={port} user={role} password={quoted} dbname={db}",
        "keyword/value unquoted": f"host={address} password={pw.replace('#', '')} dbname={db}",
        "one slash": f"postgresql:/{role}:{enc}@{host}/{db}",
        "no colon": f"postgresql//{role}:{enc}@{host}/{db}",
        "no slashes": f"postgresql:{role}:{enc}@{host}/{db}",
    }


def never_said_any(done, pw: str = SECRET) -> None:
    never_said(done, pw, quote(pw, safe=""), *FRAGMENTS)


@pytest.mark.postgresql
def test_a_password_written_in_a_form_libpq_would_misread_is_refused_masked(tcp_storm, tmp_path) -> None:
    server, role, bare = tcp_storm
    for name, root in bad_forms(bare).items():
        for how in ("--root", "env"):
            for args in (("list",), ("list", "--json"), ("next",), ("why", "a", "--json"), ("bump", "a", "--json"),
                         ("claim", "--json"), ("doctor",), ("doctor", "--json"), ("watch", "--once"), ("log", "--json")):
                if how == "--root":
                    done = run_cli(root, *args, env=clean_env(), cwd=tmp_path)
                else:
                    done = run_cli(None, *args, env=clean_env(STORM_QUEUE_ROOT=root), cwd=tmp_path)
                assert done.returncode == 2, (name, how, args, done.stdout, done.stderr)
                never_said_any(done)
                assert "***" in done.stdout + done.stderr or "postgresql://" in done.stderr, (name, done.stderr)
        made = run_cli(None, "init", root, "--json", env=clean_env(), cwd=tmp_path)
        assert made.returncode == 2, (name, made.stdout, made.stderr)
        never_said_any(made)
        assert list(tmp_path.iterdir()) == [], "init made no directory named after a database root"
    # written well, the same password works and is never shown
    good = with_userinfo(bare)
    assert run_cli(good, "add", "a", "1").returncode == 0
    for args in (("list", "--json"), ("next",), ("doctor", "--json")):
        done = run_cli(good, *args)
        assert done.returncode == 0, done.stderr
        never_said_any(done)


@pytest.mark.postgresql
def test_a_keyword_value_root_is_answered_with_the_url_it_means(tcp_storm) -> None:
    server, role, bare = tcp_storm
    root = bad_forms(bare)["keyword/value"]
    done = run_cli(root, "list")
    assert done.returncode == 2
    said = done.stderr
    assert "keyword/value string" in said and "password=***" in said and "~/.pgpass" in said
    url = said.split('write it as a URL, "', 1)[1].split('"', 1)[0]
    assert url == bare  # the same storm, without its password: with PGPASSWORD it answers
    assert run_cli(url, "list", env=clean_env(PGPASSWORD=SECRET)).returncode == 0


@pytest.mark.postgresql
def test_no_password_at_all_names_pgpass_pgpassfile_and_a_service_file(tcp_storm, tmp_path) -> None:
    server, role, bare = tcp_storm
    done = run_cli(bare, "list", env=clean_env(PGPASSFILE=str(tmp_path / "none"), HOME=str(tmp_path)))
    assert done.returncode == 2, done.stderr
    assert "no password supplied" in done.stderr
    assert "~/.pgpass" in done.stderr and "PGPASSFILE" in done.stderr and "service file" in done.stderr
    (tmp_path / "pgpass").write_text(f"127.0.0.1:{server.port}:*:{role}:{SECRET.replace(':', chr(92) + ':')}\n")
    (tmp_path / "pgpass").chmod(0o600)
    assert run_cli(bare, "list", env=clean_env(PGPASSFILE=str(tmp_path / "pgpass"))).returncode == 0  # as it says


def test_a_directory_storm_never_records_or_shows_a_password_written_badly(tmp_path) -> None:
    """migrate's target in each bad form: refused (exit 2) before anything
    is connected to or recorded; the directory's log and progress.log hold
    no part of the password."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert run_cli(root, "bump", "b").returncode == 0
    before = (root / "priority.log").read_bytes()
    for name, target in bad_forms("postgresql://op@127.0.0.1:5999/storm").items():
        for args in (("migrate", str(root), target), ("migrate", str(root), target, "--json")):
            done = run_cli(None, *args)
            assert done.returncode == 2, (name, done.stdout, done.stderr)
            never_said_any(done)
    assert (root / "priority.log").read_bytes() == before
    progress = (root / "progress.log").read_text() if (root / "progress.log").exists() else ""
    assert not any(f in progress for f in FRAGMENTS)
    for args in (("list",), ("log", "--json"), ("doctor",)):
        assert run_cli(root, *args).returncode == 0


@pytest.mark.postgresql
def test_every_path_that_renders_a_driver_error_shows_no_password(tcp_storm) -> None:
    """psycopg2's words may quote the connection string (``invalid dsn: …
    in URI: "postgresql://…"``) and the server's the host; every path that
    renders one masks the password: a URL the driver cannot read, a
    server away (a refused port; a host that never answers, past
    connect_timeout), a refused login, a connection the server ends during
    a request (a wait for the storm's lock), in text and ``--json``."""
    import socket
    import threading
    import time

    server, role, bare = tcp_storm
    unreadable = f"postgresql://{role}:{quote(SECRET, safe='')}@[::1/db"
    closed_port = with_userinfo(f"postgresql://{role}@127.0.0.1:{free_port()}/db")
    for url, code in ((unreadable, 2), (closed_port, 5), (with_userinfo(bare, "Wr0ng-" + SECRET), 2)):
        for args in (("list",), ("bump", "a", "--json")):
            done = run_cli(url, *args, env=clean_env())
            assert done.returncode == code, (url, args, done.stdout, done.stderr)
            never_said(done)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = with_userinfo(f"postgresql://{role}@127.0.0.1:{silent.getsockname()[1]}/db?connect_timeout=2")
        done = run_cli(url, "bump", "a", "--json", env=clean_env())
        assert done.returncode == 5 and "timed out" in done.stdout, (done.stdout, done.stderr)
        never_said(done)
    url = with_userinfo(bare)
    assert run_cli(url, "add", "a", "1", env=clean_env()).returncode == 0
    with server.admin(bare.rsplit("/", 1)[1]) as holder, server.admin() as killer:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")  # the bump waits for it: then its backend ends

        def end_it() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                pids = killer.execute("SELECT pid FROM pg_stat_activity WHERE usename = %s AND wait_event_type = 'Lock'",
                                      (role,)).fetchall()
                if pids:
                    killer.execute("SELECT pg_terminate_backend(%s)", pids[0])
                    return
                time.sleep(0.05)

        ender = threading.Thread(target=end_it)
        ender.start()
        done = run_cli(url, "bump", "a", "--json", "--wait", "30", env=clean_env())
        ender.join(timeout=60)
        holder.execute("ROLLBACK")
    assert done.returncode in (4, 5), (done.stdout, done.stderr)
    assert "terminating connection" in done.stdout, done.stdout
    never_said(done)

"""Issue 34 items 2 and 3: ``storm-queue serve``, on a directory storm and a
database storm alike. A real process where the process is what is tested
(the command, its signals, its socket); the server's limits in the test's
own process (``web.server.Server`` on a thread, its deadlines shortened).

The pages are whole without JavaScript and say what ``list``, ``why`` and
``log`` say; ``/api/list``, ``/api/log`` and ``/metrics`` are byte for
byte (or document for document) what the commands print; it changes
nothing, answers 405 to every method but GET and HEAD, 404 without echoing
an unknown path or query, refuses a non-loopback host without a token and
then every request without it, and cuts off slow or oversized requests."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.cli.servers import serving, token_file, wait_for
from tests.cli.test_metrics import parse
from tests.conftest import clean_env, make_storm, run_cli, tree
from tests.stores import DatabaseStorm, DirectoryStorm

HOSTILE = 'x <script>alert(1)</script> <b>bold</b> "q" & \u202eevil'


class Cells(HTMLParser):
    """The text of each table's rows, by table id; and every tag met."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.tags: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self._table = dict(attrs).get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag == "td" and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def cells(html: bytes) -> Cells:
    found = Cells()
    found.feed(html.decode("utf-8"))
    return found


@pytest.fixture(params=["directory", pytest.param("database", marks=pytest.mark.postgresql)])
def under_test(request, tmp_path: Path):
    return DirectoryStorm(tmp_path) if request.param == "directory" else DatabaseStorm(request.getfixturevalue("pg_url"))


def made(s) -> None:
    s.make("a 1\nb 2 a\nc 3\nd 4\n")
    assert s.cli("bump", "b", "--reason", HOSTILE).returncode == 0
    assert s.cli("bump", "nope", "--reason", "typo").returncode == 2
    claim = json.loads(s.cli("claim", "--holder", "host-1", "--json").stdout)
    assert s.cli("finish", claim["slug"], "--token", str(claim["token"]), "--result", "failed",
                 "--note", "<i>flaky</i> disk").returncode == 0
    assert s.cli("claim", "--holder", "host-2").returncode == 0


def test_the_pages_and_the_json_say_what_the_commands_say(under_test) -> None:
    s = under_test
    made(s)
    with serving(s.root) as srv:
        status, headers, body = srv.get("/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        page = cells(body)
        listed = json.loads(s.cli("list", "--all", "--json").stdout)
        assert [row[1] for row in page.tables["lanes"][1:]] == [r["slug"] for r in listed["rows"]]  # run order
        assert "script" not in [t for t in page.tags if t != "script"] and page.tags.count("script") == 1  # /live.js only
        assert "b" not in page.tags and "i" not in page.tags  # the hostile reason and holder are text
        text = body.decode()
        assert HOSTILE not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert "\u202e" not in text  # bidi controls escaped as the terminal shows them
        assert any("host-2" in cell for row in page.tables["lanes"] for cell in row)  # the lease's holder
        assert f"log line {len(s.events())}" in text  # the chain's head

        status, headers, api = srv.get("/api/list")
        assert (status, headers["content-type"]) == (200, "application/json")
        assert json.loads(api) == json.loads(s.cli("list", "--all", "--json").stdout)

        logged = s.cli("log", "--json", "--last", "3").stdout.encode()
        status, _, api = srv.get("/api/log?last=3")
        assert status == 200 and json.loads(api) == [json.loads(line) for line in logged.splitlines()]
        assert api == b"[" + b",".join(logged.splitlines()) + b"]\n"  # byte for byte

        status, headers, metrics = srv.get("/metrics")
        assert status == 200 and headers["content-type"].startswith("application/openmetrics-text")
        served, printed = parse(metrics.decode()), parse(s.cli("metrics").stdout)
        del served["storm_queue_oldest_ready_seconds"], printed["storm_queue_oldest_ready_seconds"]
        assert served == printed

        status, _, lane = srv.get("/lane/b")
        why = s.cli("why", "b").stdout.splitlines()
        assert status == 200 and all(line.split(":")[0] in lane.decode() for line in why)
        status, _, lane = srv.get("/lane/a")
        assert status == 200 and "&lt;i&gt;flaky&lt;/i&gt; disk" in lane.decode() and "i" not in cells(lane).tags
        assert json.loads(srv.get("/api/why/b")[2]) == json.loads(s.cli("why", "b", "--json").stdout)
        assert srv.get("/lane/zz")[0] == 404

        status, _, log = srv.get("/log?action=refused")
        rows = cells(log).tables["events"][1:]
        assert status == 200 and [r[3] for r in rows] == ["bump"] and "unknown_slug" in rows[0][4]
        rows = cells(srv.get("/log?slug=b")[2]).tables["events"][1:]
        assert [r[0] for r in rows] == [str(e["seq"]) for e in reversed(s.events()) if "b" in
                                        {e.get("slug"), *e.get("moved", ()), *e.get("removed", ())}]

        head = srv.get("/", method="HEAD")
        assert head[0] == 200 and head[2] == b"" and head[1]["content-length"] == str(len(body))


def test_it_changes_nothing_and_refuses_every_other_method(storm) -> None:
    root = storm("a 1\nb 2 a\n")
    assert run_cli(root, "bump", "b").returncode == 0
    before = tree(root, times=True)
    with serving(str(root)) as srv:
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "BREW"):
            status, headers, _ = srv.get("/", method=method)
            assert (status, headers.get("allow")) == (405, "GET, HEAD"), method
        for path in ("/", "/log", "/lane/a", "/api/list", "/api/log?last=5", "/metrics", "/api/head"):
            assert srv.get(path)[0] == 200, path
        for path in ("/<script>x</script>", "/?<b>=1", "/log?slug=a&x=<i>", "/lane/..%2Fetc", "/api/log?last=0&last=1",
                     "/lane/%3Cimg%20src=x%3E"):
            status, _, body = srv.get(path)
            assert status == 404 and b"<" not in body and b"script" not in body, path
        assert srv.get("/api/log?last=abc")[0] == 400
        code, said = srv.stop()
    assert tree(root, times=True) == before
    assert code == 143 and "interrupted: nothing was recorded" in said
    assert "<script>" not in said and "x</script>" not in said  # a refusal's log line never echoes the path


def test_ctrl_c_exits_130(storm) -> None:
    root = storm("a 1\n")
    with serving(str(root)) as srv:
        code, said = srv.stop(signal.SIGINT)
    assert code == 130 and "interrupted: nothing was recorded" in said and "Traceback" not in said


def test_a_change_shows_within_two_seconds(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\nc 3\n")
    with serving(s.root) as srv:
        version = json.loads(srv.get("/api/head")[2])["version"]
        assert s.cli("bump", "c").returncode == 0
        bumped = time.monotonic()
        wait_for(lambda: json.loads(srv.get("/api/head")[2])["version"] != version, timeout=2.0)
        assert time.monotonic() - bumped < 2.0
        first = cells(srv.get("/")[2]).tables["lanes"][1]
        assert first[1] == "c"


def test_a_host_that_is_not_loopback_needs_a_token(storm, tmp_path: Path) -> None:
    root = storm("a 1\n")
    done = run_cli(root, "serve", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2 and "--token-file" in done.stderr and "Traceback" not in done.stderr
    loose = tmp_path / "loose"
    loose.write_text("s3cret-token-0123456789abcdef\n")
    os.chmod(loose, 0o644)
    done = run_cli(root, "serve", "--host", "0.0.0.0", "--port", "0", "--token-file", str(loose))
    assert done.returncode == 2 and "chmod 600" in done.stderr and "s3cret" not in done.stderr
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)  # no writer will come: refused at once, never waited on
    done = run_cli(root, "serve", "--port", "0", "--token-file", str(fifo), timeout=20)
    assert done.returncode == 2 and "--token-file" in done.stderr and "not a regular file" in done.stderr
    short = token_file(tmp_path, "short")
    done = run_cli(root, "serve", "--port", "0", "--token-file", str(short))
    assert done.returncode == 2 and "at least 16" in done.stderr and "short" not in done.stderr.split("token")[0]


def test_with_a_token_every_request_without_it_is_refused(storm, tmp_path: Path) -> None:
    root = storm("a 1\n")
    token = "s3cret-token-0123456789abcdef"
    path = token_file(tmp_path, token)
    with serving(str(root), "--host", "0.0.0.0", "--token-file", str(path)) as srv:
        srv.host = "127.0.0.1"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"},
                        {"Authorization": f"Bearer {token}x"}, {"Authorization": "Bearer"}):
            for path_ in ("/", "/api/list", "/metrics", "/live.js"):
                status, got, _ = srv.get(path_, headers=headers)
                assert status == 401 and got["www-authenticate"].startswith("Bearer"), (headers, path_)
        assert srv.get("/", method="POST")[0] == 405
        assert srv.get("/api/list", headers={"Authorization": f"Bearer {token}"})[0] == 200
        code, said = srv.stop()
    assert code == 143 and token not in said and "token" in said  # it says one is required, never which


def test_on_loopback_a_request_for_another_host_name_is_refused(storm, tmp_path: Path) -> None:
    """DNS rebinding: a page at evil.example, its name made to resolve to
    127.0.0.1, has the visitor's browser ask the loopback view with
    ``Host: evil.example`` and would read it. Without a token only a
    loopback host name is answered; under a token, the token decides."""
    root = storm("secret-lane 1\n")
    with serving(str(root)) as srv:
        for host in ("evil.example", f"evil.example:{srv.port}", "127.0.0.1.evil.example", "localhost.evil"):
            for path_ in ("/", "/api/list", "/lane/secret-lane", "/metrics"):
                status, _, body = srv.get(path_, headers={"Host": host})
                assert status == 403 and b"secret-lane" not in body, (host, path_)
        for host in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", "LOCALHOST", "127.0.0.2", f"[::1]:{srv.port}"):
            status, _, body = srv.get("/api/list", headers={"Host": host})
            assert status == 200 and b"secret-lane" in body, host
        srv.stop()
    token = "s3cret-token-0123456789abcdef"
    with serving(str(root), "--token-file", str(token_file(tmp_path, token))) as srv:
        assert srv.get("/api/list", headers={"Host": "storm.example", "Authorization": f"Bearer {token}"})[0] == 200
        srv.stop()


@pytest.mark.postgresql
def test_a_reader_role_serves_a_database_storm(pg_server, pg_url, pg_role) -> None:
    s = DatabaseStorm(pg_url)
    made(s)
    role = pg_role(prefix="viewer")
    assert s.cli("grant", "reader", role).returncode == 0
    lines = s.lines()
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as holder, \
            serving(pg_server.url_as(pg_url, role)) as srv:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")  # a writer holds the storm's lock
        for path in ("/", "/log", "/lane/b", "/api/list", "/api/log?last=5", "/metrics"):
            assert srv.get(path)[0] == 200, path
    assert s.lines() == lines


# -- the server's limits, in this process ------------------------------------


@pytest.fixture
def inproc(tmp_path: Path, monkeypatch):
    """A ``web.server.Server`` on a thread, over a small storm, with deadlines of a second."""
    from storm_queue.service.storm import Storm
    from storm_queue.web import server as web
    from storm_queue.web.seen import Seen

    monkeypatch.setattr(web, "HEAD_SECONDS", 1.0)
    monkeypatch.setattr(web, "SEND_SECONDS", 2.0)
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    said: list[str] = []
    seen = Seen(lambda: Storm.find(str(root), env=clean_env()))
    srv = web.Server(("127.0.0.1", 0), seen, None, said.append)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield srv, said
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)
        seen.close()


def raw(srv, data: bytes, wait: float = 10.0) -> bytes:
    with socket.create_connection(srv.server_address, timeout=wait) as s:
        s.sendall(data)
        got = b""
        while True:
            more = s.recv(65536)
            if not more:
                return got
            got += more


def test_oversized_requests_are_cut_off(inproc) -> None:
    srv, _ = inproc
    assert raw(srv, b"GET /" + b"a" * 20000 + b" HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 414")
    assert raw(srv, b"GET / HTTP/1.0\r\n" + b"X-Pad: " + b"p" * 8000 + b"\r\n" * 1 + b"X-More: " + b"q" * 9000
               + b"\r\n\r\n").startswith(b"HTTP/1.0 431")
    assert raw(srv, b"GET / HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 200")


def test_a_slow_client_is_cut_off_and_many_are_served_at_once(inproc) -> None:
    from storm_queue.web import server as web

    srv, _ = inproc
    slow = socket.create_connection(srv.server_address, timeout=10)
    start = time.monotonic()
    try:
        for ch in b"GET / HTTP/1.0\r\n":  # a byte every 0.2 s: each read is quick, the whole too slow
            slow.sendall(bytes([ch]))
            time.sleep(0.2)
            if time.monotonic() - start > 1.5:
                break
        got = slow.recv(1024)
    except (BrokenPipeError, ConnectionResetError):
        got = b"HTTP/1.0 408"
    finally:
        slow.close()
    assert got.startswith(b"HTTP/1.0 408") and time.monotonic() - start < 4

    # Long enough that no held worker gives up before the queue is seen full on a loaded machine; closing
    # the idle connections frees the workers (each reads the end of its stream). (Put back by the fixture.)
    web.HEAD_SECONDS = 120.0
    # Connections one by one until the server has queued enough to fill its queue: a burst can overflow the
    # listen backlog, and a connection the kernel completed but the server never accepted fills nothing.
    idle: list[socket.socket] = []
    try:  # every worker held and the queue full: one more is told 503 at once
        while not srv.waiting.full():
            assert len(idle) < 4 * (web.WORKERS + web.QUEUED), f"the queue never filled ({srv.waiting.qsize()})"
            idle.append(socket.create_connection(srv.server_address, timeout=10))
            time.sleep(0.005)
        assert raw(srv, b"GET / HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 503")
    finally:
        for s in idle:
            s.close()
    results: list[bytes] = []

    def fetch() -> None:
        results.append(raw(srv, b"GET /api/list HTTP/1.0\r\n\r\n")[:12])

    wait_for(lambda: raw(srv, b"GET / HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 200"), timeout=60)
    threads = [threading.Thread(target=fetch) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == [b"HTTP/1.0 200"] * 40


def test_a_log_damaged_under_it_answers_503_and_it_serves_on(storm) -> None:
    root = storm("a 1\nb 2\n")
    assert run_cli(root, "bump", "b").returncode == 0
    with serving(str(root)) as srv:
        assert srv.get("/log")[0] == 200
        log = (root / "priority.log").read_bytes()
        with open(root / "priority.log", "r+b") as f:  # damage: line 1 is no longer the line its witness recorded
            f.seek(log.index(b'"seq":1') + 6)
            f.write(b"7")
        wait_for(lambda: srv.get("/")[0] == 503, timeout=5)
        for path in ("/", "/log", "/lane/a"):
            status, _, body = srv.get(path)
            assert status == 503 and b"priority order is unknown" in body, path
        status, _, body = srv.get("/api/list")
        assert status == 503 and json.loads(body)["exit"] == 3
        assert srv.proc.poll() is None


def test_a_storm_that_cannot_be_read_is_not_served(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = run_cli(tmp_path / "empty", "serve", "--port", "0")
    assert done.returncode == 2 and "storm" in done.stderr and "serving" not in done.stderr
    root = make_storm(tmp_path / "storm", "a 1\n", toml="[priority\n")  # not TOML: the order is unknown
    done = run_cli(root, "serve", "--port", "0")
    assert done.returncode == 3 and "Traceback" not in done.stderr


def test_the_log_window_follows_the_log_from_its_checkpoint(storm, monkeypatch) -> None:
    """In this process: the window takes on the lines past its end when they
    chain onto it, reading the log from there, and is the log's last lines
    either way; a log started anew is read whole again."""
    from storm_queue.service.sight import look
    from storm_queue.service.storm import Storm
    from storm_queue.store.directory.log import checkpoint, reader
    from storm_queue.web import seen as seen_mod

    monkeypatch.setattr(checkpoint, "EVERY", 4)
    monkeypatch.setattr(seen_mod, "WINDOW", 10)
    root = storm("a 1\nb 2\n")
    made = lambda: Storm.find(str(root), env=clean_env())  # noqa: E731
    seen = seen_mod.Seen(made)
    walks = []
    full = reader.read

    def counted(path, *args, **kwargs):
        walks.append(kwargs.get("use_checkpoint", True))
        return full(path, *args, **kwargs)

    monkeypatch.setattr(reader, "read", counted)
    try:
        for n in range(25):
            assert run_cli(root, "bump" if n % 2 else "unbump", "b").returncode in (0, 2)
            lines, whole = seen.events(look(made()))
            everything = [e["seq"] for e in (json.loads(x) for x in (root / "priority.log").read_bytes().splitlines())]
            assert [e["seq"] for _, e in lines] == everything[-10:] and whole == (everything[0] == everything[-10:][0])
        assert walks.count(False) == 1  # the whole log once; then only what it grew by
        other = make_storm(root.parent / "other", "a 1\nb 2\n")
        for _ in range(30):  # another log, longer, under the same name: its line at the window's end is another
            assert run_cli(other, "bump", "a").returncode == 0
        for name in ("priority.log", ".priority.log.witness"):
            (root / name).write_bytes((other / name).read_bytes())
        (root / ".priority.log.checkpoint").unlink()
        lines, _ = seen.events(look(made()))
        assert [line for line, _ in lines] == (other / "priority.log").read_bytes().splitlines(keepends=True)[-10:]
        assert walks.count(False) == 2  # read whole again
    finally:
        seen.close()

"""Shared fixtures: build a storm directory, run the real CLI in a subprocess,
and a throwaway PostgreSQL server with a fresh database per test."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def make_storm(root: Path, queue: str = "", *, integrated=(), abandoned=(), finished=(), running=(),
               unattended: bool = False, toml: str | None = None) -> Path:
    """Write a storm: queue.txt, the ledgers, result.json and running markers."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "queue.txt").write_text(queue)
    if integrated:
        (root / "integrated.txt").write_text("".join(s + "\n" for s in integrated))
    if abandoned:
        (root / "abandoned.txt").write_text("".join(s + "\n" for s in abandoned))
    for slug in finished:
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "result.json").write_text('{"status": "ok"}\n')
    for slug in running:
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "running").write_text("")
    if unattended:
        (root / "UNATTENDED").write_text("")
    if toml is not None:
        (root / "storm.toml").write_text(toml)
    return root


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli(root: Path | str | None, *args: str, env: dict[str, str] | None = None,
            cwd: Path | str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m storm_queue ARGS --root ROOT`` as a real process."""
    argv = [sys.executable, "-m", "storm_queue", *args]
    if root is not None:
        argv += ["--root", str(root)]
    return subprocess.run(argv, capture_output=True, text=True, env=env or clean_env(), cwd=cwd, timeout=timeout)


def drain(fd: int) -> bytes:
    """Everything a pseudo-terminal's main side gives until the other side
    closes; ``fd`` is closed afterwards."""
    out = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        out.append(chunk)
    os.close(fd)
    return b"".join(out)


def tree(root: Path, times: bool = False) -> dict[str, tuple]:
    """Every path under ``root``: mode, owner, group, size, bytes (None for
    what is not a regular file) and, with ``times``, mtime: to prove a
    command wrote nothing (a writer's flock of the lock file may touch it)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, data) + ((st.st_mtime_ns,) if times else ())
    return out


def log_events(root: Path, name: str = "priority.log") -> list[dict]:
    path = root / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def storm(tmp_path: Path):
    """A factory: ``storm("a 1\\nb 2\\n", integrated=["b"])`` returns the root."""

    def factory(queue: str = "", **kwargs) -> Path:
        return make_storm(tmp_path / "storm", queue, **kwargs)

    return factory


def write_log(root: Path, bodies, at: str = "2026-11-30T00:00:00.000000Z", by: str = "operator:op",
              name: str = "priority.log") -> int:
    """Write a well-formed, witnessed log of ``bodies`` (an iterable of event
    bodies, each with its ``action``) straight to disk, streaming, without
    the request path: for views and benches that need a long history.
    Returns the number of lines written."""
    from storm_queue.core.framing import digest
    from storm_queue.core.framing import frame

    seq, prev, length = 0, None, 0
    with open(root / name, "wb") as f:
        for body in bodies:
            (event, line), = frame([body], seq, prev, at, by)
            f.write(line)
            seq, prev, length = event["seq"], digest(line), length + len(line)
    witness = {"log": name, "length": length, "seq": seq, "digest": prev, "at": at}
    (root / f".{name}.witness").write_text(json.dumps(witness) + "\n")
    return seq


# -- PostgreSQL: a throwaway server of our own (tests/pgserver.py) -----------

def in_ci() -> bool:
    """Whether this run is CI's: $CI set to anything but "", "0" or "false".
    There a missing server or driver is a failure, never a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def skip_or_fail(reason: str):
    """Skip the test with REASON, or fail it under CI (a skip there is a failure)."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: the database tests must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server():
    """The session's one PostgreSQL server (a ``tests.pgserver.PgServer``,
    with ``fsync = off``: see below), started on first use and stopped at the session's end; the server
    $STORM_QUEUE_TEST_URL names (a superuser URL) when set. Skips, or
    under CI fails, when psycopg or the server binaries are missing."""
    from tests.pgserver import PgServer, find_bindir

    try:
        import psycopg  # noqa: F401
    except ImportError as e:
        skip_or_fail(f"psycopg is not importable ({e}); pip install -e '.[test]' installs it")
    external = os.environ.get("STORM_QUEUE_TEST_URL") or None
    if external is None and find_bindir() is None:
        skip_or_fail("no PostgreSQL server binaries (initdb and pg_ctl: not in `pg_config --bindir` nor "
                    "/usr/lib/postgresql/*/bin); install them with `apt-get install postgresql`, "
                    "or set STORM_QUEUE_TEST_URL to a superuser URL of a server to use")
    # fsync off: no test of the database store pulls the machine's power, and a
    # server killed or restarted with -m immediate keeps what it committed,
    # which the operating system's cache still holds (the tests that kill and
    # restart it prove exactly that). Durability across a power loss is the
    # server's own promise, not the tool's.
    server = PgServer(url=external, settings=None if external else {"fsync": "off"}).start()
    yield server
    server.stop()


@pytest.fixture
def _pg_cleanup(pg_server):
    """What a test's pg_url and pg_role made, dropped after it: the
    databases first (their connections ended), then the roles."""
    made = {"databases": [], "roles": []}
    yield made
    for name in reversed(made["databases"]):
        pg_server.drop_database(name)
    for name in reversed(made["roles"]):
        pg_server.drop_role(name)


@pytest.fixture
def pg_role(pg_server, _pg_cleanup):
    """A factory: ``pg_role(password=None, login=True, prefix="stranger")``
    creates a fresh role (never a superuser, owning nothing) and returns its
    name; dropped after the test. ``pg_server.url_as(pg_url, name)`` is
    the URL for it on the test's database."""

    def factory(password: str | None = None, login: bool = True, prefix: str = "stranger") -> str:
        name = f"{prefix}_{secrets.token_hex(4)}"
        _pg_cleanup["roles"].append(name)
        return pg_server.create_role(name, password=password, login=login)

    return factory


@pytest.fixture
def pg_database(pg_server, _pg_cleanup):
    """A factory: ``pg_database()`` returns the libpq URL of a fresh empty
    database ``storm_<hex>`` owned by a fresh login role ``op_<hex>`` (not
    a superuser; as the owner it may CREATE SCHEMA), connecting as that
    role; each call a new pair, all dropped after the test."""

    def factory() -> str:
        tag = secrets.token_hex(4)
        role, dbname = f"op_{tag}", f"storm_{tag}"
        _pg_cleanup["roles"].append(role)
        pg_server.create_role(role)
        _pg_cleanup["databases"].append(dbname)
        pg_server.create_database(dbname, owner=role)
        return pg_server.url(dbname, role)

    return factory


@pytest.fixture
def pg_url(pg_database) -> str:
    """The URL of the test's own fresh database, as its owner (see pg_database)."""
    return pg_database()


@pytest.fixture(params=["directory", pytest.param("database", marks=pytest.mark.postgresql)])
def store(request, tmp_path: Path):
    """One storm under test, kept by each store in turn (tests/stores.py):
    a ``DirectoryStorm`` under tmp_path, then a ``DatabaseStorm`` in a fresh
    database of the session's throwaway server. A contract test that takes
    ``store`` runs once on each; build it with ``store.make(queue, ...)``."""
    from tests.stores import open_store

    return open_store(request.param, request, tmp_path)


#: what the quick run (``pytest -m "not slow"``, the edit-run loop) leaves
#: out besides the database's tests: processes killed, crashed and raced,
#: the benchmarks' smoke runs, the state machines, the example runner's
#: scripts, the live view in tmux, the 100,000-deep chains
SLOW = ("tests/faults/", "tests/bench_smoke/", "tests/stateful/", "tests/cli/test_runner", "tests/cli/test_watch.py",
        "tests/unit/test_deep.py")


def pytest_collection_modifyitems(items):
    """Every test that uses the server (through any pg_* fixture) carries
    the ``postgresql`` marker, so ``-m "not postgresql"`` leaves them out;
    those and the suites of ``SLOW`` carry ``slow``, so ``-m "not slow"``
    is the quick run."""
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgresql)
        path = Path(str(item.fspath)).resolve()
        ours = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else ""
        if item.get_closest_marker("postgresql") or ours.startswith(SLOW):
            item.add_marker(pytest.mark.slow)

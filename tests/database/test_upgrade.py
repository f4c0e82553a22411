"""Schema upgrades (issue 22, item 5), against a storm made by the release
before the schema recorded its version: storm-queue at 5cbddde, taken
from this repository's history (``git archive``) into a throwaway venv
of its own. Real processes: the earlier release is a program of its own,
and one upgrade is killed mid-transaction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.archive import extract
from tests.conftest import clean_env, run_cli

pytestmark = pytest.mark.postgresql

#: the release before the schema recorded its version
OLD = "5cbddde"
#: this storm-queue's schema version
CURRENT = __import__("storm_queue.store.postgres.queries", fromlist=["schema_version"]).schema_version()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def old_python(tmp_path_factory) -> str:
    """A venv holding storm-queue at ``OLD`` (``release_python``)."""
    return release_python(OLD, tmp_path_factory.mktemp("old-release"))


def release_python(commit: str, work: Path) -> str:
    """A venv in ``work`` holding storm-queue at ``commit`` (its source
    from ``git archive``) and, beside it, the same click and rich this one
    runs with, and psycopg, the earlier releases' own driver (the test extra
    installs it for this alone: nothing here imports it); never the package
    under test: its python."""
    import importlib.util

    import click
    import rich

    psycopg = importlib.util.find_spec("psycopg")
    if psycopg is None:
        pytest.fail(f"psycopg, the driver of the release {commit}, is not installed: pip install -e '.[test]' installs it")

    archive = work / "old.tar"
    made = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), commit],
                          capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        pytest.fail(f"git archive {commit} failed ({made.stderr.strip()}): the test needs this repository's history "
                    "(a full clone, or git fetch --unshallow)")
    extract(archive, work / "src")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], check=True, timeout=120)
    python = work / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    deps = dict.fromkeys(str(Path(m).resolve().parents[1]) for m in (click.__file__, psycopg.origin, rich.__file__))
    Path(purelib, "storm_queue_old.pth").write_text("\n".join([str(work / "src"), *deps]) + "\n")
    where = subprocess.run([str(python), "-c", "import storm_queue; print(storm_queue.__file__)"], cwd=work,
                           capture_output=True, text=True, check=True, timeout=60, env=old_env()).stdout
    assert where.startswith(str(work / "src")), where
    return str(python)


def old_env() -> dict[str, str]:
    """The environment of the earlier release: no path to this checkout."""
    return {k: v for k, v in clean_env().items() if k != "PYTHONPATH"}


def old(python: str, *args: str) -> subprocess.CompletedProcess:
    """The earlier release's command line (run from its venv's folder: a
    working directory holding this checkout would put it first on the path)."""
    done = subprocess.run([python, "-m", "storm_queue", *args], capture_output=True, text=True, env=old_env(),
                          cwd=Path(python).parents[2], timeout=60)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def new(url: str | None, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    done = run_cli(url, *args)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done


def lines(pg_server, url: str) -> list[bytes]:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(url)["dbname"]) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]


def version_table(pg_server, url: str):
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(url)["dbname"]) as conn:
        if conn.execute("SELECT to_regclass('storm_queue.version')").fetchone()[0] is None:
            return None
        return conn.execute("SELECT version FROM storm_queue.version").fetchone()[0]


def view(url: str) -> list[tuple]:
    doc = json.loads(new(url, "list", "--json").stdout)
    return [(r["slug"], r["state"], r["prioritised"], (r["lease"] or {}).get("token")) for r in doc["rows"]]


@pytest.fixture
def made_by_the_old_release(old_python, pg_database, tmp_path) -> str:
    """A database storm the earlier release made and used: lanes, a bump,
    a declaration, a live lease."""
    url = pg_database()
    toml = tmp_path / "storm.toml"
    toml.write_text('[priority]\nsources = ["cron"]\n\n[runner]\nttl_min = 1\n')
    old(old_python, "init", url)
    for args in (("add", "a", "1"), ("add", "b", "2", "--deps", "a"), ("add", "c", "3"), ("declare", str(toml)),
                 ("bump", "c", "--reason", "first"), ("claim", "--holder", "h1", "--ttl", "3600")):
        old(old_python, *args, "--root", url)
    return url


def test_a_storm_the_earlier_release_made_is_read_at_once_written_once_upgraded(
        pg_server, made_by_the_old_release, pg_role) -> None:
    url = made_by_the_old_release
    assert version_table(pg_server, url) is None  # the earlier schema records no version
    before, seen = lines(pg_server, url), view(url)
    assert seen == [("c", "running", True, 1), ("a", "ready", False, None), ("b", "waiting", False, None)]
    # every read works at once
    assert new(url, "next").stdout == "run a 1\n"
    for args in (("why", "c"), ("log",), ("verify",), ("doctor",), ("list",)):
        new(url, *args)
    # every write is refused, exit 2, naming the upgrade, and nothing is written
    for args in (("bump", "a"), ("claim", "--holder", "h2"), ("finish", "c", "--token", "1", "--result", "ok"),
                 ("add", "d", "4"), ("halt", "--reason", "x")):
        refused = new(url, *args, code=2)
        assert "storm-queue upgrade URL" in refused.stderr and "version 0" in refused.stderr, refused.stderr
    assert lines(pg_server, url) == before
    # another role may not upgrade: refused before anything else is looked at, nothing changed
    as_stranger = pg_server.url_as(url, pg_role())
    stranger = new(None, "upgrade", as_stranger, code=1)
    assert "not_operator" in stranger.stderr or "only the operator" in stranger.stderr, stranger.stderr
    assert version_table(pg_server, url) is None and lines(pg_server, url) == before
    # the operator's upgrade: every pending migration, one recorded line naming the versions
    done = json.loads(new(None, "upgrade", url, "--reason", "new release", "--json").stdout)
    assert (done["outcome"], done["recorded"]) == ("done", True), done
    event = json.loads(lines(pg_server, url)[-1])
    assert (event["action"], event["from"], event["to"], event["reason"]) == ("upgrade", 0, CURRENT, "new release")
    assert version_table(pg_server, url) == CURRENT
    again = json.loads(new(None, "upgrade", url, "--json").stdout)
    assert (again["outcome"], again["recorded"]) == ("noop", True), again
    # served as it was: lanes, leases, order, declaration; the chain verifies from line 1
    assert view(url) == seen
    assert json.loads(new(url, "verify", "--json").stdout)["sound"] is True
    assert json.loads(new(url, "bump", "b", "--source", "cron", "--json").stdout)["outcome"] == "done"
    assert json.loads(new(url, "finish", "c", "--token", "1", "--result", "ok", "--json").stdout)["outcome"] == "done"
    assert f"upgrade: the schema from version 0 to {CURRENT}" in new(url, "log").stdout


def test_an_upgrade_killed_midway_leaves_the_old_version_whole(pg_server, made_by_the_old_release) -> None:
    """The upgrade's transaction is held by the state row's lock, which the
    test holds, after migrations ran in it: at migration 0013's drop of the
    trigger that announced every append on the state table (or, with no
    such trigger, at its last write: its line, whose insert check moves the
    log's head); killed there, it never commits. (A row lock, not a table's:
    migrations 0003 and 0004 put triggers on the state and event tables,
    which would wait for a table lock.)"""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    url = made_by_the_old_release
    before, seen = lines(pg_server, url), view(url)
    name = conninfo_to_dict(url)["dbname"]
    with pg_server.admin(name) as holder, pg_server.admin(name) as watcher:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM storm_queue.state FOR UPDATE")  # readers pass; the upgrade's UPDATE waits
        proc = subprocess.Popen([sys.executable, "-m", "storm_queue", "upgrade", url], env=clean_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not (waiting := watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' "
                    "AND application_name = 'storm-queue'", (name,)).fetchone()):  # held by the state row's lock
                assert proc.poll() is None, proc.communicate(timeout=30)
                assert time.monotonic() < deadline, "the upgrade never reached its line"
                time.sleep(0.05)
            # the migration ran in that transaction: the table it created (seen by no one else) is locked by it
            assert watcher.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND locktype = 'relation' AND granted "
                                   "AND mode = 'AccessExclusiveLock'", waiting).fetchone()[0] >= 1
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            holder.execute("ROLLBACK")
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while version_table(pg_server, url) is not None or len(lines(pg_server, url)) != len(before):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert lines(pg_server, url) == before and view(url) == seen
    assert new(url, "bump", "a", code=2)  # still at version 0: still refused
    assert json.loads(new(None, "upgrade", url, "--json").stdout)["outcome"] == "done"


def test_a_schema_newer_than_the_tool_is_refused_naming_both_versions(pg_server, pg_url) -> None:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    new(None, "init", pg_url)
    new(pg_url, "add", "a", "1")
    assert json.loads(new(None, "upgrade", pg_url, "--json").stdout)["outcome"] == "noop"  # init makes it current
    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as conn:
        conn.execute("UPDATE storm_queue.version SET version = %s", (CURRENT + 1,))
    for root, args in ((pg_url, ("list",)), (pg_url, ("next",)), (pg_url, ("bump", "a")), (pg_url, ("log",)),
                       (None, ("upgrade", pg_url))):
        refused = new(root, *args, code=2)
        assert f"schema version {CURRENT + 1}" in refused.stderr and f"this storm-queue's {CURRENT}" in refused.stderr, (args, refused.stderr)


def test_upgrade_finds_its_storm_as_every_command_does(made_by_the_old_release, tmp_path) -> None:
    """Issue 33, item 11: ``upgrade`` without URL upgrades the storm
    ``$STORM_QUEUE_ROOT`` (or ``--root``) names, as every command finds
    its storm; URL and a different --root at once are a usage error."""
    url = made_by_the_old_release
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli(None, "upgrade", "--reason", "found by the environment", "--json",
                   env=clean_env(STORM_QUEUE_ROOT=url), cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["outcome"], json.loads(done.stdout)["action"]) == ("done", "upgrade")
    again = new(url, "upgrade", "--json")  # --root
    assert json.loads(again.stdout)["outcome"] == "noop"
    both = run_cli(url, "upgrade", str(tmp_path), "--json")
    assert both.returncode == 2 and "not both" in json.loads(both.stdout)["message"]

"""A writer that cannot take the writers' lock within --wait gives up,
records nothing and exits 5; readers never wait for the lock."""

from __future__ import annotations

import json

import filelock

from tests.conftest import log_events, make_storm, run_cli


def test_a_held_lock_makes_writers_give_up_with_exit_5_and_readers_go_on(tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert run_cli(root, "bump", "a").returncode == 0
    before = (root / "priority.log").read_bytes()
    with filelock.FileLock(str(root / "priority.log.lock")):
        done = run_cli(root, "bump", "b", "--wait", "0.3", "--json")
        assert done.returncode == 5, done.stderr
        doc = json.loads(done.stdout)
        assert doc["outcome"] == "error" and "busy" in doc["message"]
        listed = run_cli(root, "list", "--json")
        assert listed.returncode == 0
        assert json.loads(listed.stdout)["decision"] == "run a 1"
        assert run_cli(root, "next").stdout == "run a 1\n"
    assert (root / "priority.log").read_bytes() == before
    assert run_cli(root, "bump", "b").returncode == 0
    assert [e["slug"] for e in log_events(root)] == ["a", "b"]


HOLDER = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_busy_names_the_process_that_holds_the_lock(tmp_path):
    """The lock's holder is a real process, which busy names; the commands run in this one."""
    import subprocess
    import sys

    from tests.conftest import clean_env

    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert run_cli(root, "bump", "a").returncode == 0
    before = (root / "priority.log").read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root / "priority.log.lock")],
                              stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert holder.stdout.readline() == "held\n"
        for args in (["bump", "b"], ["unbump", "a"], ["push", "z", "3"], ["reset", "--reason", "r"]):
            done = run_cli(root, *args, "--wait", "0.2")
            assert done.returncode == 5, (args, done.stderr)
            assert "busy" in done.stderr and f"process {holder.pid}" in done.stderr, done.stderr
            assert "nothing was recorded" in done.stderr
            doc = json.loads(run_cli(root, *args, "--wait", "0", "--json").stdout)
            assert doc["outcome"] == "error" and f"process {holder.pid}" in doc["message"]
        assert run_cli(root, "list").returncode == 0
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert (root / "priority.log").read_bytes() == before
    assert "z" not in (root / "queue.txt").read_text()
    assert run_cli(root, "bump", "b").returncode == 0


def test_the_default_wait_is_30_seconds():
    from tests.conftest import run_cli as run

    for verb in ("bump", "push", "unbump", "reset"):
        assert "[default: 30.0" in " ".join(run(None, verb, "--help").stdout.split())

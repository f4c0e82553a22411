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

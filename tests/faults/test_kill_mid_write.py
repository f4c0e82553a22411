"""A writer killed with SIGKILL at the two moments that matter: halfway
through writing its line, and after the line is durable but before the
witness is replaced. Neither leaves an unknown order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from storm_queue.store.directory.log import reader
from tests.conftest import clean_env, log_events, make_storm, run_cli

KILL_IN_WRITE = """
import os, signal, sys
from storm_queue.store.directory.log import writer
real = writer.write_all
def half_then_die(fd, data):
    real(fd, data[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)
writer.write_all = half_then_die
from storm_queue.cli.app import main
main(sys.argv[1:], prog_name="storm-queue")
"""

KILL_BEFORE_WITNESS = """
import os, signal, sys
from storm_queue.store.directory.log import writer
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
writer.replace_atomically = die
from storm_queue.cli.app import main
main(sys.argv[1:], prog_name="storm-queue")
"""


def _killed(script: str, root: Path, *args: str) -> int:
    done = subprocess.run([sys.executable, "-c", script, *args, "--root", str(root)],
                          capture_output=True, env=clean_env(), timeout=60)
    return done.returncode


def _storm(tmp_path: Path) -> Path:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\nc 3 b\n")
    assert run_cli(root, "bump", "a").returncode == 0
    return root


def test_killed_halfway_through_its_line_leaves_a_torn_tail_that_the_next_writer_repairs(tmp_path):
    """A real process: it kills itself with SIGKILL mid-write."""
    root = _storm(tmp_path)
    log_before = (root / "priority.log").read_bytes()
    assert _killed(KILL_IN_WRITE, root, "bump", "c", "--reason", "never acknowledged") == -9
    torn = (root / "priority.log").read_bytes()[len(log_before):]
    assert torn and not torn.endswith(b"\n")

    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0
    doc = json.loads(listed.stdout)
    assert any("torn" in w for w in doc["warnings"])
    assert [r["slug"] for r in doc["rows"] if r["prioritised"]] == ["a"]

    again = run_cli(root, "bump", "c", "--json")
    assert again.returncode == 0, again.stderr
    events = log_events(root)
    assert [e["action"] for e in events] == ["bump", "repair", "bump"]
    assert events[1]["torn"] == len(torn)
    assert (root / events[1]["side"]).read_bytes() == torn
    assert all("never acknowledged" not in json.dumps(e) for e in events)
    state = reader.read(str(root / "priority.log"))
    assert state.warnings == [] and state.torn == 0
    assert state.state.lane == ("a", "b", "c")


def test_killed_after_its_line_but_before_the_witness_leaves_a_log_that_reads(tmp_path):
    """A real process: it kills itself with SIGKILL mid-write."""
    root = _storm(tmp_path)
    assert _killed(KILL_BEFORE_WITNESS, root, "bump", "c") == -9
    events = log_events(root)
    assert [e["action"] for e in events] == ["bump", "bump"]  # durable, though never acknowledged

    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert any("after its witness" in w for w in json.loads(listed.stdout)["warnings"])

    assert run_cli(root, "bump", "a").returncode == 0  # re-witnesses what it found
    state = reader.read(str(root / "priority.log"))
    assert state.warnings == []
    assert (state.witness.seq, state.witness.length) == (3, (root / "priority.log").stat().st_size)

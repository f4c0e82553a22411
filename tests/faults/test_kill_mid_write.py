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


def test_a_batch_killed_halfway_through_its_log_lines_leaves_every_lane_queued(tmp_path):
    """``add --from`` (issue 21, item 5) on a directory storm, killed with
    SIGKILL halfway through writing its log lines (one write, after
    queue.txt's): queue.txt carries every lane of the batch (it was
    written, and made durable, first); the log counts the whole lines the
    write left past the witness, as it does for any request, so a prefix
    of the batch's adds, in order, and ignores the part of a line after
    them (a torn tail, which the next writer keeps aside). A retry is
    refused naming the first lane already queued. (A database's batch is
    one transaction: all or nothing.)
    A real process: it kills itself with SIGKILL mid-write."""
    root = _storm(tmp_path)
    lanes = tmp_path / "lanes.txt"
    lanes.write_text("".join(f"n{k} {k}\n" for k in range(5)))  # half of five lines ends in the third
    log_before = (root / "priority.log").read_bytes()
    assert _killed(KILL_IN_WRITE, root, "add", "--from", str(lanes), "--reason", "never acknowledged") == -9
    written = (root / "priority.log").read_bytes()[len(log_before):]
    assert written.count(b"\n") == 2 and not written.endswith(b"\n")  # two whole lines, then a part of one

    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert any("torn" in w for w in doc["warnings"])
    assert [r["slug"] for r in doc["rows"]] == ["a", "b", "c", "n0", "n1", "n2", "n3", "n4"]
    state = reader.read(str(root / "priority.log"), keep_events=True)
    assert [(e["action"], e.get("slug")) for e in state.events] == [("bump", "a"), ("add", "n0"), ("add", "n1")]

    again = run_cli(root, "add", "--from", str(lanes), "--json")
    assert again.returncode == 2, again.stdout
    assert json.loads(again.stdout)["code"] == "duplicate_slug" and "line 1: slug n0 is already queued" in again.stdout
    events = log_events(root)
    assert [e["action"] for e in events] == ["bump", "add", "add", "repair", "refused"]
    assert (root / events[3]["side"]).read_bytes() == written[written.rindex(b"\n") + 1:]
    assert run_cli(root, "verify").returncode == 0

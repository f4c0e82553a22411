"""Issue 33 item 3: a hold survives everything a halt survives, on a
directory storm (the database's part, migrate and upgrade, is in
tests/database/test_hold_database.py; writers killed mid-write in the crash
harness). The hold is a fold of the log, so: a checkpoint written after it
keeps it, and a replay from line 1 (the checkpoint deleted) gives it back;
``reset --keep-intact`` keeps a hold whose line is in the prefix kept and
names the hold it loses (a line whose chain breaks); a hold on an adopted storm survives a later adopt
(a recorded no-op)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from storm_queue.core import fold
from storm_queue.store.directory.log import checkpoint
from tests.conftest import log_events, make_storm, run_cli

LOG, CHECKPOINT = "priority.log", ".priority.log.checkpoint"


def ok(root: Path, *args: str) -> dict:
    done = run_cli(root, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def states(root: Path) -> dict[str, tuple[str, str | None]]:
    """Each lane's state, and the reason of its hold (None: not held)."""
    return {r["slug"]: (r["state"], (r["held"] or {}).get("reason")) for r in ok(root, "list")["rows"]}


def test_a_checkpoint_keeps_the_hold_and_a_replay_from_line_one_gives_it_back(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nc 3\nd 4\n")
    ok(root, "hold", "a", "--reason", "vendor")
    for k in range(checkpoint.EVERY + 2):  # enough lines after it for a writer to write a checkpoint
        ok(root, "bump" if k % 2 == 0 else "unbump", "c", "--reason", f"churn {k}")
    cp = checkpoint.parse(str(root / LOG), (root / CHECKPOINT).read_bytes())
    assert cp.seq > 1 and cp.state.run("a").held == fold.Act(1, log_events(root)[0]["at"], log_events(root)[0]["by"],
                                                              "vendor")
    from_checkpoint = states(root)
    assert from_checkpoint["a"] == ("held", "vendor") and from_checkpoint["b"][0] == "waiting"
    assert run_cli(root, "next").stdout == "run c 3\n"
    audit = ok(root, "verify")
    assert audit["sound"] is True and audit["checkpoint"]["state"] == "agrees"
    (root / CHECKPOINT).unlink()
    assert states(root) == from_checkpoint  # the whole log, replayed from line 1, says the same
    assert fold.replay(log_events(root)).run("a").held == cp.state.run("a").held


def test_reset_keep_intact_keeps_a_hold_in_the_prefix_and_names_the_one_it_loses(tmp_path: Path) -> None:
    pristine = make_storm(tmp_path / "pristine", "a 1\nb 2\nc 3\n")
    ok(pristine, "hold", "a", "--reason", "kept")  # line 1
    ok(pristine, "bump", "c")  # line 2
    ok(pristine, "hold", "b", "--reason", "lost")  # line 3
    for cut, held in ((3, {"a": ("held", "kept"), "b": ("ready", None)}), (2, {"a": ("held", "kept"), "b": ("ready", None)}),
                      (1, {"a": ("ready", None), "b": ("ready", None)})):
        root = tmp_path / f"cut-{cut}"
        shutil.copytree(pristine, root)
        lines = (root / LOG).read_bytes().splitlines(keepends=True)
        at = lines[cut - 1].index(b'"at":"') + len(b'"at":"') + 3  # a digit of its year changed: only the chain tells
        line = bytearray(lines[cut - 1])
        line[at] ^= 0x01
        (root / LOG).write_bytes(b"".join(lines[:cut - 1]) + bytes(line) + b"".join(lines[cut:]))
        assert run_cli(root, "list").returncode == 3
        dry = ok(root, "reset", "--keep-intact", "--reason", "cut short", "--dry-run")
        done = ok(root, "reset", "--keep-intact", "--reason", "cut short")
        assert dry["lost"] == done["lost"] and done["kept"] == cut - 1
        if cut == 3:
            assert [(lost["action"], lost["slug"]) for lost in done["lost"]] == [("hold", "b")]
            said = run_cli(root, "reset", "--keep-intact", "--reason", "again")  # nothing to reset now
            assert said.returncode == 2
        got = states(root)
        assert {slug: got[slug] for slug in held} == held, cut
        if held["a"][0] == "held":
            # the token floor after a reset is above every token the lost lines could hold
            assert run_cli(root, "claim", "--holder", "r1").stdout.startswith("run c 3 " if cut > 2 else "run b 2 ")


def test_a_hold_on_an_adopted_storm_survives_a_later_adopt(tmp_path: Path) -> None:
    from tests import oldlog

    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    oldlog.write(root, [oldlog.bump("b", "2", [], ["b"])])
    assert ok(root, "adopt", "--reason", "moving the storm")["outcome"] == "done"
    ok(root, "hold", "b", "--reason", "not yet")
    again = ok(root, "adopt", "--reason", "again")
    assert again["outcome"] == "noop"
    listed = {r["slug"]: r for r in ok(root, "list")["rows"]}
    assert (listed["b"]["prioritised"], listed["b"]["state"], listed["b"]["held"]["reason"]) == (True, "held", "not yet")
    assert run_cli(root, "next").stdout == "run a 1\n"

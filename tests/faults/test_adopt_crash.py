"""An adopt killed with SIGKILL before each of its durable steps (every
write, fsync, link, rename, replace and unlink it makes), one trial a step
until an adopt runs to its end: after each kill the storm is either not
adopted (the old log where it was, byte for byte, no log of this tool's
format, commands answering exit 3 naming adopt) or adopted (the lane as the
old log replays it, readable at once); and a second adopt then finishes or
rolls back, leaving exactly one adoption that verifies."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests import oldlog
from tests.conftest import clean_env, log_events, make_storm, run_cli

#: the child: count the durable calls and SIGKILL itself before the STEP-th
KILL_AT_STEP = """
import os, signal, sys
step = int(sys.argv.pop(1))
count = [0]
for name in ("write", "fsync", "link", "rename", "replace", "unlink", "ftruncate"):
    real = getattr(os, name)
    def wrap(*args, _real=real, **kwargs):
        count[0] += 1
        if count[0] == step:
            os.kill(os.getpid(), signal.SIGKILL)
        return _real(*args, **kwargs)
    setattr(os, name, wrap)
from storm_queue.cli import main
main(sys.argv[1:], prog_name="storm-queue")
"""

LANE = [s for s, *_ in oldlog.SAMPLE_LANE]


def _adopt_killed_at(root: Path, step: int) -> int:
    done = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(step), "adopt", "--reason", "move", "--root", str(root)],
                          capture_output=True, env=clean_env(), timeout=60)
    return done.returncode


def _lane(root: Path) -> list[str]:
    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [r["slug"] for r in json.loads(listed.stdout)["rows"] if r["prioritised"]]


def test_adopt_killed_at_every_step_leaves_the_old_log_untouched_or_the_adoption_complete(tmp_path):
    states = {"not adopted": 0, "adopted": 0}
    step = 0
    while True:
        step += 1
        assert step < 60, "the adopt never ran to its end"
        root = make_storm(tmp_path / f"step{step}", oldlog.QUEUE)
        old = oldlog.write(root, oldlog.SAMPLE)
        code = _adopt_killed_at(root, step)
        if code == 0:
            break  # the step is past the adopt's last durable call
        assert code == -signal.SIGKILL, code
        log = (root / "priority.log").read_bytes()
        if log == old:
            states["not adopted"] += 1
            listed = run_cli(root, "list")
            assert listed.returncode == 3 and "storm-queue adopt --reason TEXT" in listed.stderr, listed.stderr
        else:
            states["adopted"] += 1
            events = log_events(root)
            assert [e["action"] for e in events] == ["adopt"] and events[0]["seq"] == 1
            assert (root / events[0]["kept"]).read_bytes() == old
            assert _lane(root) == LANE  # readable at once, even before its witness
        # the next adopt finishes the adoption, or rolls back and adopts
        again = run_cli(root, "adopt", "--reason", "again", "--json")
        assert again.returncode == 0, (step, again.stdout, again.stderr)
        events = log_events(root)
        adopts = [e for e in events if e["action"] == "adopt" and not e.get("noop")]
        assert len(adopts) == 1 and events[0] is adopts[0], events
        assert (root / adopts[0]["kept"]).read_bytes() == old
        assert [p.name for p in root.glob("priority.log.adopted-*")] == [adopts[0]["kept"]]
        assert len(list(root.glob(".priority.log.witness.adopted-*"))) == 1
        assert not (root / ".priority.log.adopting").exists()
        assert _lane(root) == LANE
        verified = run_cli(root, "verify")
        assert verified.returncode == 0, (step, verified.stdout)
    print(f"steps {step - 1} killed, states {states}")
    # the kills fell on both sides of the commit
    assert states["not adopted"] >= 3 and states["adopted"] >= 1, states

"""End to end (issue 2 item 9): ``examples/runner.sh`` runs lanes in exactly
the order ``list`` predicted, including a push made while a lane runs. Since
issue 6 the runner claims, renews and finishes leases; several runners at
once are in ``test_runner_claim.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env, log_events, make_storm, run_cli

RUNNER = REPO / "examples" / "runner.sh"
STORM_QUEUE = f"{sys.executable} -m storm_queue"


def runner_env(log: Path, **extra: str) -> dict[str, str]:
    return clean_env(**{"STORM_QUEUE": STORM_QUEUE, "RUNNER_LOG": str(log), "RUNNER_POLL": "0.05", **extra})


def start_runner(root: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(RUNNER), str(root)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 90) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"runner.sh did not finish in {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"runner.sh exited {proc.returncode} before {path} appeared\n{out}\n{err}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{path} never appeared")
        time.sleep(0.02)


def listed(root: Path) -> dict:
    done = run_cli(root, "list", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_runner_script_is_executable_bash_with_strict_mode() -> None:
    assert os.access(RUNNER, os.X_OK)
    text = RUNNER.read_text()
    assert text.startswith("#!/usr/bin/env bash") or text.startswith("#!/bin/bash")
    assert "set -euo pipefail" in text
    assert subprocess.run(["bash", "-n", str(RUNNER)], capture_output=True).returncode == 0


def test_runner_runs_lanes_in_the_order_list_predicted(tmp_path: Path) -> None:
    queue = "a 1\nb 2 a\nc 3\nd 4 b\ne 5\nf 6 c,e\ng 7\nh 8 lost\ni 9 done\n"
    root = make_storm(tmp_path / "storm", queue, integrated=["done"], abandoned=["lost"])
    for slug in ("f", "d"):
        assert run_cli(root, "bump", slug).returncode == 0
    predicted = listed(root)
    order = [r["slug"] for r in predicted["rows"]]
    assert order == ["c", "e", "f", "a", "b", "d", "g", "h", "i"]  # the bumps took effect
    blocked = [r["slug"] for r in predicted["rows"] if r["state"] == "blocked"]
    assert blocked == ["h"]
    expected = [s for s in order if s not in blocked]
    log = tmp_path / "ran.txt"
    code, out, err = finish(start_runner(root, runner_env(log, LANE_COMMAND='printf "%s\\n" "$STORM_QUEUE_LANE" > seen')))
    assert code == 0, err
    assert lines(log) == expected, err
    # every lane ran with STORM_QUEUE_LANE set to its slug, in its own directory
    for slug in expected:
        marks = root / "lanes" / slug / ".qwenstorm"
        assert (root / "lanes" / slug / "seen").read_text() == slug + "\n"
        # storm-queue's `finish --result ok` writes result.json now (issue 6),
        # under the lane's one claim's token
        result = json.loads((marks / "result.json").read_text())
        assert (result["status"], result["token"]) == ("ok", 1)
        assert not (marks / "running").exists()
    # one claim per lane, in the predicted order, each finished ok with its token
    events = log_events(root)
    assert [(e["slug"], e["token"]) for e in events if e["action"] == "claim"] == [(s, 1) for s in expected]
    assert [(e["slug"], e["result"]) for e in events if e["action"] == "finish"] == [(s, "ok") for s in expected]
    # the blocked lane never ran: next marked it, the runner reviewed it as abandoned
    assert json.loads((root / "lanes" / "h" / ".qwenstorm" / "result.json").read_text())["blocked_on"] == "lost"
    assert lines(root / "integrated.txt") == ["done", *expected]
    assert lines(root / "abandoned.txt") == ["lost", "h"]
    assert run_cli(root, "next").stdout == "empty\n"
    assert out == ""


def test_failed_lane_is_retried_then_quarantined_and_what_needs_it_never_runs(tmp_path: Path) -> None:
    # Changed by issue 6: the runner no longer abandons a failed lane. It
    # reports `finish --result failed`, `claim` hands the lane out again until
    # its `[runner] attempts` are spent, and then quarantines it: the lane
    # holds what depends on it (the storm is not empty, the runner waits)
    # until the operator unparks it or, as here, abandons it by hand. Since
    # issue 13 a failed lane waits a growing delay (a schedule) before its
    # next attempt, and c runs meanwhile (test_runner_waits.py has more).
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nc 3\n", toml="[runner]\nattempts = 3\n")
    run_sh = root / "lanes" / "a" / "run.sh"
    run_sh.parent.mkdir(parents=True)
    run_sh.write_text("#!/usr/bin/env bash\nexit 7\n")
    run_sh.chmod(0o755)
    log = tmp_path / "ran.txt"
    proc = start_runner(root, runner_env(log, RUNNER_RETRY_DELAY="1"))
    try:
        deadline = time.monotonic() + 120
        # c runs while a waits out its delay; on a loaded machine a's delay may end first, so only the count is fixed
        while sorted(lines(log)) != ["a", "a", "a", "c"] or not any(e["action"] == "quarantine" for e in log_events(root)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, lines(log)
            time.sleep(0.05)
        rows = {r["slug"]: r for r in listed(root)["rows"]}
        assert rows["a"]["state"] == "quarantined"
        assert rows["b"]["state"] == "waiting"
        assert listed(root)["decision"] == "wait"
        assert proc.poll() is None  # a quarantined lane keeps the storm from being empty
        events = log_events(root)
        assert [(e["slug"], e["token"], e["attempt"]) for e in events if e["action"] == "claim" and e["slug"] == "a"] == [
            ("a", 1, 1), ("a", 2, 2), ("a", 3, 3)]
        ran = lines(log)
        assert [(e["slug"], e["token"], e["result"]) for e in events if e["action"] == "finish"] == [
            (slug, ran[:n + 1].count(slug), "ok" if slug == "c" else "failed") for n, slug in enumerate(ran)]
        assert [e["slug"] for e in events if e["action"] == "schedule"] == ["a", "a"]
        assert [(e["slug"], e["attempts"]) for e in events if e["action"] == "quarantine"] == [("a", 3)]
        assert not (root / "lanes" / "a" / ".qwenstorm" / "result.json").exists()
    finally:
        # the reviewer gives up on a: b is blocked, the runner settles it, the storm empties
        with open(root / "abandoned.txt", "a") as f:
            f.write("a\n")
    code, _, err = finish(proc)
    assert code == 0, err
    assert sorted(lines(log)) == ["a", "a", "a", "c"]
    assert lines(root / "abandoned.txt") == ["a", "b"]
    assert lines(root / "integrated.txt") == ["c"]
    assert json.loads((root / "lanes" / "b" / ".qwenstorm" / "result.json").read_text())["blocked_on"] == "a"


def test_runner_stops_on_an_unknown_order(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    (root / "priority.log").write_bytes(b"damaged\n")
    log = tmp_path / "ran.txt"
    code, _, err = finish(start_runner(root, runner_env(log)))
    assert code == 3
    assert "storm-queue reset" in err
    assert lines(log) == []


def test_push_while_a_lane_runs_runs_right_after_it(tmp_path: Path) -> None:
    queue = "a 1\nb 2\nc 3\nd 4 b\n"
    root = make_storm(tmp_path / "storm", queue, integrated=["base"])
    assert run_cli(root, "bump", "c").returncode == 0
    before = [r["slug"] for r in listed(root)["rows"]]
    assert before == ["c", "a", "b", "d"]
    flags = tmp_path / "flags"
    flags.mkdir()
    # Lane c, the first to run, tries to push from inside (refused: it carries
    # STORM_QUEUE_LANE), then waits for the test's go-ahead.
    run_sh = root / "lanes" / "c" / "run.sh"
    run_sh.parent.mkdir(parents=True)
    run_sh.write_text(
        "#!/usr/bin/env bash\n"
        "set -u\n"
        f'$STORM_QUEUE push sneaky 99 --reason "from inside a lane"; echo $? > "{flags}/push-exit"\n'
        f'while [ ! -e "{flags}/go" ]; do sleep 0.02; done\n'
    )
    run_sh.chmod(0o755)
    log = tmp_path / "ran.txt"
    proc = start_runner(root, runner_env(log))
    try:
        wait_for(root / "lanes" / "c" / ".qwenstorm" / "running", proc)
        wait_for(flags / "push-exit", proc)
        # the lane's own push was refused and recorded, and appended nothing
        assert (flags / "push-exit").read_text().strip() == "1"
        refused = log_events(root)[-1]
        assert (refused["action"], refused["code"], refused["by"]) == ("refused", "lane_process", 'lane:"c"')
        assert "sneaky" not in (root / "queue.txt").read_text()
        # the operator pushes while c runs
        pushed = run_cli(root, "push", "z", "26", "--deps", "base", "--json")
        assert pushed.returncode == 0, pushed.stderr
        assert json.loads(pushed.stdout)["moved"] == ["z"]
        predicted = listed(root)
        rows = predicted["rows"]
        assert (rows[0]["slug"], rows[0]["state"]) == ("c", "running")
        assert rows[1]["slug"] == "z"
        assert predicted["decision"] == "run z 26"  # next after whatever is running
        expected = [r["slug"] for r in rows]
        assert expected == ["c", "z", "a", "b", "d"]
        assert lines(log) == ["c"]
    finally:
        (flags / "go").touch()
    code, _, err = finish(proc)
    assert code == 0, err
    assert lines(log) == expected, err
    assert lines(log)[1] == "z", "the pushed lane runs right after the running lane"
    assert "z 26 base\n" in (root / "queue.txt").read_text()
    assert run_cli(root, "next").stdout == "empty\n"

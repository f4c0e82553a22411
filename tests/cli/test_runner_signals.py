"""Issue 20 ("the second day"), items 6, 7 and 11, the runner's half:
``examples/runner.sh`` on SIGINT or SIGTERM stops the lane's process (and
what it started), releases its lease (recorded, by that holder) and exits
130 or 143; it renews at least every third of the TTL and stops the lane's
process when a renew says the lane was cancelled; ``--help`` prints its
usage and exits 0; every line it prints names its holder.

Every test here is a real process: the runner script, its signals and the
lane's processes are what is under test. Each waits on events (a file the
lane writes, a line on the log), never on a fixed time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_runner import RUNNER, finish, lines, run_sh, runner_env, said, start_runner, wait_for
from tests.children import alive
from tests.conftest import clean_env

SIGNALS = [pytest.param(signal.SIGINT, 130, False, id="SIGINT"), pytest.param(signal.SIGTERM, 143, False, id="SIGTERM"),
           # Ctrl-C at a terminal: SIGINT to the runner's whole process group (the renewer, the lane, storm-queue)
           pytest.param(signal.SIGINT, 130, True, id="Ctrl-C")]


def hanging_run_sh(store, flags: Path, slug: str) -> None:
    """SLUG's run.sh: write its pid, start a child that sleeps for long
    and write the child's pid, then wait for it: a lane that ends only
    when it is stopped."""
    run_sh(store, slug,
           "#!/usr/bin/env bash\n"
           f'echo $$ > "{flags}/{slug}.pid"\n'
           "sleep 3600 &\n"
           f'echo $! > "{flags}/{slug}.kid.tmp" && mv "{flags}/{slug}.kid.tmp" "{flags}/{slug}.kid"\n'
           "wait\n")


def gone(pids: list[int], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def lane_pids(flags: Path, slug: str) -> list[int]:
    return [int((flags / f"{slug}.{what}").read_text()) for what in ("pid", "kid")]


def kill_left(pids: list[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def said_by(err: str, holder: str) -> None:
    """Every line the runner printed starts by naming HOLDER."""
    assert err, "the runner said nothing"
    for line in err.splitlines():
        assert line.startswith(f"runner {holder}: "), line


@pytest.mark.parametrize(("signum", "code", "group"), SIGNALS)
def test_a_signal_stops_the_lanes_processes_releases_its_lease_and_exits_130_or_143(store, tmp_path, signum, code,
                                                                                      group):
    store.make("a 1\nb 2\n", toml="[runner]\nttl_min = 1\n")
    flags = tmp_path / "flags"
    flags.mkdir()
    hanging_run_sh(store, flags, "a")
    log = tmp_path / "ran.txt"
    proc = start_runner(store.root, runner_env(log, store, RUNNER_HOLDER="sig-r", RUNNER_GRACE="20"))
    pids: list[int] = []
    try:
        wait_for(flags / "a.kid", proc)
        pids = lane_pids(flags, "a")
        assert all(alive(p) for p in pids)
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)  # the runner alone, as kill(1) or a service manager sends it
        status, out, err = finish(proc)
        assert status == code, err
        assert gone(pids), "the lane's processes outlived the runner"
    finally:
        kill_left(pids)
    name = signal.Signals(signum).name
    events = store.events()
    claim = next(e for e in events if e["action"] == "claim")
    release = events[-1]
    assert (release["action"], release["slug"], release["token"], release["holder"], release["reason"]) == (
        "release", "a", claim["token"], "sig-r", f"runner sig-r: stopped by {name}")
    assert claim["holder"] == "sig-r"
    assert not [e for e in events if e["action"] in ("finish", "refused", "expire")]
    seen = store.cli("why", "a", "--json")
    assert '"state": "ready"' in seen.stdout and '"lease": null' in seen.stdout
    assert lines(log) == ["a"]  # b never started
    assert out == ""
    said_by(err, "sig-r")
    assert f"runner sig-r: stopped by {name}: released the lease on a (token 1)" in err
    assert store.cli("claim", "--holder", "next").stdout == "run a 1 2\n"  # claimable at once


def test_a_signal_while_the_runner_waits_exits_130_and_releases_nothing(store, tmp_path):
    from tests.cli.test_halt import wrapper

    store.make("a 1\n", toml="[runner]\nttl_min = 1\n")
    assert store.cli("claim", "--holder", "other").stdout == "run a 1 1\n"  # the only lane runs elsewhere
    answers = tmp_path / "answers"
    proc = start_runner(store.root, runner_env(tmp_path / "ran.txt", store, RUNNER_HOLDER="idle-r",
                                               STORM_QUEUE=str(wrapper(tmp_path)), ANSWERS=str(answers)))
    deadline = time.monotonic() + 60
    while len(lines(answers)) < 1:  # it was told wait: it waits in claim --wait (test_runner_wakes.py)
        assert proc.poll() is None and time.monotonic() < deadline, said(proc)
        time.sleep(0.05)
    assert set(lines(answers)) == {"wait"}
    proc.send_signal(signal.SIGINT)
    status, out, err = finish(proc)
    assert status == 130, err
    assert err.endswith("runner idle-r: stopped by SIGINT\n")
    said_by(err, "idle-r")
    assert [e["action"] for e in store.events()].count("claim") == 1
    assert not [e for e in store.events() if e["action"] == "release"]


def without_lease(tmp_path: Path) -> Path:
    """A storm-queue that does not know the ``lease`` command (as one older
    than the runner would not): a usage error, exit 2, as click gives it."""
    path = tmp_path / "sq-old.sh"
    path.write_text(f'#!/usr/bin/env bash\nif [ "$1" = lease ]; then echo "Error: No such command \'lease\'." >&2; '
                    f'exit 2; fi\nexec "{sys.executable}" -m storm_queue "$@"\n')
    path.chmod(0o755)
    return path


def test_a_cancel_heard_at_the_renew_when_the_lease_cannot_be_waited_on(store, tmp_path):
    """The fallback: a storm-queue without ``lease`` (the runner says once
    that a cancel is heard at the renew). The renewals come at least every
    third of the TTL (RUNNER_RENEW asks for fewer; the lease would lapse),
    so the cancel is heard at the next one: its renew is refused
    lane_cancelled, and the runner stops the lane's processes, reports
    nothing for it, and runs the next lane."""
    store.make("a 1\nb 2\n", toml="[runner]\nttl_min = 1\n")
    flags = tmp_path / "flags"
    flags.mkdir()
    hanging_run_sh(store, flags, "a")
    log = tmp_path / "ran.txt"
    proc = start_runner(store.root, runner_env(log, store, RUNNER_HOLDER="c-r", RUNNER_TTL="3", RUNNER_RENEW="100",
                                               STORM_QUEUE=str(without_lease(tmp_path))))
    pids: list[int] = []
    try:
        wait_for(flags / "a.kid", proc)
        pids = lane_pids(flags, "a")
        deadline = time.monotonic() + 120
        while len([e for e in store.events() if e["action"] == "renew"]) < 2:  # kept alive past its 3 s TTL
            assert proc.poll() is None and time.monotonic() < deadline, said(proc)
            time.sleep(0.05)
        assert not [e for e in store.events() if e["action"] == "expire"]
        cancelled = store.cli("cancel", "a", "--reason", "wrong branch")
        assert cancelled.returncode == 0, cancelled.stderr
        status, out, err = finish(proc)
        assert status == 0, err  # b ran, and the storm is empty
        assert gone(pids), "the cancelled lane's processes outlived its cancel"
    finally:
        kill_left(pids)
    events = store.events()
    at = next(i for i, e in enumerate(events) if e["action"] == "cancel")
    after = [(e["action"], e.get("requested"), e.get("code"), e["by"]) for e in events[at + 1:] if e.get("slug") == "a"]
    assert after == [("refused", "renew", "lane_cancelled", events[at]["by"])], after  # then nothing more of a
    assert not [e for e in events if e["action"] in ("finish", "release") and e["slug"] == "a"]
    assert [(e["action"], e["slug"]) for e in events if e["action"] == "finish"] == [("finish", "b")]
    assert store.settled("abandoned") == ["a"] and store.settled("integrated") == ["b"]
    assert lines(log) == ["a", "b"]
    said_by(err, "c-r")
    assert "runner c-r: cannot wait on the lease of a (storm-queue lease, exit 2): a cancel is heard at its next renew" in err
    assert "runner c-r: a was cancelled (its renew was refused lane_cancelled): stopping its work" in err
    assert "runner c-r: stopped the work of a: the lane was cancelled (storm-queue why a --root " in err


def test_every_line_names_the_default_holder_this_host_and_the_runners_pid(store, tmp_path):
    store.make("a 1\n")
    env = runner_env(tmp_path / "ran.txt", store)
    del env["RUNNER_HOLDER"]
    proc = start_runner(store.root, env)
    status, _, err = finish(proc)
    assert status == 0, err
    holder = next(e for e in store.events() if e["action"] == "claim")["holder"]
    assert holder.endswith(f"-{proc.pid}") and len(holder) > len(f"-{proc.pid}")
    said_by(err, holder)


def test_help_prints_the_usage_and_exits_0(tmp_path):
    done = subprocess.run(["bash", str(RUNNER), "--help"], capture_output=True, text=True, env=clean_env(),
                          cwd=tmp_path, timeout=30)
    assert (done.returncode, done.stderr) == (0, "")
    assert "usage: examples/runner.sh [--once] [--help] [STORM_ROOT]" in done.stdout
    for word in ("RUNNER_HOLDER", "RUNNER_TTL", "RUNNER_GRACE", "SIGINT", "SIGTERM", "lane_cancelled", "Exit status"):
        assert word in done.stdout, word
    assert not list(tmp_path.iterdir())  # it did nothing else

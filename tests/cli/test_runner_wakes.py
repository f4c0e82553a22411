"""Issue 21, items 4 and 8, the runner's half: ``examples/runner.sh`` waits
for work with ``claim --wait RUNNER_WAIT`` instead of sleeping (a lane added
meanwhile starts at once; a signal ends the waiting claim and the runner at
once, not after RUNNER_WAIT), and asks again after exit 5 (busy, or the
server unreachable: nothing changed) with a pause that doubles from
RUNNER_POLL up to RUNNER_BUSY_MAX.

Every test here is a real process: the runner script, the storm-queue
processes it starts and the signals it gets are what is under test. Each
waits on events (a process, a file, a line the runner says), never on a
fixed time; RUNNER_POLL and RUNNER_WAIT are set far beyond the tests'
timeouts, so a runner that slept or waited them out would fail the test."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.children import alive
from tests.cli.test_runner import finish, lines, runner_env, start_runner
from tests.cli.test_runner_signals import gone, said_by
from tests.cli.test_runner_waits import start_saying, until

#: far past every timeout below: a runner that sleeps or waits this long fails the test
LONG = "3600"


def waiting_claims(session: int) -> list[int]:
    """The storm-queue processes of SESSION (the runner's) that are a
    ``claim --wait``, oldest first."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[3]) == session and fields[0] != "Z" and b"storm_queue" in argv and b"claim" in argv \
                and b"--wait" in argv:
            found.append(int(entry))
    return sorted(found)


def claim_waits(proc, seen: tuple[int, ...] = ()) -> int:
    """The pid of the runner's waiting claim, once there is one not in SEEN."""
    found: list[int] = []

    def there() -> bool:
        found[:] = [p for p in waiting_claims(proc.pid) if p not in seen]
        return bool(found)

    until(there, proc, timeout=60)
    return found[0]


def test_a_runner_waiting_in_claim_wait_starts_a_lane_added_at_once(store, tmp_path):
    store.make("a 1\n", toml="[runner]\nslots = 2\n")
    assert store.cli("claim", "--holder", "other").stdout == "run a 1 1\n"  # the only lane runs elsewhere
    log = tmp_path / "ran.txt"
    said = tmp_path / "said.txt"
    proc = start_saying(store.root, runner_env(log, store, RUNNER_POLL=LONG, RUNNER_WAIT="600"), said)
    first = claim_waits(proc)
    assert store.cli("add", "b", "2").returncode == 0
    until(lambda: lines(log) == ["b"], proc, timeout=60)
    claim_waits(proc, seen=(first,))  # b is done; a still runs elsewhere: it waits again
    assert store.cli("finish", "a", "--token", "1", "--result", "ok").returncode == 0
    status, _, _ = finish(proc, timeout=60)  # it reviews a, then finds the storm empty
    err = said.read_text()
    assert status == 0, err
    said_by(err, "r1")
    assert "runner r1: running b (issue 2, token 1)" in err
    assert err.endswith("runner r1: storm is empty\n")
    assert sorted(store.settled()) == ["a", "b"]
    assert [e["holder"] for e in store.events() if e["action"] == "claim"] == ["other", "r1"]


@pytest.mark.parametrize(("signum", "code", "group"), [
    pytest.param(signal.SIGTERM, 143, False, id="SIGTERM"),
    # Ctrl-C at a terminal: SIGINT to the runner's process group; the waiting claim runs in a group of its own
    pytest.param(signal.SIGINT, 130, True, id="Ctrl-C")])
def test_a_signal_while_a_runner_waits_in_claim_wait_ends_it_at_once(store, tmp_path, signum, code, group):
    store.make("a 1\n")
    assert store.cli("claim", "--holder", "other").stdout == "run a 1 1\n"
    before = store.events()
    proc = start_runner(store.root, runner_env(tmp_path / "ran.txt", store, RUNNER_POLL=LONG, RUNNER_WAIT=LONG))
    claim = claim_waits(proc)
    try:
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        status, out, err = finish(proc, timeout=60)  # not RUNNER_WAIT: the claim was ended, not waited out
        assert status == code, err
        assert gone([claim], timeout=30), "the waiting claim outlived the runner"
    finally:
        if alive(claim):
            os.kill(claim, signal.SIGKILL)
    name = signal.Signals(signum).name
    assert out == ""
    said_by(err, "r1")
    assert err.endswith(f"runner r1: stopped by {name}\n")
    assert store.events() == before  # the waiting claim recorded nothing; nothing was released


@pytest.mark.postgresql
def test_a_runner_backs_off_while_the_server_is_down_and_runs_the_lane_when_it_is_back(pg_server, pg_url, tmp_path):
    """The session's server is stopped for the block and started again
    after it (``PgServer.stopped``), committed data kept, for the tests that follow."""
    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    store.make("a 1\n")
    log = tmp_path / "ran.txt"
    said = tmp_path / "said.txt"
    env = runner_env(log, store, RUNNER_POLL="0.05", RUNNER_BUSY_MAX="0.2", RUNNER_WAIT=LONG)
    with pg_server.stopped():
        proc = start_saying(pg_url, env, said)
        until(lambda: said.read_text().count(" again in ") >= 5, proc, timeout=60)
        assert lines(log) == []
    status, _, _ = finish(proc, timeout=60)
    err = said.read_text()
    assert status == 0, err
    said_by(err, "r1")
    # its first request (whoami: may it settle?) and then its claims are asked again, the pause doubling
    pauses = [line.rsplit(" ", 1)[1] for line in err.splitlines() if " again in " in line]
    assert pauses[:5] == ["0.05s", "0.1s", "0.2s", "0.2s", "0.2s"]  # doubled, up to RUNNER_BUSY_MAX
    assert set(pauses[5:]) <= {"0.2s"}
    assert err.count("runner r1: storm-queue: cannot connect to the database storm ") == len(pauses)
    assert ("runner r1: storm busy or unreachable (exit 5, nothing changed); asking who it is again in 0.05s") in err
    assert lines(log) == ["a"]
    assert store.settled() == ["a"]
    assert [(e["action"], e["slug"]) for e in store.events() if e["action"] in ("claim", "finish")] == [
        ("claim", "a"), ("finish", "a")]  # exit 5 recorded nothing: one claim, once the server was back
    assert next(e for e in store.events() if e["action"] == "claim")["holder"] == "r1"
    assert err.endswith("runner r1: storm is empty\n")

"""``examples/runner.sh`` when a lane fails or nothing can run (issue 13
item 10): a failed lane waits a growing delay while other lanes run (since
issue 33 the storm's own backoff, ``[runner] retry_delay``, recorded on the
failed finish's line: the runner schedules nothing); a storm held up by the operator is said once, naming each
lane and the command that unblocks it; ``--once`` carries out one decision
and exits, for cron. Every test runs the real script; those that take
``store`` run the same body on a directory storm and on a database storm
(tests/stores.py). Running markers with no lease are the directory's alone,
so the tests of them stay there."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.children import end, start
from tests.cli.test_runner import RUNNER, finish, lines, listed, root_word, run_sh, runner_env, said
from tests.conftest import clean_env, log_events, make_storm, run_cli

STUCK = "runner r1: nothing can run, and nothing will change by itself: the storm waits for you"


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def failing(store, slug: str) -> Path:
    return run_sh(store, slug, "#!/usr/bin/env bash\nexit 7\n")


def start_saying(root: Path | str, env: dict[str, str], said_to: Path, *flags: str) -> subprocess.Popen:
    """The runner, its stderr going to ``said_to`` (so a test can wait for a
    line, not a fixed time); in a session of its own with its signals at
    their defaults, ended whole with the test (tests/children.py)."""
    with open(said_to, "w") as err_file:
        return start(["bash", str(RUNNER), *flags, str(root)], env=env, stdout=subprocess.DEVNULL, stderr=err_file,
                     text=True)


def until(what, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if proc.poll() is not None:
            out, err = said(proc)
            pytest.fail(f"runner.sh exited {proc.returncode}\n{out}\n{err}")
        if time.monotonic() > deadline:
            out, err = said(proc)
            pytest.fail(f"timed out\n{out}\n{err}")
        time.sleep(0.05)


def run_once(root: Path | str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``runner.sh --once ROOT`` to its end, as ``subprocess.run`` answers it; past ``timeout`` seconds its
    whole session is killed and the test fails."""
    proc = start(["bash", str(RUNNER), "--once", str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True)
    out, err, in_time = end(proc, timeout)
    if not in_time:
        pytest.fail(f"runner.sh --once did not finish in {timeout} s\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_failed_lane_waits_a_growing_delay_while_other_lanes_run_and_a_quarantine_is_said_once(store, tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\nb 2 a\nc 3\n", toml="[runner]\nattempts = 4\nretry_delay = 2\nretry_max = 4\n")
    root = store.root
    failing(store, "a")
    log = tmp_path / "ran.txt"
    said_to = tmp_path / "runner.err"
    proc = start_saying(root, runner_env(log, store), said_to)
    try:
        until(lambda: STUCK in said_to.read_text(), proc)
        time.sleep(1.0)  # twenty polls at RUNNER_POLL=0.05: the runner must not repeat itself
        assert proc.poll() is None, "a quarantined lane keeps the storm from being empty"
        events = store.events()
        # each failure of a but the last carried the storm's backoff: 2, 4, then 4 (retry_max) seconds on (2 s,
        # not less: c is claimed before a's first delay ends even when each command takes half a second)
        failed = [e for e in events if e["action"] == "finish" and e["slug"] == "a"]
        assert [e["result"] for e in failed] == ["failed"] * 4 and "not_before" not in failed[3]  # the 4th: quarantined
        assert [round(seconds(e["not_before"]) - seconds(e["at"])) for e in failed[:3]] == [2, 4, 4]
        assert not [e for e in events if e["action"] == "schedule"]  # the runner schedules nothing
        # and no attempt of a was claimed before its time
        claims = [e for e in events if e["action"] == "claim" and e["slug"] == "a"]
        assert len(claims) == 4
        for finished, claim in zip(failed, claims[1:]):
            assert seconds(claim["at"]) >= seconds(finished["not_before"])
        # c ran while a waited, right after a's first failure
        assert lines(log) == ["a", "c", "a", "a", "a"]
        assert listed(root)["decision"] == "wait"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
    finish(proc)
    err = said_to.read_text()
    said = err.splitlines()
    assert said.count(STUCK) == 1, err
    at = said.index(STUCK)
    word = root_word(root)
    assert said[at + 1] == (f"runner r1:   a: quarantined after 4 attempts; last attempt: token 4 failed, note \"exit 7\"; "
                            f"look at its attempts (storm-queue why a --root {word}), "
                            f"then: storm-queue unpark a --reason TEXT --root {word}")
    assert said[at + 2] == "runner r1:   b: waits on a (quarantined)"
    assert said[at + 3] == "runner r1: waiting for the storm to change (claim --wait 60); this is said once, until it changes"
    first = failed[0]["not_before"]
    assert f"runner r1: a failed (exit 7, token 1); attempt 1 of 4, it will be claimed again after {first}" in said


def test_unparking_the_lane_it_named_lets_the_runner_go_on_to_an_empty_storm(store, tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\nb 2 a\n", toml="[runner]\nattempts = 1\nretry_delay = 1\n")
    root = store.root
    script = failing(store, "a")
    log = tmp_path / "ran.txt"
    said = tmp_path / "runner.err"
    proc = start_saying(root, runner_env(log, store), said)
    until(lambda: STUCK in said.read_text(), proc)  # it has said so before the operator acts
    script.write_text("#!/usr/bin/env bash\nexit 0\n")
    unpark = run_cli(root, "unpark", "a", "--reason", "fixed the flaky test")
    assert unpark.returncode == 0, unpark.stderr
    code, _, _ = finish(proc)
    err = said.read_text()
    assert code == 0, err
    assert lines(log) == ["a", "a", "b"]
    assert err.count(STUCK) == 1
    assert "runner r1: storm is empty" in err


def test_without_a_declared_retry_delay_a_failed_lane_is_claimed_again_at_once(store, tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\n", toml="[runner]\nattempts = 2\n")
    root = store.root
    failing(store, "a")
    before = len(store.events())
    result = run_once(root, runner_env(tmp_path / "ran.txt", store))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["runner r1: running a (issue 1, token 1)",
                                          "runner r1: a failed (exit 7, token 1); attempt 1 of 2, it will be claimed again"]
    assert [e["action"] for e in store.events()[before:]] == ["claim", "finish"]
    assert listed(root)["decision"] == "run a 1"


@pytest.mark.parametrize("name", ["RUNNER_RETRY_DELAY", "RUNNER_RETRY_MAX"])
def test_the_runners_own_retry_settings_are_gone_and_it_says_so(store, tmp_path, name):
    """Issue 33: the storm's own backoff replaced them; one set is said to be
    read no more (the declaration's keys named), and the runner goes on."""
    store.make("a 1\n", toml="[runner]\nretry_delay = 30\n")
    failing(store, "a")
    result = run_once(store.root, runner_env(tmp_path / "ran.txt", store, **{name: "5"}))
    assert result.returncode == 0, result.stderr
    said = result.stderr.splitlines()
    assert said[0] == (f"runner r1: {name} is no longer read: a failed lane waits the storm's own backoff, [runner] "
                       "retry_delay and retry_max in storm.toml (declared with storm-queue declare on a database storm)")
    finish = store.events()[-1]
    assert finish["action"] == "finish" and round(seconds(finish["not_before"]) - seconds(finish["at"])) == 30


def test_what_holds_the_storm_up_is_named_with_what_unblocks_it(tmp_path):
    """A dependency queue.txt does not know, finished lanes left to a batch
    review, and a running marker with no lease: each named with its fix.
    Directory only: a running marker with no lease is a file a database
    storm cannot hold (the test below is this one on both stores, without
    the marker).
    A real process: examples/runner.sh, a shell script calling the installed command."""
    root = make_storm(tmp_path / "storm", "a 1 zz\nb 2\nc 3 b\nm 4\n", finished=["b"], running=["m"], unattended=True)
    result = run_once(root, runner_env(tmp_path / "ran.txt"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        STUCK,
        "runner r1:   a: waits on zz (unknown to queue.txt): add the missing lane to queue.txt, or correct the line of a",
        f"runner r1:   b: finished, awaits review (UNATTENDED is set, so runners leave it to you): settle it by adding b to "
        f"{root}/integrated.txt or {root}/abandoned.txt",
        "runner r1:   c: waits on b (finished, awaits review)",
        "runner r1:   m: running by a marker with no lease (a runner that takes no leases runs it); if no runner is "
        f"working on it: storm-queue recover m --force --reason TEXT --root {root}",
        "runner r1: exiting (--once)",
    ]
    assert log_events(root) == [], "a wait leases nothing"


def test_what_holds_the_storm_up_is_named_with_what_unblocks_it_on_either_store(store, tmp_path):
    """A dependency the storm does not know and finished lanes left to a
    batch review (UNATTENDED; on a database storm ``[runner] unattended =
    true``, recorded with ``storm-queue declare``), each named with the
    command that unblocks it there.
    A real process: examples/runner.sh, a shell script calling the installed command."""
    root = store.root
    if store.kind == "directory":
        store.make("a 1 zz\nb 2\nc 3 b\n", finished=["b"], unattended=True)
    else:
        store.make("a 1 zz\nb 2\nc 3 b\n", finished=["b"])
        declaration = tmp_path / "storm.toml"
        declaration.write_text("[runner]\nunattended = true\n")
        declared = run_cli(root, "declare", str(declaration))
        assert declared.returncode == 0, declared.stderr
    before = store.events()
    result = run_once(root, runner_env(tmp_path / "ran.txt", store))
    assert result.returncode == 0, result.stderr
    word = root_word(root)
    if store.kind == "directory":
        fixes = ["add the missing lane to queue.txt, or correct the line of a",
                 f"(UNATTENDED is set, so runners leave it to you): settle it by adding b to {root}/integrated.txt or "
                 f"{root}/abandoned.txt"]
    else:
        fixes = [f"add the missing lane (storm-queue add SLUG ISSUE --root {word})",
                 f"(unattended is declared, so runners leave it to you): settle it: storm-queue settle b integrated "
                 f"--root {word} (or abandoned)"]
    assert result.stderr.splitlines() == [
        STUCK,
        f"runner r1:   a: waits on zz (unknown to queue.txt): {fixes[0]}",
        f"runner r1:   b: finished, awaits review {fixes[1]}",
        "runner r1:   c: waits on b (finished, awaits review)",
        "runner r1: exiting (--once)",
    ]
    assert store.events() == before, "a wait leases nothing"


def test_a_wait_on_a_running_lane_or_a_scheduled_one_says_nothing(store, tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\nb 2 a\nc 3\n")
    root = store.root
    assert run_cli(root, "claim", "--holder", "elsewhere").stdout.startswith("run a 1 ")
    assert run_cli(root, "schedule", "c", "--not-before", "+1h").returncode == 0
    result = run_once(root, runner_env(tmp_path / "ran.txt", store))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_once_runs_one_lane_and_exits_leaving_the_rest(store, tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\nb 2\n")
    root = store.root
    log = tmp_path / "ran.txt"
    first = run_once(root, runner_env(log, store))
    assert first.returncode == 0, first.stderr
    assert lines(log) == ["a"] and store.settled("integrated") == ["a"]
    assert listed(root)["decision"] == "run b 2"
    assert run_once(root, runner_env(log, store)).returncode == 0
    assert lines(log) == ["a", "b"]
    last = run_once(root, runner_env(log, store))
    assert (last.returncode, last.stderr) == (0, ""), "an empty storm is nothing worth a cron mail"
    assert run_cli(root, "next").stdout == "empty\n"


def test_once_settles_the_lanes_to_review_and_exits(store, tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\nb 2\n", finished=["a"])
    root = store.root
    result = run_once(root, runner_env(tmp_path / "ran.txt", store))
    assert result.returncode == 0, result.stderr
    assert "runner r1: settled a: integrated" in result.stderr
    assert store.settled("integrated") == ["a"]
    assert lines(tmp_path / "ran.txt") == [] and listed(root)["decision"] == "run b 2"


def test_an_unknown_option_is_a_usage_error(tmp_path):
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    result = subprocess.run(["bash", str(RUNNER), "--twice", str(tmp_path)], capture_output=True, text=True,
                            env=clean_env(RUNNER_HOLDER="r1"), timeout=60)
    assert result.returncode == 2
    assert result.stderr == "runner r1: unknown option --twice (usage: runner.sh [--once] [--help] [STORM_ROOT])\n"


def test_a_ready_lane_held_back_by_a_marker_with_no_lease_in_the_only_slot_is_stuck(tmp_path):
    """A ready lane changes nothing by itself when the slot it waits for is
    held by a running marker that no claim or recover takes back. Directory
    only: a running marker with no lease is a file a database storm cannot hold.
    A real process: examples/runner.sh, a shell script calling the installed command."""
    root = make_storm(tmp_path / "storm", "m 1\nx 2\n", running=["m"])
    assert listed(root)["decision"] == "run x 2", "next knows no slots; claim does"
    result = run_once(root, runner_env(tmp_path / "ran.txt"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        STUCK,
        "runner r1:   m: running by a marker with no lease (a runner that takes no leases runs it); if no runner is "
        f"working on it: storm-queue recover m --force --reason TEXT --root {root}",
        "runner r1:   x: ready, but every [runner] slot is taken",
        "runner r1: exiting (--once)",
    ]


def test_a_lane_marked_blocked_by_the_claim_that_answered_wait_is_not_said_to_hold_the_storm_up(store, tmp_path):
    """The claim that marks a lane blocked answers on the state before the
    mark (``wait``; the mark shows from the next call, contract section 3),
    so a runner that then finds the lane finished must not say the storm
    waits for the operator: the next claim answers ``review``.
    A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("h 8 lost\n", abandoned=["lost"])
    root = store.root
    first = run_once(root, runner_env(tmp_path / "ran.txt", store))
    assert (first.returncode, first.stderr) == (0, "")
    assert listed(root)["decision"] == "review h"
    second = run_once(root, runner_env(tmp_path / "ran.txt", store))
    assert second.returncode == 0, second.stderr
    assert second.stderr == "runner r1: settled h: abandoned\n"
    assert store.settled("abandoned") == ["lost", "h"]
    assert store.result("h")["blocked_on"] == "lost"


@pytest.mark.postgresql
def test_a_database_url_s_password_is_never_said(pg_server, pg_url, tmp_path):
    """The commands the runner tells the operator name the storm's URL with
    its password hidden, as storm-queue shows it.
    A real process: examples/runner.sh, a shell script calling the installed command."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    store.make("a 1 zz\n")
    with_password = pg_server.url_as(pg_url, conninfo_to_dict(pg_url)["user"], password="pw-s3cret")
    assert ":pw-s3cret@" in with_password and "?" in with_password
    with_password += "&password=pw-s3cret"  # and as a parameter, as libpq also reads it
    result = run_once(with_password, runner_env(tmp_path / "ran.txt", store))
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(STUCK + "\n"), result.stderr
    assert "pw-s3cret" not in result.stderr
    shown = with_password.replace(":pw-s3cret@", ":***@").replace("&password=pw-s3cret", "&password=***")
    assert f"--root {root_word(shown)})" in result.stderr

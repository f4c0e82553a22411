"""A cancel stops the work now (issue 33, item 4): ``examples/runner.sh``
under a 600 s TTL, whose next renew is 200 s away, hears the cancel of the
lane it runs by waiting on its lease (``storm-queue lease --wait``), ends
the lane's whole process group (its own process, a child that ignores
SIGTERM, a grandchild), records nothing more for the lane, says so once,
and runs the next lane. A lease lost otherwise (the operator's ``recover
--force``) stops the work the same way. On a database storm the runner
runs as a runner role, as every runner host does.

Real processes: the runner, its lane's processes and the cancel are what
is under test. The timeouts only catch a hang (the runner's next renew is
200 s away, past them); bench/cancel.py measures the latency."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.children import alive
from tests.cli.test_runner import finish, lines, run_sh, runner_env, said, start_runner, wait_for
from tests.cli.test_runner_signals import gone, kill_left, said_by
from tests.conftest import run_cli

TTL = "[runner]\nttl = 600\n"
#: what catches a hang: far below the 200 s to the runner's next renew, far above the 5 s a cancel may take
WITHIN = 60


def stubborn_run_sh(store, flags: Path, slug: str) -> None:
    """SLUG's run.sh: the first time, it starts a child that ignores SIGTERM
    and a child that starts a grandchild, writes the pids (its own first),
    and waits; run again, it succeeds at once."""
    run_sh(store, slug,
           "#!/usr/bin/env bash\n"
           f'[ ! -e "{flags}/{slug}.pids" ] || exit 0\n'
           "(trap '' TERM; exec sleep 3600) &\n"
           "deaf=$!\n"
           f"bash -c 'sleep 3600 & echo $! > \"{flags}/{slug}.grand\"; wait' &\n"
           "kid=$!\n"
           f'until [ -s "{flags}/{slug}.grand" ]; do sleep 0.05; done\n'
           f'echo "$$ $deaf $kid $(cat "{flags}/{slug}.grand")" > "{flags}/{slug}.tmp"\n'
           f'mv "{flags}/{slug}.tmp" "{flags}/{slug}.pids"\n'
           "wait\n")


def pids_of(flags: Path, slug: str) -> list[int]:
    return [int(p) for p in (flags / f"{slug}.pids").read_text().split()]


def run_until_stopped(store, tmp_path: Path, root: str, *stop: tuple[str, ...], **env: str):
    """The runner on ROOT with a 600 s lease on a (whose work hangs) and b
    to run next; once a's processes run, the operator's STOP commands, each
    a real process; its exit status, stderr, the events, the lanes it ran."""
    flags = tmp_path / "flags"
    flags.mkdir()
    stubborn_run_sh(store, flags, "a")
    log = tmp_path / "ran.txt"
    proc = start_runner(root, runner_env(log, store, RUNNER_HOLDER="c-r", **env))
    pids: list[int] = []
    try:
        wait_for(flags / "a.pids", proc, WITHIN)
        pids = pids_of(flags, "a")
        assert all(alive(p) for p in pids)
        claim = next(e for e in store.events() if e["action"] == "claim")
        assert claim["ttl"] == 600, claim
        for args in stop:
            done = run_cli(store.root, *args, process=True)
            assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + WITHIN
        while any(alive(p) for p in pids):  # the stubborn child goes too, not at a renew 200 s away
            assert time.monotonic() < deadline, ("the lane's processes outlived the stop", said(proc))
            time.sleep(0.05)
        status, _, err = finish(proc, WITHIN)
        assert gone(pids)
    finally:
        kill_left(pids)
    return status, err, store.events(), lines(log)


def test_a_cancel_ends_the_lanes_whole_process_group_at_once_and_the_runner_goes_on(store, tmp_path):
    store.make("a 1\nb 2\n", toml=TTL)
    status, err, events, ran = run_until_stopped(store, tmp_path, store.root, ("cancel", "a", "--reason", "wrong branch"))
    assert status == 0, err  # b ran, and the storm is empty
    assert ran == ["a", "b"]
    cancel = next(e for e in events if e["action"] == "cancel")
    of_a = [e["action"] for e in events[events.index(cancel) + 1:] if e.get("slug") == "a"]
    assert of_a == [], of_a  # nothing more for a: no renew refused, no finish, no release
    assert [(e["action"], e["slug"]) for e in events if e["action"] == "finish"] == [("finish", "b")]
    assert store.settled("abandoned") == ["a"]
    said_by(err, "c-r")
    stopped = [line for line in err.splitlines() if "a was cancelled" in line or "the lane was cancelled" in line]
    assert stopped == [f'runner c-r: stopped the work of a: the lane was cancelled by {cancel["by"]} at {cancel["at"]} '
                       '("wrong branch"); a is settled abandoned'], err  # said once
    assert "renew" not in err


def test_a_lease_lost_to_a_forced_recover_stops_the_work_too(store, tmp_path):
    store.make("a 1\nb 2\n", toml=TTL)
    status, err, events, ran = run_until_stopped(store, tmp_path, store.root, ("recover", "a", "--force", "--reason", "moved"))
    assert status == 0, err
    assert ran == ["a", "a", "b"]
    assert "runner c-r: lost the lease on a (token 1): ended at " in err
    assert "by the operator's recover --force; stopped its work, and reports nothing for it" in err
    recover = next(e for e in events if e["action"] == "recover")
    later = [(e["action"], e.get("token")) for e in events[events.index(recover) + 1:] if e.get("slug") == "a"
             and e["action"] != "settle"]  # (a database storm's runner settles with a request)
    assert later == [("claim", 2), ("finish", 2)], later  # nothing under token 1; a ran again, anew


@pytest.mark.postgresql
def test_a_runner_role_hears_the_operators_cancel_at_once(pg_server, pg_url, pg_role, tmp_path):
    from tests.cli.test_runner_roles import granted_runner, storm

    store = storm(pg_url, tmp_path, "a 1\nb 2\n", TTL + "unattended = true\n")
    role, url = granted_runner(pg_server, store, pg_role, "host")
    status, err, events, ran = run_until_stopped(store, tmp_path, url, ("cancel", "a", "--reason", "not now"))
    assert status == 0, err
    assert ran == ["a", "b"]
    assert [e["by"] for e in events if e["action"] == "claim"] == [f"runner:{role}"] * 2
    assert not [e for e in events if e["action"] == "refused"]
    assert "runner c-r: stopped the work of a: the lane was cancelled by operator:" in err

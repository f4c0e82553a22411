"""Issue 6 item 9 (and the runner half of item 1): two copies of
``examples/runner.sh`` at once against one storm with ``[runner] slots = 2``
run every lane exactly once, in the order ``list`` predicted; killing one
runner mid-lane leads to recovery once its lease expires, and the dead
runner's late ``finish`` is refused ``stale_fence``; a lane that outlives its
TTL keeps its lease by renewing it.

How the order is made deterministic without timing: with two runners, a
runner that comes back for a lane while the next lane in run order waits on
a dependency still running elsewhere would rightly pass it over, so the claim
order would depend on who is faster. Here every dependency sits at least two
places before the lane that needs it, and each lane's work is gated: lane i
ends only once lane i-1 is integrated and lane i+1 has started. So lane i
and lane i+1 always run at the same time (both slots are used), lanes end in
run order, and whenever a runner claims, everything before the lane it gets
is integrated or running under the other runner's lease: the first ready
lane is always the next one in the predicted order. The gates wait on
events, never on the clock; the only sleeps in these tests let leases
expire.

Every test runs the same body on a directory storm and on a database storm
(the ``store`` fixture, tests/stores.py); the gates ask storm-queue itself
(``why``, ``list --json``), so they read either store alike.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from tests.children import end, kill_session, stop
from tests.cli.test_runner import finish, lines, listed, run_sh, runner_env, said, start_runner, wait_for
from tests.conftest import run_cli

GATE_TIMEOUT = 180  # seconds a gated lane waits before it fails loudly instead of hanging


def gated_run_sh(store, flags: Path, slug: str, prev: str | None, nxt: str | None) -> None:
    """SLUG's run.sh: say it started, then wait until PREV is integrated
    (as ``why`` says) and NXT has started; record how many lanes were
    running at that moment (as ``list --json`` says)."""
    count = f"{sys.executable} -c 'import json, sys; print(sum(r[\"state\"] == \"running\" for r in json.load(sys.stdin)[\"rows\"]))'"
    run_sh(store, slug,
           "#!/usr/bin/env bash\n"
           "set -u\n"
           f'flags="{flags}"\n'
           f'root="{store.root}"\n'
           f'prev="{prev or ""}"\n'
           f'nxt="{nxt or ""}"\n'
           'touch "$flags/$STORM_QUEUE_LANE.started"\n'
           f"deadline=$((SECONDS + {GATE_TIMEOUT}))\n"
           "integrated() {\n"
           '    $STORM_QUEUE why "$prev" --root "$root" --json |\n'
           """        grep -q '^{"slug": "[^"]*", "known": true, "state": "settled", "status": "integrated"'\n"""
           "}\n"
           'while { [ -n "$nxt" ] && [ ! -e "$flags/$nxt.started" ]; } || { [ -n "$prev" ] && ! integrated; }; do\n'
           '    if [ "$SECONDS" -ge "$deadline" ]; then echo "gate of $STORM_QUEUE_LANE timed out" >&2; exit 9; fi\n'
           "    sleep 0.05\n"
           "done\n"
           # both this lane and the next are running now, and nothing else
           f'$STORM_QUEUE list --json --root "$root" | {count} > "$flags/$STORM_QUEUE_LANE.running"\n')


# Run order after the bumps: b f e a d c h g. Every dependency is at least two
# places before what needs it (e needs b, c needs a, h needs e, g needs d).
QUEUE = "a 1\nb 2\nd 4\nc 3 a\ne 5 b\nh 8 e,base\nf 6\ng 7 d\n"
PREDICTED = ["b", "f", "e", "a", "d", "c", "h", "g"]


def test_two_runners_with_two_slots_run_every_lane_once_in_the_predicted_order(store, tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make(QUEUE, integrated=["base"], toml="[runner]\nslots = 2\nttl = 60\nttl_min = 1\n")
    root = store.root
    for slug in ("b", "f", "e"):
        done = run_cli(root, "bump", slug)
        assert done.returncode == 0, done.stderr
    predicted = listed(root)
    order = [r["slug"] for r in predicted["rows"]]
    assert order == PREDICTED
    assert {r["state"] for r in predicted["rows"]} == {"ready", "waiting"}
    flags = tmp_path / "flags"
    flags.mkdir()
    for i, slug in enumerate(order):
        gated_run_sh(store, flags, slug, order[i - 1] if i else None, order[i + 1] if i + 1 < len(order) else None)
    before = len(store.events())

    logs = [tmp_path / "ran-r1.txt", tmp_path / "ran-r2.txt"]
    procs = [start_runner(root, runner_env(log, store, RUNNER_HOLDER=f"r{n}"))
             for n, log in enumerate(logs, start=1)]
    results = [finish(proc, timeout=300) for proc in procs]
    for code, out, err in results:
        assert code == 0, err
        assert out == ""

    # every lane ran exactly once, by one runner or the other
    ran = lines(logs[0]) + lines(logs[1])
    assert sorted(ran) == sorted(order), results
    # one claim per lane, each with token 1, in exactly the predicted order
    events = store.events()[before:]
    claims = [e for e in events if e["action"] == "claim"]
    assert [c["slug"] for c in claims] == order
    assert [c["token"] for c in claims] == [1] * len(order)
    assert not [e for e in events if e["action"] in ("expire", "refused")], events
    # both runners worked, taking turns: lane i and lane i+1 ran at the same time
    holders = [c["holder"] for c in claims]
    assert set(holders) == {"r1", "r2"}
    assert all(h1 != h2 for h1, h2 in zip(holders, holders[1:])), holders
    assert lines(logs[0]) == [c["slug"] for c in claims if c["holder"] == "r1"]
    assert lines(logs[1]) == [c["slug"] for c in claims if c["holder"] == "r2"]
    # two lanes were running at once (the slots were used, never exceeded)
    assert [(flags / f"{s}.running").read_text().strip() for s in order] == ["2"] * (len(order) - 1) + ["1"]

    # each lane finished under its own token, was settled once, in run order
    for slug in order:
        result = store.result(slug)
        assert (result["completed"], result["status"], result["token"]) == (True, "ok", 1)
        if store.kind == "directory":
            assert not (store.lanes_dir / slug / ".qwenstorm" / "running").exists()
    assert store.settled("integrated") == ["base", *order]
    assert store.settled("abandoned") == []
    assert run_cli(root, "next").stdout == "empty\n"
    verified = run_cli(root, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def stuck_once_run_sh(store, flags: Path, slug: str) -> None:
    """First attempt: hang (until killed; its pid in attempt-1.pid). Second: wait for the test's go."""
    run_sh(
        store, slug,
        "#!/usr/bin/env bash\n"
        "set -u\n"
        f'flags="{flags}"\n'
        'if [ ! -e "$flags/attempt-1" ]; then\n'
        '    echo $$ > "$flags/attempt-1.pid"\n'
        '    touch "$flags/attempt-1"\n'
        "    exec sleep 3600\n"
        "fi\n"
        'touch "$flags/attempt-2"\n'
        f"deadline=$((SECONDS + {GATE_TIMEOUT}))\n"
        'while [ ! -e "$flags/go" ]; do\n'
        '    if [ "$SECONDS" -ge "$deadline" ]; then exit 9; fi\n'
        "    sleep 0.02\n"
        "done\n"
        "echo done > output\n"
    )


def test_killing_a_runner_mid_lane_leads_to_recovery_after_its_lease_expires(store, tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    # The storm's default lease is long; the doomed runner asks for a short one.
    store.make("slow 1\na 2\nb 3\nc 4 a\n", toml="[runner]\nslots = 2\nttl = 60\nttl_min = 1\n")
    root = store.root
    flags = tmp_path / "flags"
    flags.mkdir()
    stuck_once_run_sh(store, flags, "slow")
    doomed_log, rescuer_log = tmp_path / "ran-doomed.txt", tmp_path / "ran-rescuer.txt"

    # The doomed runner claims `slow` (first in run order) and keeps renewing
    # its 5-second lease while the lane hangs.
    doomed = start_runner(root, runner_env(doomed_log, store, RUNNER_HOLDER="doomed", RUNNER_TTL="5", RUNNER_RENEW="0.5"))
    try:
        wait_for(flags / "attempt-1", doomed)
        claim = [e for e in store.events() if e["action"] == "claim"]
        assert [(c["slug"], c["token"], c["holder"]) for c in claim] == [("slow", 1, "doomed")]
        lease = json.loads(run_cli(root, "why", "slow", "--json").stdout)["lease"]
        assert (lease["holder"], lease["token"]) == ("doomed", 1)
        if store.kind == "directory":  # the running marker, which a database storm has not
            marker = json.loads((store.lanes_dir / "slow" / ".qwenstorm" / "running").read_text())
            assert (marker["holder"], marker["token"]) == ("doomed", 1)

        # The rescuer takes the second slot and runs the other lanes meanwhile.
        rescuer = start_runner(root, runner_env(rescuer_log, store, RUNNER_HOLDER="rescuer", RUNNER_POLL="0.3"))
        try:
            deadline = time.monotonic() + 120
            while sorted(lines(rescuer_log)) != ["a", "b", "c"]:
                assert rescuer.poll() is None, said(rescuer)
                assert time.monotonic() < deadline, lines(rescuer_log)
                time.sleep(0.05)
            # `slow` is still doomed's: its renewals kept the lease alive
            assert not (flags / "attempt-2").exists()
            assert lines(doomed_log) == ["slow"]

            # Kill the doomed runner, its renewer and its lane's work at once
            # (the lane runs in a process group of its own, in the runner's session).
            kill_session(doomed.pid)
            end(doomed, 30)
            assert doomed.returncode == -signal.SIGKILL

            # Once the lease expires, the rescuer's next claim records the
            # expiry and takes `slow` with a greater token.
            wait_for(flags / "attempt-2", rescuer, timeout=120)
            events = store.events()
            kinds = [(e["action"], e.get("slug"), e.get("token")) for e in events
                     if e["action"] in ("claim", "expire", "finish")]
            first, expiry, second = (kinds.index(("claim", "slow", 1)), kinds.index(("expire", "slow", 1)),
                                     [i for i, k in enumerate(kinds) if k[:2] == ("claim", "slow") and k[2] != 1])
            assert len(second) == 1, kinds
            assert first < expiry < second[0], kinds
            reclaim = [e for e in events if e["action"] == "claim" and e["slug"] == "slow"][-1]
            assert reclaim["token"] > 1 and reclaim["holder"] == "rescuer"
            token = reclaim["token"]

            # The dead runner's late reports, with its old token, are refused
            # and recorded, and change nothing.
            late = run_cli(root, "finish", "slow", "--token", "1", "--result", "ok", "--json")
            assert late.returncode == 2, late.stdout + late.stderr
            doc = json.loads(late.stdout)
            assert doc["code"] == "stale_fence" and doc["recorded"] is True, doc
            assert store.result("slow") is None
            assert json.loads(run_cli(root, "why", "slow", "--json").stdout)["lease"]["token"] == token
            if store.kind == "directory":
                assert json.loads((store.lanes_dir / "slow" / ".qwenstorm" / "running").read_text())["token"] == token
            late = run_cli(root, "renew", "slow", "--token", "1", "--json")
            assert late.returncode == 2, late.stdout + late.stderr
            assert json.loads(late.stdout)["code"] == "stale_fence"
            refusals = [e for e in store.events() if e["action"] == "refused"]
            assert [e["code"] for e in refusals] == ["stale_fence", "stale_fence"]
        finally:
            (flags / "go").touch()
        code, out, err = finish(rescuer, timeout=120)
        assert code == 0, err
        assert out == ""
    finally:
        stop(doomed)  # its session: the runner's group and the lane's own, which holds the runner's streams too

    # the recovered lane finished under the rescuer's token and was settled once
    result = store.result("slow")
    assert (result["completed"], result["status"], result["token"]) == (True, "ok", token)
    assert (store.lanes_dir / "slow" / "output").read_text() == "done\n"
    assert lines(rescuer_log)[-1] == "slow"
    assert sorted(store.settled("integrated")) == ["a", "b", "c", "slow"]
    events = store.events()
    claims = [(e["slug"], e["token"]) for e in events if e["action"] == "claim"]
    assert sorted(claims) == [("a", 1), ("b", 1), ("c", 1), ("slow", 1), ("slow", token)]
    # the lane's only finish is the rescuer's, after the expiry of token 1
    slow = [(e["action"], e["token"]) + ((e["result"],) if e["action"] == "finish" else ())
            for e in events if e.get("slug") == "slow" and e["action"] in ("claim", "expire", "finish")]
    assert slow == [("claim", 1), ("expire", 1), ("claim", token), ("finish", token, "ok")]
    assert run_cli(root, "next").stdout == "empty\n"
    verified = run_cli(root, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_lane_that_outlives_its_ttl_keeps_its_lease_by_renewing(store, tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("long 1\nnext 2\n", toml="[runner]\nslots = 1\nttl = 60\nttl_min = 1\n")
    root = store.root
    flags = tmp_path / "flags"
    flags.mkdir()
    run_sh(
        store, "long",
        "#!/usr/bin/env bash\n"
        f'touch "{flags}/started"\n'
        f'deadline=$((SECONDS + {GATE_TIMEOUT}))\n'
        f'while [ ! -e "{flags}/go" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.02; done\n'
        f'[ -e "{flags}/go" ]\n'
    )
    ttl = 4
    log = tmp_path / "ran.txt"
    proc = start_runner(root, runner_env(log, store, RUNNER_TTL=str(ttl), RUNNER_RENEW="0.5"))
    try:
        wait_for(flags / "started", proc)
        claimed = time.monotonic()
        # Let the first lease's expiry pass twice over, and a few renewals land.
        while True:
            renewals = [e for e in store.events() if e["action"] == "renew"]
            if time.monotonic() - claimed > 2 * ttl + 1 and len(renewals) >= 3:
                break
            assert proc.poll() is None, said(proc)
            assert time.monotonic() - claimed < 120, renewals
            time.sleep(0.2)
        # Another claimer finds the lane still leased: one slot, taken; no expiry.
        probe = run_cli(root, "claim", "--holder", "probe", "--json")
        assert probe.returncode == 0, probe.stderr
        assert json.loads(probe.stdout)["decision"].split()[0] == "wait"
        assert not [e for e in store.events() if e["action"] == "expire"]
    finally:
        (flags / "go").touch()
    code, out, err = finish(proc)
    assert code == 0, err
    events = store.events()
    assert [(e["slug"], e["token"]) for e in events if e["action"] == "claim"] == [("long", 1), ("next", 1)]
    assert {(e["slug"], e["token"]) for e in events if e["action"] == "renew"} == {("long", 1)}
    assert not [e for e in events if e["action"] in ("expire", "refused")]
    assert lines(log) == ["long", "next"]
    assert store.settled("integrated") == ["long", "next"]

"""bench/database.py runs, checks what it measures, and leaves nothing behind
on a server it is given (--url). No timing is asserted here (docs/performance.md
and bench/README.md hold the figures). Every test is a real process: the bench
script itself is what is run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO, clean_env

BENCH = str(REPO / "bench" / "database.py")
TINY = ["--only", "long_lived", "--runners", "2", "--long-lanes", "20", "--rounds", "1", "--no-peers", "--idle-waiters", "3"]


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, env=clean_env(), timeout=timeout)


def left_behind(pg_server, prefix: str) -> list[str]:
    """The databases and roles on the server whose name starts with PREFIX."""
    with pg_server.admin() as conn:
        return [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) "
            "UNION ALL SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (prefix, prefix))]


def connected(pg_server, prefix: str) -> int:
    """The sessions open on the server's databases whose name starts with PREFIX."""
    with pg_server.admin() as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE starts_with(datname, %s)", (prefix,)).fetchone()[0]


def test_every_mode_runs_its_smallest_sizes_and_a_peer_that_cannot_be_imported_is_reported(tmp_path: Path) -> None:
    # an interpreter that sees no site-packages: neither peer can be imported by it
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "performance.md"
    out.write_text("# kept\n")
    done = bench("--smoke", "--peers-python", str(python), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert set(result) == {"bump", "batch", "next", "runners", "long_lived", "place"}
    assert result["batch"]["in_order_and_verified"] and result["batch"]["lanes"] == 12
    assert result["place"]["server"] == "throwaway"
    for runs in (result["runners"], result["long_lived"]):
        assert runs["claimed_once_in_run_order"] and runs["finished_once"] and runs["verify"] == "sound"
        assert runs["storm_lanes_per_s"] > 0
    long = result["long_lived"]
    assert (long["lanes"], long["runners"], long["rounds"], sum(long["lanes_per_runner"])) == (6, 2, 1, 6)
    chain, bare = long["contenders"]["chain_floor"], long["contenders"]["bare_floor"]
    assert chain["claimed_once_in_order"] and chain["finished_once"] and chain["chain_sound"] and chain["jobs_per_s"] > 0
    assert bare["finished_once"] and bare["jobs_per_s"] > 0
    for name in ("procrastinate_8proc", "procrastinate_1proc_c8", "pgqueuer_batch1", "pgqueuer_batch10"):
        peer = name.split("_")[0]
        assert long["contenders"][name]["unavailable"].startswith(f"cannot import {peer}: ModuleNotFoundError"), name
    versus_chain = long["ratios"]["storm_over_chain_floor"]
    assert versus_chain["goal"] == 0.5 and versus_chain["measured"] > 0
    assert versus_chain["met"] is (versus_chain["measured"] >= 0.5)
    versus_peer = long["ratios"]["storm_over_procrastinate_8proc"]
    assert versus_peer["goal"] == 1.0 and versus_peer["measured"] is None and versus_peer["met"] is None
    assert "cannot import procrastinate" in versus_peer["why"]
    idle = long["contenders"]["storm_idle_4"]  # --smoke: 4 idle claim --wait waiters beside the runners
    assert idle["claimed_once_in_run_order"] and idle["finished_once"] and idle["idle_leased_nothing"], idle
    beside = long["ratios"]["storm_idle_over_storm"]
    assert (beside["waiters"], beside["goal"]) == (4, 0.9) and beside["met"] is (beside["measured"] >= 0.9)
    assert long["goals_met"] is None  # one goal could not be measured
    text = out.read_text()
    assert text.startswith("# kept\n") and "<!-- bench/database.py: begin -->" in text
    assert "| storm-queue's database store (bench/database.py, 2 long-lived runners) |" in text
    assert "| procrastinate, 2 processes / 1 process with concurrency 2 | not measured: cannot import procrastinate" in text
    assert "| storm-queue / procrastinate, 2 processes |  | ≥ 1 | not measured |" in text
    assert "| the same, with 4 idle `claim --wait` processes attached |" in text


def test_two_runs_on_one_server_given_by_url_collide_not_and_leave_nothing(pg_server) -> None:
    argv = [sys.executable, BENCH, "--url", pg_server.admin_url(), *TINY]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
            for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in runs]
    assert [p.returncode for p in runs] == [0, 0], [err[-3000:] for _, err in outs]
    results = [json.loads(out) for out, _ in outs]
    prefixes = {r["place"]["prefix"] for r in results}
    assert len(prefixes) == 2 and all(r["place"]["server"] == "--url" for r in results)
    for r in results:
        long = r["long_lived"]
        assert long["claimed_once_in_run_order"] and long["finished_once"] and long["verify"] == "sound"
        assert long["lines"] == 1 + 1 + 2 * 20  # init, declare, a claim and a finish per lane
        assert long["contenders"]["chain_floor"]["chain_sound"]
    for prefix in prefixes:
        assert left_behind(pg_server, prefix) == []


def test_ctrl_c_drops_what_the_run_made_on_the_server(pg_server) -> None:
    argv = [sys.executable, BENCH, "--url", pg_server.admin_url(), "--only", "long_lived", "--runners", "2",
            "--long-lanes", "3000", "--no-peers"]  # long enough to be interrupted
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    prefix = f"stormbench_{run.pid}_"
    deadline = time.monotonic() + 120
    while connected(pg_server, prefix) < 2 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connected(pg_server, prefix) >= 2, "the runners never connected"  # the race is on
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1 and out == "", err[-3000:]
    assert f"interrupted; this run's databases and roles ({prefix}" in err
    assert left_behind(pg_server, prefix) == [] and connected(pg_server, prefix) == 0


def test_a_url_that_is_not_a_superuser_is_refused_without_its_password(pg_server) -> None:
    role = pg_server.create_role("bench_not_super", password="s3cret-pw")
    try:
        done = bench("--url", pg_server.url("postgres", role, password="s3cret-pw"), *TINY, timeout=60)
    finally:
        pg_server.drop_role(role)
    assert done.returncode == 1 and done.stdout == ""
    assert "--url must connect as a superuser" in done.stderr and "s3cret-pw" not in done.stderr

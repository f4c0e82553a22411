"""How soon a cancel stops a runner's work (issue 33, item 4: goal, the
lane's whole process group ended within 5 s of the cancel, whatever the
TTL), for ``examples/runner.sh`` under a 600 s lease, whose next renew is
200 s away:

    python bench/cancel.py [--trials 5] [--store directory|database]

One runner (the installed console script, ``RUNNER_GRACE`` at its default)
runs a storm of one lane a trial, each lane's run.sh starting a child that
ignores SIGTERM and a child with a grandchild, then waiting. Each trial:

1. waits until the lane's processes run (they write their pids), then a
   second more, so that the runner waits on the lease (``storm-queue
   lease --wait``);
2. cancels the lane through the library in this process, as the operator;
   the clock starts when ``cancel`` returns, just after its commit;
3. notes when the lane's own process has ended (the runner heard the
   cancel and sent SIGTERM to the group: the wake), and when every process
   of the group has (the child that ignores SIGTERM gets SIGKILL after the
   cancel's grace, at most 2 s): the figure the goal is about.

It reports the median and the largest of both, per store. The database
runs on a throwaway server (tests/pgserver.py). No figure is asserted;
exit 1 when a lane's processes outlived the cancel by 30 s or the runner
did not end as it should.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.children import alive  # noqa: E402 -- found once the repository is on the path

SQ = os.path.join(os.path.dirname(sys.executable), "storm-queue")
#: how long a trial may take before it is called a failure (far past the goal)
GIVE_UP = 30
#: after the lane's processes run, this long more, so that the runner waits on the lease
SETTLE = 1.0
TOML = "[runner]\nttl = 600\nunattended = true\n"


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT") and
           not k.startswith("RUNNER_")}
    return {**out, **extra}


def run_sh(lanes: Path, slug: str, flags: Path) -> None:
    """The lane's work: a child deaf to SIGTERM, a child with a grandchild, their pids written."""
    path = lanes / slug / "run.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n"
                    "(trap '' TERM; exec sleep 3600) &\ndeaf=$!\n"
                    f"bash -c 'sleep 3600 & echo $! > \"{flags}/{slug}.grand\"; wait' &\nkid=$!\n"
                    f'until [ -s "{flags}/{slug}.grand" ]; do sleep 0.01; done\n'
                    f'echo "$$ $deaf $kid $(cat "{flags}/{slug}.grand")" > "{flags}/{slug}.tmp"\n'
                    f'mv "{flags}/{slug}.tmp" "{flags}/{slug}.pids"\nwait\n')
    path.chmod(0o755)


def directory_storm(slugs: list[str], work: Path) -> tuple[str, Path]:
    root = work / "storm"
    root.mkdir()
    (root / "queue.txt").write_text("".join(f"{s} {n}\n" for n, s in enumerate(slugs, 1)))
    (root / "storm.toml").write_text(TOML)
    return str(root), root / "lanes"


def database_storm(server, slugs: list[str], work: Path) -> tuple[str, Path]:
    from storm_queue.store.postgres import driver

    role = server.create_role("op_bench_cancel")
    server.create_database("db_bench_cancel", role)
    url = server.url("db_bench_cancel", role)
    assert subprocess.run([SQ, "init", url], capture_output=True, env=env()).returncode == 0
    (work / "storm.toml").write_text(TOML)
    assert subprocess.run([SQ, "declare", str(work / "storm.toml"), "--root", url], capture_output=True,
                          env=env()).returncode == 0
    with driver.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)",
                        [(s, str(n)) for n, s in enumerate(slugs, 1)])
    return url, work / "lanes"


def trials(root: str, lanes: Path, slugs: list[str], work: Path) -> dict:
    from storm_queue.service.storm import Storm

    flags = work / "flags"
    flags.mkdir()
    for slug in slugs:
        run_sh(lanes, slug, flags)
    storm = Storm.find(root, env=env())
    runner = subprocess.Popen(["bash", str(REPO / "examples" / "runner.sh"), root], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True,
                              env=env(STORM_QUEUE=SQ, RUNNER_HOLDER="bench", RUNNER_LANES=str(lanes)))
    woke, stopped, failed = [], [], []
    try:
        for slug in slugs:
            deadline = time.monotonic() + GIVE_UP
            while not (flags / f"{slug}.pids").exists():
                if runner.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{slug} never ran: {runner.stderr.read() if runner.poll() is not None else ''}")
                time.sleep(0.01)
            pids = [int(p) for p in (flags / f"{slug}.pids").read_text().split()]
            time.sleep(SETTLE)
            out = storm.cancel(slug, "bench")
            t = time.perf_counter()
            assert out.outcome == "done" and out.token is not None, out.message
            leader = None
            while any(alive(p) for p in pids):
                if leader is None and not alive(pids[0]):
                    leader = time.perf_counter()
                if time.perf_counter() - t > GIVE_UP:
                    failed.append(slug)
                    break
                time.sleep(0.002)
            end = time.perf_counter()
            woke.append(((leader or end) - t) * 1000)
            stopped.append((end - t) * 1000)
        try:
            runner.wait(GIVE_UP)
        except subprocess.TimeoutExpired:
            failed.append("runner did not end")
        if runner.returncode != 0:
            failed.append(f"runner exited {runner.returncode}")
    finally:
        storm.close()
        try:
            os.killpg(runner.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return {"trials": len(stopped), "heard_median_ms": round(statistics.median(woke), 1),
            "heard_max_ms": round(max(woke), 1), "stopped_median_ms": round(statistics.median(stopped), 1),
            "stopped_max_ms": round(max(stopped), 1), "failed": failed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--store", choices=("directory", "database"), action="append",
                    help="only this store (may be repeated; default: both)")
    args = ap.parse_args()
    slugs = [f"c{n:03d}" for n in range(args.trials)]
    out = {}
    for kind in args.store or ("directory", "database"):
        work = Path(tempfile.mkdtemp(prefix="bench-cancel-"))
        if kind == "directory":
            out[kind] = trials(*directory_storm(slugs, work), slugs, work)
        else:
            from tests.pgserver import PgServer

            server = PgServer().start()
            try:
                out[kind] = trials(*database_storm(server, slugs, work), slugs, work)
            finally:
                server.stop()
    print(json.dumps(out, indent=2))
    sys.exit(1 if any(r["failed"] for r in out.values()) else 0)


if __name__ == "__main__":
    main()

"""How soon a waiting claim hears of a freed slot (issue 21, item 4: goal,
median at most 50 ms on both stores):

    python bench/wait.py [--trials 50] [--store directory|database]

On a storm of one ``[runner] slot`` (unattended, so a finished lane waits
for no review; on a directory storm each lane's work directory lanes/SLUG
is there before it is claimed, as a lane that supplies its run.sh has it),
each trial:

1. starts ``storm-queue claim --wait 60`` as a whole process of the
   console script; the slot is busy, so it waits. It is known to wait
   once it holds its inotify descriptor (directory) or its LISTEN
   connection is open (database), and 50 ms more have passed;
2. finishes the lane that holds the slot (``finish --result ok``, through
   the library in this process, as a long-lived runner would); the
   clock starts when ``finish`` returns, just after its commit (the
   database's COMMIT is its last round trip; the directory's last durable
   writes are the witness's rename and the directory's fsync, then
   progress.log);
3. stops the clock when the waiting claim's answer line (``run SLUG ISSUE
   TOKEN``) is read from its stdout. That lane is the next trial's.

It reports the median, the 90th percentile and the largest of the
latencies; the median ``finish`` itself (what the figure would grow by,
at most, were the clock started at the finish's start rather than its
return); and, in the same rounds, the median of a claim that leases at
once (through the library, nothing waiting): the durable write every
claim makes (its log line, the witness, the running marker, each
fsynced), which the latency includes, so that what waiting adds is seen
apart from what the disk costs. The database runs on a throwaway server (tests/pgserver.py).
No figure is asserted; exit 1 when a claim did not answer ``run``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SQ = [os.path.join(os.path.dirname(sys.executable), "storm-queue")]
#: how long a trial's claim waits at most (far past any latency measured)
WAIT = 60
#: after the claim is seen waiting, this long more, so that its watched second ask is done
SETTLE = 0.05


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}


def directory_storm(lanes: int) -> tuple[str, object]:
    root = Path(tempfile.mkdtemp(prefix="bench-wait-")) / "storm"
    root.mkdir()
    (root / "queue.txt").write_text("".join(f"l{i:05d} {i}\n" for i in range(lanes)))
    (root / "storm.toml").write_text("[runner]\nslots = 1\nunattended = true\n")
    for i in range(lanes):
        (root / "lanes" / f"l{i:05d}").mkdir(parents=True)

    def waiting(proc: subprocess.Popen, started: float) -> bool:
        fd = Path(f"/proc/{proc.pid}/fd")
        try:
            return any(os.readlink(p) == "anon_inode:inotify" for p in fd.iterdir())
        except OSError:
            return False

    return str(root), waiting


def database_storm(server, lanes: int) -> tuple[str, object]:
    from storm_queue.store.postgres import driver

    role = server.create_role("op_bench_wait")
    server.create_database("db_bench_wait", role)
    url = server.url("db_bench_wait", role)
    done = subprocess.run([*SQ, "init", url], capture_output=True, text=True, env=env())
    assert done.returncode == 0, done.stderr
    toml = Path(tempfile.mkdtemp()) / "storm.toml"
    toml.write_text("[runner]\nslots = 1\nunattended = true\n")
    assert subprocess.run([*SQ, "declare", str(toml), "--root", url], capture_output=True, env=env()).returncode == 0
    with driver.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)",
                        [(f"l{i:05d}", str(i)) for i in range(lanes)])
    watcher = driver.connect(url)

    def waiting(proc: subprocess.Popen, started: float) -> bool:
        return watcher.execute("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                               "AND query = 'LISTEN storm_queue' AND backend_start >= to_timestamp(%s)",
                               (started,)).fetchone() is not None

    return url, waiting


def trials(root: str, waiting, count: int) -> dict:
    from storm_queue.service.storm import Storm

    storm = Storm.find(root, env=env())
    first = storm.claim("bench")
    assert first.slug is not None, first.decision
    held, token = first.slug, first.token
    latencies, finishes, alone, wrong = [], [], [], []
    for _ in range(count):
        started = time.time()
        proc = subprocess.Popen([*SQ, "claim", "--wait", str(WAIT), "--root", root], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env())
        deadline = time.monotonic() + WAIT
        while not waiting(proc, started):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the claim never waited: {proc.communicate()}")
            time.sleep(0.005)
        time.sleep(SETTLE)
        t = time.perf_counter()
        out = storm.finish(held, token, "ok")
        committed = time.perf_counter()
        assert out.outcome == "done", out.message
        line = proc.stdout.readline()
        answered = time.perf_counter()
        proc.communicate(timeout=WAIT)
        latencies.append((answered - committed) * 1000)
        finishes.append((committed - t) * 1000)
        words = line.split()
        if proc.returncode != 0 or len(words) != 4 or words[0] != "run":
            wrong.append(line)
            break
        held, token = words[1], int(words[3])
        assert storm.finish(held, token, "ok").outcome == "done"  # the control: a claim that leases at once
        t = time.perf_counter()
        out = storm.claim("bench")
        alone.append((time.perf_counter() - t) * 1000)
        assert out.slug is not None, out.decision
        held, token = out.slug, out.token
    storm.close()
    cut = sorted(latencies)
    return {"trials": len(latencies), "median_ms": round(statistics.median(latencies), 1),
            "p90_ms": round(cut[int(0.9 * (len(cut) - 1))], 1), "max_ms": round(cut[-1], 1),
            "finish_median_ms": round(statistics.median(finishes), 1),
            "claim_alone_median_ms": round(statistics.median(alone), 1), "wrong": wrong}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--store", choices=("directory", "database"), action="append",
                    help="only this store (may be repeated; default: both)")
    args = ap.parse_args()
    out = {}
    for kind in args.store or ("directory", "database"):
        if kind == "directory":
            out[kind] = trials(*directory_storm(2 * args.trials + 2), args.trials)
        else:
            from tests.pgserver import PgServer

            server = PgServer().start()
            try:
                out[kind] = trials(*database_storm(server, 2 * args.trials + 2), args.trials)
            finally:
                server.stop()
    print(json.dumps(out, indent=2))
    sys.exit(1 if any(r["wrong"] for r in out.values()) else 0)


if __name__ == "__main__":
    main()

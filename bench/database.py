"""Benchmarks of a storm in PostgreSQL, against floors measured in the same run.

    python bench/database.py [--lanes 200] [--events 100000] [--runners 8]

It starts a throwaway server (tests/pgserver.py) and reports:
- runners: N processes, each looping `storm-queue claim` + `finish ok` +
  `settle integrated` (a database storm has no UNATTENDED, so a finished
  lane holds the storm until it is reviewed), until
  every lane is done, in lanes/s, against N connections running the bare
  claim of any PostgreSQL queue (UPDATE ... WHERE id = (SELECT ... FOR UPDATE
  SKIP LOCKED LIMIT 1) RETURNING) over the same number of rows; it checks
  every lane ran once;
- bump on a database storm / bump on a directory storm (median wall time);
- next at EVENTS log lines / next at 1 line on a database storm (the lines
  are real requests' lines, appended straight to the table).
Ratios only mean something within one run: the machine is shared.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.pgserver import PgServer  # noqa: E402


def sq(root: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_ROOT", "STORM_QUEUE_LANE")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "storm_queue", *args, "--root", root], capture_output=True, text=True, env=env)


def timed(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fresh(server: PgServer, name: str) -> str:
    role = server.create_role(f"op_{name}")
    server.create_database(f"db_{name}", role)
    url = server.url(f"db_{name}", role)
    done = subprocess.run([sys.executable, "-m", "storm_queue", "init", url], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return url


def runners(server: PgServer, lanes: int, n: int) -> dict:
    import psycopg

    url = fresh(server, "runners")
    toml = Path(tempfile.mkdtemp()) / "storm.toml"
    toml.write_text(f"[runner]\nslots = {n}\n")
    assert sq(url, "declare", str(toml)).returncode == 0
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)", [(f"l{i:05d}", str(i)) for i in range(lanes)])
    script = (
        "import os, subprocess, sys\n"
        "while True:\n"
        "    d = subprocess.run([sys.executable, '-m', 'storm_queue', 'claim', '--root', sys.argv[1]], capture_output=True, text=True).stdout.split()\n"
        "    if not d or d[0] != 'run':\n"
        "        if d and d[0] == 'wait': continue\n"
        "        break\n"
        "    subprocess.run([sys.executable, '-m', 'storm_queue', 'finish', d[1], '--token', d[3], '--result', 'ok', '--root', sys.argv[1]], capture_output=True)\n"
        "    subprocess.run([sys.executable, '-m', 'storm_queue', 'settle', d[1], 'integrated', '--root', sys.argv[1]], capture_output=True)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", script, url], env=env) for _ in range(n)]
    for p in procs:
        p.wait()
    storm_rate = lanes / (time.perf_counter() - t)
    with psycopg.connect(url, autocommit=True) as conn:
        lines = [json.loads(bytes(r[0])) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]
    claims = [e["slug"] for e in lines if e["action"] == "claim"]
    assert sorted(claims) == [f"l{i:05d}" for i in range(lanes)], f"a lane was not claimed exactly once: {claims}"
    # the floor: the bare claim loop on the same server, N connections, same row count
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.bench_jobs (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'ready')")
        conn.execute("INSERT INTO public.bench_jobs (state) SELECT 'ready' FROM generate_series(1, %s)", (lanes,))
    floor_script = (
        "import psycopg, sys\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
        "    while c.execute(\"UPDATE public.bench_jobs SET state = 'done' WHERE id = (SELECT id FROM public.bench_jobs "
        "WHERE state = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id\").fetchone():\n"
        "        pass\n")
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", floor_script, url], env=env) for _ in range(n)]
    for p in procs:
        p.wait()
    floor_rate = lanes / (time.perf_counter() - t)
    return {"lanes": lanes, "runners": n, "storm_lanes_per_s": round(storm_rate, 1),
            "bare_claims_per_s": round(floor_rate, 1), "ratio": round(storm_rate / floor_rate, 4)}


def bumps(server: PgServer, n: int = 15) -> dict:
    url = fresh(server, "bumps")
    root = Path(tempfile.mkdtemp()) / "storm"
    root.mkdir()
    (root / "queue.txt").write_text("a 1\n")
    assert sq(url, "add", "a", "1").returncode == 0
    db = timed(lambda: (sq(url, "bump", "a"), sq(url, "unbump", "a")), n) / 2
    fs = timed(lambda: (sq(str(root), "bump", "a"), sq(str(root), "unbump", "a")), n) / 2
    return {"bump_database_ms": round(db * 1000, 1), "bump_directory_ms": round(fs * 1000, 1), "ratio": round(db / fs, 3)}


def history(server: PgServer, events: int, n: int = 15) -> dict:
    import psycopg

    from storm_queue.log.framing import digest
    from storm_queue.log.writer import frame

    small, big = fresh(server, "next0"), fresh(server, "nextbig")
    for url in (small, big):
        assert sq(url, "add", "a", "1").returncode == 0
    with psycopg.connect(big, autocommit=True) as conn:
        seq, prev = conn.execute("SELECT seq, digest FROM storm_queue.state").fetchone()
        rows = []
        with conn.transaction(), conn.cursor() as cur:
            for i in range(events):
                body = {"action": "bump" if i % 2 == 0 else "unbump", "slug": "a", "moved": ["a"] if i % 2 == 0 else [],
                        "removed": [] if i % 2 == 0 else ["a"], **({"issue": "1", "deps": []} if i % 2 == 0 else {})}
                (event, line), = frame([body], seq, prev, "2026-11-30T00:00:00.000000Z", "operator:bench")
                seq, prev = event["seq"], digest(line)
                rows.append((seq, line))
                if len(rows) == 5000:
                    cur.executemany("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", rows)
                    rows = []
            if rows:
                cur.executemany("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", rows)
            cur.execute("UPDATE storm_queue.state SET seq = %s, digest = %s", (seq, prev))
    t0 = timed(lambda: sq(small, "next"), n)
    t1 = timed(lambda: sq(big, "next"), n)
    assert sq(big, "verify").returncode == 0
    return {"events": events, "next_small_ms": round(t0 * 1000, 1), "next_big_ms": round(t1 * 1000, 1), "ratio": round(t1 / t0, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=200)
    ap.add_argument("--runners", type=int, default=8)
    ap.add_argument("--events", type=int, default=100000)
    args = ap.parse_args()
    server = PgServer().start()
    try:
        out = {"bump": bumps(server), "next": history(server, args.events), "runners": runners(server, args.lanes, args.runners)}
    finally:
        server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

"""Benchmarks of a storm in PostgreSQL, against floors measured in the same run.

    python bench/database.py [--lanes 80] [--long-lanes 2000] [--events 1000000] [--runners 8] [--batch-lanes 1000]
                             [--profile FILE] [--only MEASURE]

It starts a throwaway server (tests/pgserver.py) and reports:
- runners, two ways, each against N connections running the bare claim of
  any PostgreSQL queue (UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP
  LOCKED LIMIT 1) RETURNING) over the same number of rows, in lanes/s:
  - process per command: N processes, each looping `storm-queue claim` +
    `finish ok` as separate processes;
  - long-lived: N processes, each holding one `Storm` of the library (one
    connection, reused) and looping `claim`, `finish`;
  the storm declares `[runner] unattended = true` (a finished lane waits for
  no review, as the UNATTENDED file says on a directory storm), so a lane is
  two requests; each mode checks that every lane was claimed once, in run
  order, finished once, and that verify passes;
- add --from FILE of LANES lanes (issue 21, item 5; goal: 1,000 lanes in at
  most 2 s on a database storm), a whole process on a fresh empty storm of
  each store (median wall time), beside one add of one lane; every lane
  is then queued in order and verify passes;
- bump then unbump, two whole CLI processes, on a database storm / on a
  directory storm (median of the rounds' ratios; goal 2.5, issue 21 item 6),
  with what `import psycopg` alone costs a process, measured in the same rounds;
- next at EVENTS log lines / next at line 1 alone on a database storm of
  the same 100 lanes, both built by bench/build.py (real planned requests,
  framed and chained, COPY'd into the table); verify passes on the big one.
Ratios only mean something within one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import itertools
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

from tests.pgserver import PgServer  # noqa: E402


def sq(root: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_ROOT", "STORM_QUEUE_LANE")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "storm_queue", *args, "--root", root], capture_output=True, text=True, env=env)


_FRESH = itertools.count()


def timed(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fresh(server: PgServer, name: str) -> str:
    name = f"{name}_{next(_FRESH)}"
    role = server.create_role(f"op_{name}")
    server.create_database(f"db_{name}", role)
    url = server.url(f"db_{name}", role)
    done = subprocess.run([sys.executable, "-m", "storm_queue", "init", url], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return url


def started(argv: list[str], n: int, each=lambda i: []) -> list[subprocess.Popen]:
    """N processes of ARGV (+ each(i)), each connected and waiting for go()."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(argv + each(i), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for i in range(n)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    return procs


def go(procs: list[subprocess.Popen]) -> float:
    """Start every waiting process at once; the time they were started."""
    t = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return t


def _lanes_table(url: str, lanes: int, slots: int) -> None:
    """Declare ``slots`` runner slots and ``unattended`` (a finished lane waits
    for no review), and queue ``lanes`` lanes l00000.. (no dependencies)."""
    import psycopg

    toml = Path(tempfile.mkdtemp()) / "storm.toml"
    toml.write_text(f"[runner]\nslots = {slots}\nunattended = true\n")
    assert sq(url, "declare", str(toml)).returncode == 0
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)", [(f"l{i:05d}", str(i)) for i in range(lanes)])


def _floor(url: str, lanes: int, n: int) -> float:
    """Lanes/s of N connections running the bare claim loop over LANES rows."""
    import psycopg

    table = f"bench_jobs_{lanes}_{n}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE public.{table} (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'ready')")
        conn.execute(f"INSERT INTO public.{table} (state) SELECT 'ready' FROM generate_series(1, %s)", (lanes,))
    floor_script = (
        "import psycopg, sys\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()\n"
        f"    while c.execute(\"UPDATE public.{table} SET state = 'done' WHERE id = (SELECT id FROM public.{table} "
        "WHERE state = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id\").fetchone():\n"
        "        pass\n")
    procs = started([sys.executable, "-c", floor_script, url], n)
    t = go(procs)
    for p in procs:
        p.wait()
    rate = lanes / (time.perf_counter() - t)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(f"SELECT count(*) FROM public.{table} WHERE state = 'done'").fetchone()[0] == lanes
    return rate


def _check_runs(url: str, lanes: int) -> dict:
    """Every lane claimed and finished ok exactly once, claims in run order
    (queue order: no lane is prioritised), and verify says sound."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        lines = [json.loads(bytes(r[0])) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]
    order = [f"l{i:05d}" for i in range(lanes)]
    claims = [e["slug"] for e in lines if e["action"] == "claim"]
    finishes = [e["slug"] for e in lines if e["action"] == "finish"]
    assert claims == order, "the lanes were not claimed once each, in run order"
    assert sorted(finishes) == order, "a lane was not finished exactly once"
    assert not [e for e in lines if e["action"] in ("refused", "expire")], "a runner's request was refused or expired"
    assert sq(url, "verify").returncode == 0
    return {"claimed_once_in_run_order": True, "finished_once": True, "verify": "sound", "lines": len(lines)}


def runners(server: PgServer, lanes: int, n: int) -> dict:
    """N runner processes, each starting a storm-queue process per command."""
    url = fresh(server, "runners")
    _lanes_table(url, lanes, n)
    script = (
        "import os, subprocess, sys\n"
        "while True:\n"
        "    d = subprocess.run([sys.executable, '-m', 'storm_queue', 'claim', '--root', sys.argv[1]], capture_output=True, text=True).stdout.split()\n"
        "    if not d or d[0] != 'run':\n"
        "        if d and d[0] == 'wait' and len(d) - 1 < int(sys.argv[2]): continue\n"
        "        break\n"
        "    subprocess.run([sys.executable, '-m', 'storm_queue', 'finish', d[1], '--token', d[3], '--result', 'ok', '--root', sys.argv[1]], capture_output=True)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", script, url, str(lanes)], env=env) for _ in range(n)]
    for p in procs:
        p.wait()
    storm_rate = lanes / (time.perf_counter() - t)
    checked = _check_runs(url, lanes)
    floor_rate = _floor(url, lanes, n)
    return {"lanes": lanes, "runners": n, "storm_lanes_per_s": round(storm_rate, 1),
            "bare_claims_per_s": round(floor_rate, 1), "ratio": round(storm_rate / floor_rate, 4), **checked}


#: one long-lived runner: one Storm (one connection) looping claim, finish ok
LONG_LIVED = """
import collections, sys, time
from storm_queue.service.storm import Storm

url, holder, profile, lanes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
storm = Storm.find(url)
storm.declaration()  # connected
print("ready", flush=True)
sys.stdin.readline()
if profile:
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
polls, done = collections.Counter(), 0
while True:
    d = storm.claim(holder=holder).decision.split()
    if d[0] == "run":
        assert storm.finish(d[1], int(d[3]), "ok").outcome == "done"
        done += 1
    elif d[0] == "wait" and len(d) - 1 < lanes:  # every slot is taken (the rest wait for their batch review)
        polls[d[0]] += 1
        time.sleep(0.002)
    else:
        break
if profile:
    prof.disable()
    prof.dump_stats(profile)
print(done, polls["wait"])
"""


def long_lived(server: PgServer, lanes: int, n: int, profile: str = "") -> dict:
    """N runner processes, each one ``Storm`` (the library) on one connection,
    timed from when all are connected (as the floor's connections are)."""
    url = fresh(server, "longlived")
    _lanes_table(url, lanes, n)
    procs = started([sys.executable, "-c", LONG_LIVED, url], n, lambda i: [f"runner-{i}", profile if i == 0 else "", str(lanes)])
    t = go(procs)
    outs = [p.communicate()[0].split() for p in procs]
    storm_rate = lanes / (time.perf_counter() - t)
    assert all(p.returncode == 0 for p in procs), "a runner failed"
    checked = _check_runs(url, lanes)
    floor_rate = _floor(url, lanes, n)
    return {"lanes": lanes, "runners": n, "storm_lanes_per_s": round(storm_rate, 1),
            "bare_claims_per_s": round(floor_rate, 1), "ratio": round(storm_rate / floor_rate, 4),
            "lanes_per_runner": [int(o[0]) for o in outs], "wait_polls": sum(int(o[1]) for o in outs),
            **checked}


#: the ratio issue 21 (item 6) asks of bump then unbump, database storm over directory storm
BUMP_PAIR_GOAL = 2.5


def _run_ms(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 0, (argv, done.stderr)
    return (time.perf_counter() - t) * 1000


def bumps(server: PgServer, n: int = 15) -> dict:
    """``bump a`` then ``unbump a`` as two whole CLI processes, on a database
    storm and on a directory storm, alternated in each of N rounds (the
    ratio is the median of the rounds' ratios); and, in the same rounds,
    ``python -c "import psycopg"`` against ``python -c pass``: what the
    driver's import alone costs a process. The processes write and use
    bytecode, as an installed command does (pip compiles it), whatever
    PYTHONDONTWRITEBYTECODE says here."""
    url = fresh(server, "bumps")
    root = Path(tempfile.mkdtemp()) / "storm"
    root.mkdir()
    (root / "queue.txt").write_text("a 1\n")
    assert sq(url, "add", "a", "1").returncode == 0
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_ROOT", "STORM_QUEUE_LANE", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(REPO)
    cli = [sys.executable, "-m", "storm_queue"]

    def pair(where: str) -> float:
        return sum(_run_ms([*cli, verb, "a", "--root", where], env) for verb in ("bump", "unbump"))

    rounds = []
    for i in range(n + 1):  # the first round writes the bytecode, and is not counted
        db, fs = pair(url), pair(str(root))
        bare, driver = _run_ms([sys.executable, "-c", "pass"], env), _run_ms([sys.executable, "-c", "import psycopg"], env)
        if i:
            rounds.append((db, fs, bare, driver))
    med = [statistics.median(r[k] for r in rounds) for k in range(4)]
    ratio = statistics.median(r[0] / r[1] for r in rounds)
    return {"bump_unbump_database_ms": round(med[0], 1), "bump_unbump_directory_ms": round(med[1], 1),
            "ratio": round(ratio, 3), "goal": BUMP_PAIR_GOAL, "met": ratio <= BUMP_PAIR_GOAL,
            "python_ms": round(med[2], 1), "import_psycopg_ms": round(med[3] - med[2], 1),
            "ratio_without_the_driver_import": round(statistics.median((r[0] - 2 * (r[3] - r[2])) / r[1] for r in rounds), 3)}


def batch(server: PgServer, lanes: int, n: int = 5) -> dict:
    """``add --from FILE`` of LANES lanes (every tenth with no dependency,
    the rest needing the lane before), each run a whole process on a fresh
    storm of each store, against one ``add`` of one lane (``ratio``: the
    batch on a database over the one lane there)."""
    import psycopg

    work = Path(tempfile.mkdtemp())
    lines = work / "lanes.txt"
    lines.write_text("".join(f"b{i:05d} {i}" + (f" b{i - 1:05d}" if i % 10 else "") + "\n" for i in range(lanes)))
    order = [f"b{i:05d}" for i in range(lanes)]

    def empty(kind: str) -> str:
        if kind == "database":
            return fresh(server, "batch")
        root = Path(tempfile.mkdtemp(dir=work))
        (root / "queue.txt").write_text("")
        return str(root)

    def added(root: str) -> float:
        t = time.perf_counter()
        done = sq(root, "add", "--from", str(lines))
        took = time.perf_counter() - t
        assert done.returncode == 0, done.stderr
        return took

    made: dict[str, list[str]] = {"database": [], "directory": []}
    times: dict[str, list[float]] = {"database": [], "directory": [], "one_database": [], "one_directory": []}
    for _ in range(n):
        for kind in ("database", "directory"):
            made[kind].append(empty(kind))
            times[kind].append(added(made[kind][-1]))
            times[f"one_{kind}"].append(timed(lambda: sq(made[kind][-1], "add", f"one{next(_FRESH)}", "1"), 1))
    with psycopg.connect(made["database"][0], autocommit=True) as conn:
        rows = [r[0] for r in conn.execute("SELECT slug FROM storm_queue.lane ORDER BY pos")]
    queued = (Path(made["directory"][0]) / "queue.txt").read_text().split("\n")
    assert rows[:lanes] == order and [line.split(" ")[0] for line in queued[:lanes]] == order, "not every lane, in order"
    assert all(sq(root, "verify").returncode == 0 for root in (made["database"][0], made["directory"][0]))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"lanes": lanes, "runs": n, "database_s": round(med["database"], 3), "directory_s": round(med["directory"], 3),
            "one_add_database_ms": round(med["one_database"] * 1000, 1),
            "one_add_directory_ms": round(med["one_directory"] * 1000, 1),
            "ratio": round(med["database"] / med["one_database"], 3),  # LANES lanes at once / one lane
            "database_runs_s": [round(t, 3) for t in times["database"]], "goal_database_s": 2.0,
            "in_order_and_verified": True}


def history(server: PgServer, events: int, lanes: int = 100, n: int = 15) -> dict:
    """``next`` on a database storm of EVENTS lines after line 1 / on one of
    line 1 alone, the same LANES lanes (both built by bench/build.py)."""
    sys.path.insert(0, str(REPO / "bench"))
    from build import build_database

    def made(name: str, count: int) -> tuple[str, float]:
        role = server.create_role(f"op_{name}")
        server.create_database(f"db_{name}", role)
        url = server.url(f"db_{name}", role)
        t = time.perf_counter()
        build_database(url, count, lanes)
        return url, time.perf_counter() - t

    (small, _), (big, built) = made("next0", 0), made("nextbig", events)
    for url in (small, big):
        assert sq(url, "next").returncode == 0  # warm
    pairs = [(timed(lambda: sq(small, "next"), 1), timed(lambda: sq(big, "next"), 1)) for _ in range(n)]
    t0, t1 = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    t = time.perf_counter()
    verified = sq(big, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return {"events": events, "lanes": lanes, "build_s": round(built, 1), "verify_s": round(time.perf_counter() - t, 1),
            "next_small_ms": round(t0 * 1000, 1), "next_big_ms": round(t1 * 1000, 1), "ratio": round(t1 / t0, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=80, help="lanes of the process-per-command runners")
    ap.add_argument("--long-lanes", type=int, default=2000, help="lanes of the long-lived runners")
    ap.add_argument("--runners", type=int, default=8)
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--profile", default="", help="write the first long-lived runner's cProfile stats here")
    ap.add_argument("--smoke", action="store_true", help="the smallest sizes, to check that it runs")
    ap.add_argument("--batch-lanes", type=int, default=1000, help="lanes of one add --from FILE")
    ap.add_argument("--only", choices=("bump", "batch", "next", "runners", "long_lived"), action="append",
                    help="run only this measure (may be repeated)")
    args = ap.parse_args()
    if args.smoke:
        args.lanes, args.long_lanes, args.runners, args.events, args.batch_lanes = 4, 6, 2, 40, 12
    server = PgServer().start()
    try:
        measures = {"bump": lambda: bumps(server, 3 if args.smoke else 15),
                    "batch": lambda: batch(server, args.batch_lanes, 1 if args.smoke else 5),
                    "next": lambda: history(server, args.events, n=3 if args.smoke else 15),
                    "runners": lambda: runners(server, args.lanes, args.runners),
                    "long_lived": lambda: long_lived(server, args.long_lanes, args.runners, args.profile)}
        out = {name: measure() for name, measure in measures.items() if not args.only or name in args.only}
    finally:
        server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

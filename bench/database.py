"""Benchmarks of a storm in PostgreSQL, against floors and peer queues measured in the same run.

    python bench/database.py [--only MODE]... [--url SUPERUSER_URL] [--runners 8] [--long-lanes 2000]
                             [--rounds 3] [--no-peers | --peers-python PY] [--lanes 80] [--events 1000000]
                             [--batch-lanes 1000] [--idle-waiters 64] [--profile FILE] [--smoke] [--out FILE]

It runs on a throwaway server (tests/pgserver.py), or with ``--url`` on the
server a superuser's URL names: there it makes its own databases and roles,
named with this run's own prefix (``stormbench_PID_RANDOM``: two runs on one
server never collide), and drops them at the end, on failure and on Ctrl-C
too. It prints one JSON document, a key per MODE:

- ``long_lived``: RUNNERS processes, each holding one ``Storm`` of the library
  (one connection) and looping finish ok then claim in one request (``finish
  --then-claim``) over LONG_LANES lanes, against,
  in interleaved rounds on the same server, the same number of processes and
  jobs of: the chained floor (bench/chain.sql: one hash-chained log in total
  order under one advisory lock, a fencing token per lease, one round trip per
  request), the bare SKIP LOCKED claim then finish (bench/floors.py), and the
  peers (bench/peers.py: procrastinate with RUNNERS processes and with one
  process of concurrency RUNNERS, pgqueuer with batch_size 1 and 10: no-op
  jobs, each installed in the bench's own environment, never storm-queue's; a
  peer that cannot be installed is reported so). Each figure is the median of
  the rounds; each ratio the median of the rounds' ratios, and the two the
  issue pins carry a goal and whether it is met. The storm declares
  ``[runner] unattended = true`` (a lane is claim + finish); every round checks
  that every lane was claimed once, in run order, finished once, and that
  verify is sound; the floors and peers check that every job was done once.
  With IDLE_WAITERS (64 by default; 0 leaves it out), the storm runs again
  with that many ``storm-queue claim --wait`` processes attached and waiting
  (every slot held first), and ``storm_idle_over_storm`` is the busy
  runners' lanes/s with them over without (goal 0.9, issue 32 item 5).
- ``runners``: the same loop with a storm-queue process per command, over
  LANES lanes, against the bare floor.
- ``bump``: bump then unbump, two whole CLI processes, on a database storm /
  on a directory storm (median of the rounds' ratios; goal 2.5, issue 21
  item 6; issue 31 item 4), with what loading the driver (psycopg2, through
  store/postgres/driver.py) alone costs a process, and what ``import
  psycopg`` (psycopg 3) would, measured in the same rounds.
- ``batch``: add --from FILE of BATCH_LANES lanes (issue 21, item 5; goal:
  1,000 lanes in at most 2 s on a database storm), a whole process on a fresh
  empty storm of each store (median wall time), beside one add of one lane;
  every lane is then queued in order and verify passes.
- ``next``: next at EVENTS log lines / next at line 1 alone on a database storm
  of the same 100 lanes, both built by bench/build.py; verify passes on the big one.

``--out FILE`` writes long_lived's table into FILE (bench/report.py).
Exit 1 when a check fails (the JSON is printed first); a goal not met is a
measure, not a failure. Ratios only mean something within one run.
"""

from __future__ import annotations

import argparse
import itertools
import functools
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import floors  # noqa: E402
import peers  # noqa: E402
from race import race  # noqa: E402

from tests.pgserver import PgServer  # noqa: E402

#: the goals of issue 21 item 3: the storm's lanes/s over each, at least
GOALS = {"chain_floor": 0.5, "procrastinate_8proc": 1.0}
#: the busy runners' lanes/s with the idle claim --wait waiters attached, at least this share of without (issue 32)
IDLE_GOAL = 0.9


def cli_env() -> dict[str, str]:
    """This environment for a storm-queue process of this tree: no storm or lane of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_ROOT", "STORM_QUEUE_LANE")}
    env["PYTHONPATH"] = str(REPO)
    return env


def sq(root: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storm_queue", *args, "--root", root], capture_output=True, text=True,
                          env=cli_env())


class Place:
    """Where a run makes its databases and roles: a throwaway server, or the
    server of a superuser's URL. Each database is owned by a role of the same
    name, PREFIX_WHAT_N; close() drops every one this run made (and stops a
    throwaway server)."""

    def __init__(self, url: str | None = None, max_connections: int = 100):
        self.server = PgServer(url=url, settings={"max_connections": str(max(100, max_connections))})
        self.prefix = f"stormbench_{os.getpid()}_{secrets.token_hex(3)}"
        self.made: list[str] = []

    def open(self) -> None:
        """Start the throwaway server; or check that the URL connects as a
        superuser (RuntimeError saying so when it does not)."""
        if self.server.external_url is not None:
            with self.server.admin() as conn:
                if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
                    raise RuntimeError("--url must connect as a superuser: the bench makes databases and roles")
        self.server.start()

    def database(self, what: str) -> str:
        """A new empty database and its owner; the owner's URL of it."""
        name = f"{self.prefix}_{what}_{len(self.made)}"
        self.made.append(name)
        self.server.create_role(name)
        self.server.create_database(name, name)
        return self.server.url(name, name)

    def close(self) -> None:
        try:
            for name in reversed(self.made):
                try:
                    self.server.drop_database(name)
                    self.server.drop_role(name)
                except Exception as e:  # keep dropping the others; say which is left
                    print(f"bench: could not drop database and role {name}: {e}", file=sys.stderr)
        finally:
            self.server.stop()


_FRESH = itertools.count()


def timed(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fresh(place: Place, what: str) -> str:
    """A new database with an empty storm in it (``storm-queue init``)."""
    url = place.database(what)
    done = subprocess.run([sys.executable, "-m", "storm_queue", "init", url], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        raise RuntimeError(f"storm-queue init failed: {done.stderr}")
    return url


def _lanes_table(url: str, lanes: int, slots: int) -> None:
    """Declare ``slots`` runner slots and ``unattended`` (a finished lane waits
    for no review), and queue ``lanes`` lanes l00000.. (no dependencies)."""
    from storm_queue.store.postgres import driver

    toml = Path(tempfile.mkdtemp()) / "storm.toml"
    toml.write_text(f"[runner]\nslots = {slots}\nunattended = true\n")
    if sq(url, "declare", str(toml)).returncode:
        raise RuntimeError("storm-queue declare failed")
    with driver.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)", [(f"l{i:05d}", str(i)) for i in range(lanes)])


def _check_runs(url: str, lanes: int, idle: str | None = None) -> dict:
    """Whether every lane was claimed and finished ok exactly once, claims in
    run order (queue order: no lane is prioritised), no request refused or
    expired, and verify sound; with ``idle``, whether no lease went to a
    holder named so (``idle_leased_nothing``)."""
    from storm_queue.store.postgres import driver

    with driver.connect(url) as conn:
        lines = [json.loads(bytes(r[0])) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]
    order = [f"l{i:05d}" for i in range(lanes)]
    return {"claimed_once_in_run_order": [e["slug"] for e in lines if e["action"] == "claim"] == order,
            "finished_once": sorted(e["slug"] for e in lines if e["action"] == "finish") == order,
            "refused_or_expired": sum(e["action"] in ("refused", "expire") for e in lines),
            "verify": "sound" if sq(url, "verify").returncode == 0 else "unsound", "lines": len(lines),
            **({"idle_leased_nothing": not any(e["action"] == "claim" and str(e.get("holder", "")).startswith(idle)
                                               for e in lines)} if idle else {})}


def runners(place: Place, lanes: int, n: int) -> dict:
    """N runner processes, each starting a storm-queue process per command."""
    url = fresh(place, "runners")
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
    floor_rate = floors.bare(place.database("runners_bare"), lanes, n)["per_s"]
    return {"lanes": lanes, "runners": n, "storm_lanes_per_s": round(storm_rate, 1),
            "bare_floor_per_s": round(floor_rate, 1), "ratio": round(storm_rate / floor_rate, 4), **checked}


#: one long-lived runner: one Storm (one connection) looping finish ok then claim, one request a lane
#: (finish --then-claim: issue 32), after its first claim (bench/race.py's worker: prints lanes run,
#: first and last, then its wait polls)
LONG_LIVED = """
import collections, sys, time
from storm_queue.service.storm import Storm

url, holder, profile, lanes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
first_lease = sys.argv[5].split(":") if len(sys.argv) > 5 else None  # SLUG:ISSUE:TOKEN, leased before the race
storm = Storm.find(url)
storm.declaration()  # connected
print("ready", flush=True)
sys.stdin.readline()
if profile:
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
polls, done, first = collections.Counter(), 0, time.perf_counter()
d = ["run", *first_lease] if first_lease else storm.claim(holder=holder).decision.split()
while True:
    if d[0] == "run":
        out = storm.finish(d[1], int(d[3]), "ok", then_claim=True, holder=holder)
        assert out.outcome == "done"
        done += 1
        last = time.perf_counter()
        d = out.claim.decision.split()
    elif d[0] == "wait" and len(d) - 1 < lanes:  # every slot is taken (the rest wait for their batch review)
        polls[d[0]] += 1
        time.sleep(0.002)
        d = storm.claim(holder=holder).decision.split()
    else:
        break
if profile:
    prof.disable()
    prof.dump_stats(profile)
print(done, first, last if done else first, polls["wait"])
"""


def storm_round(place: Place, lanes: int, n: int, profile: str = "", idle: int = 0) -> dict:
    """N runner processes, each one ``Storm`` (the library) on one connection,
    timed as every contender is (bench/race.py); ``per_s`` and the checks.
    With ``idle`` waiters: every one of the N slots is leased first (the
    first N lanes, one a runner, each runner's loop starting with its
    finish --then-claim), then IDLE ``storm-queue claim --wait`` processes
    are attached, each waiting (every slot held) on its own LISTEN
    connection, before the race; they are ended after it, and must have
    leased nothing (``idle_leased_nothing``)."""
    url = fresh(place, "storm_idle" if idle else "storm")
    _lanes_table(url, lanes, n)
    firsts = [""] * n
    waiters: list[subprocess.Popen] = []
    try:
        if idle:
            from storm_queue.service.storm import Storm

            storm = Storm.find(url)
            for i in range(n):
                d = storm.claim(holder=f"runner-{i}").decision.split()
                assert d[0] == "run", d
                firsts[i] = ":".join(d[1:4])
            storm.close()
            waiters = _idle_waiters(url, idle)
        raced = race([[sys.executable, "-c", LONG_LIVED, url, f"runner-{i}", profile if i == 0 else "", str(lanes),
                       *([firsts[i]] if firsts[i] else [])] for i in range(n)])
    finally:
        for w in waiters:
            w.kill()
            w.wait(timeout=30)
    return {"per_s": raced["per_s"], "lanes_per_runner": raced["per_process"],
            "wait_polls": sum(int(e[0]) for e in raced["extra"]), **_check_runs(url, lanes, "idle-" if idle else None)}


def _idle_waiters(url: str, k: int) -> list[subprocess.Popen]:
    """K ``storm-queue claim --wait`` processes (holders idle-0..), each
    waiting on its LISTEN connection (the server shows K sessions that
    last ran LISTEN) before this returns; RuntimeError after 120 s."""
    from storm_queue.store.postgres import driver

    procs = [subprocess.Popen([sys.executable, "-m", "storm_queue", "claim", "--wait", "3600", "--holder", f"idle-{i}",
                               "--root", url], env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for i in range(k)]
    deadline = time.monotonic() + 120
    with driver.connect(url) as conn:
        while True:
            listening = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND query = 'LISTEN storm_queue'").fetchone()[0]
            if listening >= k:
                return procs
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                for p in procs:
                    p.kill()
                    p.wait(timeout=30)
                raise RuntimeError(f"only {listening} of {k} idle claim --wait processes were waiting after 120 s "
                                   f"(or one ended): raise the server's max_connections?")
            time.sleep(0.2)


def contenders(place: Place, args, versions: dict) -> dict:
    """Each contender's name: its round (a function of the round's number)."""
    jobs, n = args.long_lanes, args.runners
    table = {"storm": lambda r: storm_round(place, jobs, n, args.profile if r == 0 else ""),
             **({f"storm_idle_{args.idle_waiters}": lambda r: storm_round(place, jobs, n, idle=args.idle_waiters)}
                if args.idle_waiters else {}),
             "chain_floor": lambda r: floors.chain(place.database("chain"), jobs, n),
             "bare_floor": lambda r: floors.bare(place.database("bare"), jobs, n)}
    for name, (peer, processes, k) in peers.contenders(n).items():
        if isinstance(versions.get(peer), str):  # its version: installed
            table[name] = functools.partial(_peer_round, place, args.python, name, peer, processes, k, jobs)
    return table


def _peer_round(place: Place, python: str, name: str, peer: str, processes: int, k: int, jobs: int, r: int) -> dict:
    return peers.peer_round(python, place.database(name), peer, processes, k, jobs)


def ratio(rounds: dict, over: str, why: str | None) -> dict:
    """The storm's lanes/s over OVER's jobs/s: the median of the rounds' ratios."""
    goal = GOALS.get(over)
    if over not in rounds:
        return {"measured": None, "goal": goal, "met": None, "why": why}
    each = [s["per_s"] / o["per_s"] for s, o in zip(rounds["storm"], rounds[over])]
    measured = statistics.median(each)
    out = {"measured": round(measured, 4), "each_round": [round(x, 4) for x in each]}
    return out if goal is None else {**out, "goal": goal, "met": measured >= goal}


def long_lived(place: Place, args) -> dict:
    """Every contender, one after the other, ROUNDS times; the summary."""
    versions = {}
    if not args.no_peers:
        args.python, why = peers.interpreter(args.peers_python)
        versions = peers.versions(args.python, why)
    table = contenders(place, args, versions)
    rounds: dict[str, list[dict]] = {name: [] for name in table}
    for r in range(args.rounds):
        for name, measure in table.items():
            rounds[name].append(measure(r))
    return summarised(rounds, versions, args)


def summarised(rounds: dict[str, list[dict]], versions: dict, args) -> dict:
    """long_lived's JSON: the storm's median and checks, each contender's
    (or why it is unavailable), the ratios and whether the goals are met."""
    storm = rounds["storm"]

    def median(name: str) -> float:
        return round(statistics.median(x["per_s"] for x in rounds[name]), 1)

    def checks(name: str) -> dict:
        keys = [k for k, v in rounds[name][0].items() if isinstance(v, bool)]
        return {k: all(x[k] for x in rounds[name]) for k in keys}

    shown = {}
    for name in rounds:
        if name != "storm":
            shown[name] = {"jobs_per_s": median(name), "rounds_per_s": [round(x["per_s"], 1) for x in rounds[name]],
                           **checks(name)}
    for peer, version in versions.items():
        for name, (of, _, _) in peers.contenders(args.runners).items():
            if of == peer:
                shown[name] = {"version": version, **shown[name]} if isinstance(version, str) else version
    procrastinate = versions.get("procrastinate")
    why = "not run (--no-peers)" if args.no_peers else None if isinstance(procrastinate, str) else procrastinate["unavailable"]
    ratios = {f"storm_over_{over}": ratio(rounds, over, why if over.startswith("procrastinate") else None)
              for over in ("chain_floor", "procrastinate_8proc", "bare_floor")}
    sound = {**checks("storm"), "refused_or_expired": sum(x["refused_or_expired"] for x in storm),
             "verify": "sound" if all(x["verify"] == "sound" for x in storm) else "unsound"}
    idle = [name for name in rounds if name.startswith("storm_idle_")]
    if idle:  # issue 32, item 5: the busy runners' lanes/s with the idle waiters attached, over without
        each = [i["per_s"] / s["per_s"] for i, s in zip(rounds[idle[0]], storm)]
        ratios["storm_idle_over_storm"] = {"waiters": args.idle_waiters, "measured": round(statistics.median(each), 4),
                                           "each_round": [round(x, 4) for x in each], "goal": IDLE_GOAL,
                                           "met": statistics.median(each) >= IDLE_GOAL}
    met = [v["met"] for v in ratios.values() if "goal" in v]
    return {"lanes": args.long_lanes, "runners": args.runners, "rounds": args.rounds,
            "storm_lanes_per_s": median("storm"), "storm_rounds_per_s": [round(x["per_s"], 1) for x in storm],
            **sound, "lines": storm[-1]["lines"], "lanes_per_runner": storm[-1]["lanes_per_runner"],
            "wait_polls": sum(x["wait_polls"] for x in storm), "contenders": shown, "ratios": ratios,
            "goals_met": None if None in met else all(met) and sound["verify"] == "sound"
            and sound["claimed_once_in_run_order"] and sound["finished_once"]}


def failed_checks(out: dict) -> list[str]:
    """What did not hold: a storm's or a contender's check."""
    bad = []
    for mode, result in out.items():
        if not isinstance(result, dict):
            continue
        for key in ("claimed_once_in_run_order", "finished_once"):
            if result.get(key) is False:
                bad.append(f"{mode}: {key}")
        if result.get("verify", "sound") != "sound" or result.get("refused_or_expired"):
            bad.append(f"{mode}: verify {result.get('verify')}, {result.get('refused_or_expired')} refused or expired")
        for name, c in result.get("contenders", {}).items():
            bad += [f"{mode}: {name}: {k}" for k, v in c.items() if v is False]
    return bad


#: the ratio issue 21 (item 6) asks of bump then unbump, database storm over directory storm
BUMP_PAIR_GOAL = 2.5


def _run_ms(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 0, (argv, done.stderr)
    return (time.perf_counter() - t) * 1000


def bumps(place: Place, n: int = 15) -> dict:
    """``bump a`` then ``unbump a`` as two whole CLI processes, on a database
    storm and on a directory storm, alternated in each of N rounds (the
    ratio is the median of the rounds' ratios); and, in the same rounds,
    what loading the driver (psycopg2, through store/postgres/driver.py)
    alone costs a process, and what ``import psycopg`` (psycopg 3, the
    driver before issue 21, item 6) would,
    each against ``python -c pass``. The processes write and use
    bytecode, as an installed command does (pip compiles it), whatever
    PYTHONDONTWRITEBYTECODE says here."""
    url = fresh(place, "bumps")
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
        bare = _run_ms([sys.executable, "-c", "pass"], env)
        driver = _run_ms([sys.executable, "-c", "from storm_queue.store.postgres import driver"], env)
        psycopg = _run_ms([sys.executable, "-c", "import psycopg"], env)
        if i:
            rounds.append((db, fs, bare, driver, psycopg))
    med = [statistics.median(r[k] for r in rounds) for k in range(5)]
    ratio = statistics.median(r[0] / r[1] for r in rounds)
    return {"bump_unbump_database_ms": round(med[0], 1), "bump_unbump_directory_ms": round(med[1], 1),
            "ratio": round(ratio, 3), "goal": BUMP_PAIR_GOAL, "met": ratio <= BUMP_PAIR_GOAL,
            "python_ms": round(med[2], 1), "load_driver_ms": round(med[3] - med[2], 1),
            "import_psycopg_ms": round(med[4] - med[2], 1),
            "ratio_without_the_driver_import": round(statistics.median((r[0] - 2 * (r[3] - r[2])) / r[1] for r in rounds), 3)}


def batch(place: Place, lanes: int, n: int = 5) -> dict:
    """``add --from FILE`` of LANES lanes (every tenth with no dependency,
    the rest needing the lane before), each run a whole process on a fresh
    storm of each store, against one ``add`` of one lane (``ratio``: the
    batch on a database over the one lane there)."""
    from storm_queue.store.postgres import driver

    work = Path(tempfile.mkdtemp())
    lines = work / "lanes.txt"
    lines.write_text("".join(f"b{i:05d} {i}" + (f" b{i - 1:05d}" if i % 10 else "") + "\n" for i in range(lanes)))
    order = [f"b{i:05d}" for i in range(lanes)]

    def empty(kind: str) -> str:
        if kind == "database":
            return fresh(place, "batch")
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
    with driver.connect(made["database"][0]) as conn:
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


def history(place: Place, events: int, lanes: int = 100, n: int = 15) -> dict:
    """``next`` on a database storm of EVENTS lines after line 1 / on one of
    line 1 alone, the same LANES lanes (both built by bench/build.py)."""
    from build import build_database

    def made(what: str, count: int) -> tuple[str, float]:
        url = place.database(what)
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


MODES = ("bump", "batch", "next", "runners", "long_lived")


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=MODES, action="append", metavar="MODE",
                    help=f"run only this measure ({', '.join(MODES)}; may be repeated)")
    ap.add_argument("--url", help="a superuser's URL: run on that server (making and dropping this run's own "
                                  "databases and roles) instead of a throwaway one")
    ap.add_argument("--runners", type=int, default=8, help="runner processes (and each contender's processes)")
    ap.add_argument("--long-lanes", type=int, default=2000, help="lanes (jobs) of the long-lived runners and contenders")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of long_lived's contenders")
    ap.add_argument("--no-peers", action="store_true", help="leave procrastinate and pgqueuer out")
    ap.add_argument("--peers-python", help=f"the interpreter that has the peers (default: made at {peers.VENV})")
    ap.add_argument("--lanes", type=int, default=80, help="lanes of the process-per-command runners")
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--batch-lanes", type=int, default=1000, help="lanes of one add --from FILE")
    ap.add_argument("--idle-waiters", type=int, default=64,
                    help="long_lived also runs the storm with this many idle claim --wait processes attached "
                         "(0: not run); the throwaway server's max_connections is raised to fit them")
    ap.add_argument("--profile", default="", help="write the first long-lived runner's cProfile stats here (round 1)")
    ap.add_argument("--smoke", action="store_true", help="the smallest sizes, to check that it runs")
    ap.add_argument("--out", metavar="FILE", help="write long_lived's table into this markdown file "
                                                  "(between its markers, the rest kept)")
    args = ap.parse_args()
    if args.smoke:
        args.lanes, args.long_lanes, args.runners, args.events, args.rounds, args.batch_lanes = 4, 6, 2, 40, 1, 12
        args.idle_waiters = min(args.idle_waiters, 4)
    if args.idle_waiters < 0:
        ap.error("--idle-waiters takes a number of at least 0")
    if min(args.runners, args.long_lanes, args.rounds, args.lanes) < 1:
        ap.error("--runners, --long-lanes, --rounds and --lanes take a number of at least 1")
    return args


def measured(place: Place, args: argparse.Namespace) -> dict:
    """Each MODE asked for (all by default): its figures."""
    measures = {"bump": lambda: bumps(place, 3 if args.smoke else 15),
                "batch": lambda: batch(place, args.batch_lanes, 1 if args.smoke else 5),
                "next": lambda: history(place, args.events, n=3 if args.smoke else 15),
                "runners": lambda: runners(place, args.lanes, args.runners),
                "long_lived": lambda: long_lived(place, args)}
    return {name: measure() for name, measure in measures.items() if not args.only or name in args.only}


def main() -> None:
    args, started, load = arguments(), time.time(), os.getloadavg()[0]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # drop what was made, as Ctrl-C does
    place = Place(args.url, max_connections=2 * args.idle_waiters + 4 * args.runners + 40)
    try:
        place.open()
    except Exception as e:
        place.close()
        sys.exit(f"bench: cannot use {'--url' if args.url else 'a throwaway'} server: {e}")
    out = None
    try:
        out = measured(place, args)
    except KeyboardInterrupt:
        pass
    finally:
        place.close()
    if out is None:
        sys.exit(f"bench: interrupted; this run's databases and roles ({place.prefix}_*) were dropped")
    out["place"] = {"server": "--url" if args.url else "throwaway", "prefix": place.prefix}
    print(json.dumps(out, indent=2))
    if args.out and "long_lived" in out:
        import report

        report.write(args.out, out["long_lived"], sys.argv[1:], started, (load, os.getloadavg()[0]))
    bad = failed_checks(out)
    if bad:
        sys.exit("bench: checks failed: " + "; ".join(bad))


if __name__ == "__main__":
    main()

"""The runners' benchmark: what a claim costs, as whole processes of the
installed ``storm-queue`` console script, each figure a median after a
warm-up, and each ratio's two figures taken back to back:

    python bench/claim.py [--lanes 200] [--runs 15] [--runners 4]

- ``claim`` that leases nothing (all slots busy: a runner's poll) over
  ``next`` on the same storm (the read it replaces) and over
  ``python -I -c pass``;
- a lane's whole lease, ``claim`` then ``finish --result ok``, over one
  ``bump`` (a recorded request);
- ``finish --then-claim`` (a lane finished failed and claimed again in one
  request) over one ``claim`` that leases, each a whole process, by its
  median CPU time (user + system, the child's own);
- ``--runners`` processes claiming and finishing every lane of a storm
  with ``slots`` = runners: lanes per second, and a check that every lane
  was claimed exactly once, tokens are 1, and ``storm-queue verify``
  accepts the log (exit 1 when it does not).

It prints a Markdown report; no figure is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SQ = [os.path.join(os.path.dirname(sys.executable), "storm-queue")]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}


def sq(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(SQ + list(args) + ["--root", str(root)], capture_output=True, text=True, env=env(), timeout=120)
    if check and done.returncode != 0:
        raise SystemExit(f"storm-queue {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def timed(argv: list[str], runs: int, before=None) -> float:
    """Median wall time of ``argv`` in ms (``before`` runs untimed before each)."""
    times = []
    for i in range(runs + 2):
        if before:
            before()
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env(), timeout=120, check=False)
        if i >= 2:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def cpu_ms(argv: list[str]) -> tuple[float, str]:
    """The CPU time (user + system) of one run of ``argv`` as a process, in ms, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=120, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, done.stdout


def pair_over_claim(work: Path, runs: int) -> tuple[float, float]:
    """Median CPU ms of ``finish --then-claim`` (one lane failed and claimed
    again, over and over) and of a ``claim`` that leases (its finish
    untimed), each a whole process after two warm-ups."""
    pair_root = storm(work / "pair", 1, "[runner]\nattempts = 1000000\n")
    claim_root = storm(work / "alone", 1, "[runner]\nattempts = 1000000\n")
    token = sq(pair_root, "claim").stdout.split()[3]
    pairs, claims = [], []
    for _ in range(runs + 2):
        ms, said = cpu_ms(SQ + ["finish", "lane00000", "--token", token, "--result", "failed", "--then-claim",
                                "--root", str(pair_root)])
        pairs.append(ms)
        token = said.split()[3]
        ms, said = cpu_ms(SQ + ["claim", "--root", str(claim_root)])
        claims.append(ms)
        sq(claim_root, "finish", "lane00000", "--token", said.split()[3], "--result", "failed")
    return statistics.median(pairs[2:]), statistics.median(claims[2:])


def storm(where: Path, lanes: int, toml: str) -> Path:
    where.mkdir(parents=True)
    (where / "queue.txt").write_text("".join(f"lane{i:05d} {i}\n" for i in range(lanes)))
    (where / "storm.toml").write_text(toml)
    return where


def runners(root: Path, count: int, lanes: int) -> dict:
    script = (
        "import subprocess, sys\n"
        "sq, root = sys.argv[1], sys.argv[2]\n"
        "while True:\n"
        "    out = subprocess.run([sq, 'claim', '--root', root], capture_output=True, text=True).stdout.split()\n"
        "    if not out or out[0] == 'empty': break\n"
        "    if out[0] == 'run':\n"
        "        subprocess.run([sq, 'finish', out[1], '--token', out[3], '--result', 'ok', '--root', root], check=True,\n"
        "                       capture_output=True)\n"
        "        with open(root + '/integrated.txt', 'a') as f: f.write(out[1] + '\\n')\n"
    )
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", script, SQ[0], str(root)], env=env()) for _ in range(count)]
    for p in procs:
        p.wait(timeout=3600)
    took = time.perf_counter() - start
    claims = [json.loads(line) for line in (root / "priority.log").read_text().splitlines()]
    claims = [e for e in claims if e["action"] == "claim"]
    slugs = [e["slug"] for e in claims]
    ok = (len(slugs) == lanes == len(set(slugs)) and all(e["token"] == 1 for e in claims)
          and sq(root, "verify", check=False).returncode == 0)
    return {"seconds": took, "lanes_per_s": lanes / took, "claims": len(claims), "ok": ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lanes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--runners", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sq-claim-bench-"))
    try:
        busy = storm(work / "busy", 3, "[runner]\nslots = 1\n")
        sq(busy, "claim")  # the one slot is taken: every later claim is a poll that leases nothing
        poll = timed(SQ + ["claim", "--root", str(busy)], args.runs)
        nxt = timed(SQ + ["next", "--root", str(busy)], args.runs)
        python = timed([sys.executable, "-I", "-c", "pass"], args.runs)
        poll2 = timed(SQ + ["claim", "--root", str(busy)], args.runs)

        # one lane claimed and failed over and over (a budget that never runs out), then bumped over and over
        cycle_root = storm(work / "cycle", 1, "[runner]\nattempts = 1000000\n")
        cycles = []
        for _ in range(args.runs + 2):
            start = time.perf_counter()
            out = sq(cycle_root, "claim").stdout.split()
            sq(cycle_root, "finish", out[1], "--token", out[3], "--result", "failed")
            cycles.append((time.perf_counter() - start) * 1000)
        cycle = statistics.median(cycles[2:])
        bump = timed(SQ + ["bump", "lane00000", "--root", str(cycle_root)], args.runs)
        pair_cpu, claim_cpu = pair_over_claim(work, args.runs)

        fleet = runners(storm(work / "fleet", args.lanes, f"[runner]\nslots = {args.runners}\n"), args.runners, args.lanes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    claim_ms = statistics.mean([poll, poll2])
    print(f"# claim benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]})\n")
    print("| figure | measured |\n|---|---|")
    print(f"| claim that leases nothing (a poll) | {claim_ms:.1f} ms |")
    print(f"| next on the same storm | {nxt:.1f} ms |")
    print(f"| python -I -c pass | {python:.1f} ms |")
    print(f"| claim + finish of one lane | {cycle:.1f} ms |")
    print(f"| bump (a recorded request) | {bump:.1f} ms |")
    print(f"| poll / next | {claim_ms / nxt:.2f} |")
    print(f"| poll / python -I -c pass | {claim_ms / python:.2f} |")
    print(f"| claim + finish / bump | {cycle / bump:.2f} |")
    print(f"| finish --then-claim, CPU (median, whole process) | {pair_cpu:.1f} ms |")
    print(f"| claim that leases, CPU (median, whole process) | {claim_cpu:.1f} ms |")
    print(f"| finish --then-claim / claim (CPU) | {pair_cpu / claim_cpu:.2f} |")
    print(f"| {args.runners} runners, {args.lanes} lanes | {fleet['lanes_per_s']:.1f} lanes/s "
          f"({fleet['seconds']:.1f} s); every lane claimed once with token 1 and verify exit 0: "
          f"{'yes' if fleet['ok'] else 'NO'} |")
    return 0 if fleet["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

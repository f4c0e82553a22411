"""A request's start-up against a reader's and the interpreter's, in one run:

    python bench/startup.py [--rounds K] [--out bench/README.md] [--json] [--smoke]

On two storms of 100 lanes built empty by ``bench/build.py``, as whole
processes of the installed ``storm-queue`` console script, in ``K`` rounds
(default 30), each running back to back:

- ``python -I -c pass`` and ``next`` on the storm that never records a line
  (wall time): ``next`` at 0 lines over the bare interpreter (goal: at
  most 3.0);
- ``next``, ``bump SLUG`` and ``unbump SLUG`` on the other storm (CPU time,
  user + system, of the child alone, from ``getrusage``): a bump's CPU over
  a ``next``'s on the same storm (goal: at most 1.15), the unbump putting
  the lane back as it was.

A ratio is the median of the rounds' ratios, so that a busy moment on
shared cores spoils one round, not the figure. It also reports, from one
``python -X importtime`` of each command, how many modules it loads and the
time it spends importing them. ``--out FILE`` writes the report into FILE
between the markers below, keeping the rest of it. ``--smoke`` runs three
rounds, for the test suite (its figures mean nothing). A missed goal is
reported, not an error; a command that fails exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build  # noqa: E402
import run as bench  # noqa: E402  -- the console script, its environment, the import profile
import verify as verify_bench  # noqa: E402  -- put_section

GOALS = {"next_0_over_python": 3.0, "bump_cpu_over_next_cpu": 1.15}
BEGIN, END = bench.REQUESTS_BEGIN, bench.REQUESTS_END


def once(argv: list[str]) -> tuple[float, float]:
    """Run ``argv`` to its end: (wall seconds, CPU seconds of the child alone)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=bench.env())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(empty: Path, root: Path, rounds: int) -> dict:
    """The rounds described above, after one warm-up of each command: the
    wall times of ``next`` on ``empty`` (a storm that never records a line),
    the CPU times of ``next``, ``bump`` and ``unbump`` on ``root``."""
    sq = bench.command()
    python = [sys.executable, "-I", "-c", "pass"]
    nxt0 = sq + ["next", "--root", str(empty)]
    nxt = sq + ["next", "--root", str(root)]
    slug = "l50"
    bump, unbump = sq + ["bump", slug, "--root", str(root)], sq + ["unbump", slug, "--root", str(root)]
    for argv in (python, nxt0, nxt, bump, unbump):
        once(argv)
    got: dict[str, list[float]] = {k: [] for k in ("python_s", "next_s", "next_cpu", "bump_cpu", "unbump_cpu")}
    for _ in range(rounds):
        got["python_s"].append(once(python)[0])
        got["next_s"].append(once(nxt0)[0])
        got["next_cpu"].append(once(nxt)[1])
        got["bump_cpu"].append(once(bump)[1])
        got["unbump_cpu"].append(once(unbump)[1])
    med = {k: statistics.median(v) for k, v in got.items()}
    ratios = {
        "next_0_over_python": statistics.median(n / p for n, p in zip(got["next_s"], got["python_s"])),
        "bump_cpu_over_next_cpu": statistics.median(b / n for b, n in zip(got["bump_cpu"], got["next_cpu"]) if n > 0),
    }
    imports = {"next": bench.import_profile(nxt0), "bump": bench.import_profile(bump)}
    once(unbump)  # the profiled bump is undone too
    return {"rounds": rounds, "medians": med, "ratios": ratios, "imports": imports}


def report(result: dict, command_line: str) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    med, ratios, imports = result["medians"], result["ratios"], result["imports"]
    load = os.getloadavg()[0]

    def row(name: str, measured: str, key: str) -> str:
        value, goal = ratios[key], GOALS[key]
        return f"| {name} ({measured}) | {value:.2f} | ≤ {goal:g} | {'yes' if value <= goal else '**no**'} |"

    out = [
        BEGIN,
        "## A request's start-up (bench/startup.py)",
        "",
        f"Measured {now} on this machine ({os.cpu_count()} cores shared with other work, load average "
        f"{load:.1f} at the end, {platform.system()} {platform.release()}, Python {platform.python_version()}), by:",
        "",
        f"    {command_line}",
        "",
        "Two storms of 100 lanes, built empty: `next` at 0 lines is timed on one that never records a line; "
        "`next`, `bump l50` and `unbump l50` share the other (its log holds the rounds' requests). Whole "
        f"processes of the installed console script, {result['rounds']} rounds of `python -I -c pass`, `next` "
        "(each storm), `bump l50`, `unbump l50` back to back; each ratio is the median of the rounds' ratios. "
        "CPU time is the child's own user + system time.",
        "",
        "| ratio | measured | goal | met |",
        "|---|---:|---:|---|",
        row("`next` at 0 lines / `python -I -c pass`, wall", f"{1000 * med['next_s']:.1f} / {1000 * med['python_s']:.1f} ms",
            "next_0_over_python"),
        row("CPU of `bump` / CPU of `next`", f"{1000 * med['bump_cpu']:.1f} / {1000 * med['next_cpu']:.1f} ms",
            "bump_cpu_over_next_cpu"),
        "",
    ]
    for name, prof in imports.items():
        costly = ", ".join(f"`{m}` {us / 1000:.1f} ms" for us, m in prof["costliest"])
        out.append(f"`python -X importtime` of `{name}`: {prof['modules']} modules imported in "
                   f"{prof['total_us'] / 1000:.1f} ms; the costliest by self time: {costly}.")
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", help="write the report into this markdown file (between its markers)")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="three rounds: a check that the harness runs")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 3
    with tempfile.TemporaryDirectory(prefix="storm-requests-") as work:
        empty, root = Path(work) / "empty", Path(work) / "storm"
        build.build(str(empty), 0, 100)
        build.build(str(root), 0, 100)
        result = measure(empty, root, args.rounds)
    line = "python bench/startup.py" + ("" if args.rounds == 30 or args.smoke else f" --rounds {args.rounds}") \
        + (" --smoke" if args.smoke else "") + (f" --out {args.out}" if args.out else "")
    text = report(result, line)
    print(json.dumps(result, indent=1) if args.json else text)
    if args.out:
        verify_bench.put_section(Path(args.out), text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())

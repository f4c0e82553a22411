"""The storm-queue benchmark: one command builds the storms, times the
commands as whole processes and prints the figures the issue asks for.

    python bench/run.py --out bench/README.md

builds (with bench/build.py) storms of 0, 10,000, 100,000 and 1,000,000 log
lines over 100 lanes, of 10,000 and 100,000 lanes, and a dependency chain
100,000 lanes deep; times ``next``, ``list --json``, ``bump`` + ``unbump``
and ``verify`` on each (whole processes of the installed ``storm-queue``
console script, after a warm-up, medians of several runs); and measures
in the same run:

- ``next`` at 1,000,000 lines over ``next`` at 0 lines (goal: at most 1.15);
- ``next`` at 0 lines over ``python -I -c pass`` (goal: at most 3.5);
- 8 concurrent writer processes doing 200 requests each, in requests per
  second, over one process doing as many append, fsync, rename, directory
  fsync cycles (goal: at least 0.5); then it checks that no record was lost
  or duplicated and that ``storm-queue verify`` accepts the log;
- peak memory (the child's ru_maxrss) of ``list --json`` at 1,000,000 lines
  over that at 0 lines (goal: at most 1.2).

It takes about fifteen minutes on two cores, most of it building the
million-line storm (about six minutes) and the deep chain; ``--work DIR`` keeps the built storms in DIR and
reuses them on the next run. ``--smoke`` runs the smallest sizes once, for
the test suite (its figures mean nothing). Exits 1 when a correctness check
fails; a missed speed goal is reported, not an error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import build  # noqa: E402
import verify as verify_bench  # noqa: E402
from storm_queue.store.directory.log import checkpoint  # noqa: E402

#: (name, events, lanes, deep)
SIZES = [("0 lines", 0, 100, False), ("10k lines", 10_000, 100, False), ("100k lines", 100_000, 100, False),
         ("1M lines", 1_000_000, 100, False), ("10k lanes", 1_000, 10_000, False),
         ("100k lanes", 1_000, 100_000, False), ("deep 100k", 10, 100_000, True)]
SMOKE_SIZES = [("0 lines", 0, 10, False), ("1M lines", 300, 10, False), ("deep 100k", 5, 50, True)]
WRITERS, REQUESTS = 8, 200

#: the markers of bench/startup.py's section (kept when this report is written)
REQUESTS_BEGIN, REQUESTS_END = "<!-- bench/startup.py: begin -->", "<!-- bench/startup.py: end -->"

GOALS = {"next_1m_over_0": ("<=", 1.15), "next_0_over_python": ("<=", 3.5),
         "writers_over_loop": (">=", 0.5), "memory_1m_over_0": ("<=", 1.2)}


def command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m storm_queue``."""
    script = Path(sys.executable).parent / "storm-queue"
    return [str(script)] if script.exists() else [sys.executable, "-m", "storm_queue"]


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_ROOT", "STORM_QUEUE_LANE")}
    out["PYTHONPATH"] = str(REPO) + os.pathsep + out.get("PYTHONPATH", "")
    return out


def timed(argv: list[str], runs: int, warmup: int = 2) -> float:
    """Median wall seconds of ``runs`` whole-process runs after ``warmup``."""
    times = []
    for i in range(warmup + runs):
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
        took = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
        if i >= warmup:
            times.append(took)
    return statistics.median(times)


MEMORY = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_kib(argv: list[str], runs: int) -> int:
    """The child's peak resident memory in KiB (median of ``runs``), each
    measured from a fresh wrapper process so that nothing else is counted."""
    got = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", MEMORY, *argv], capture_output=True, text=True, env=env(), check=True)
        got.append(int(out.stdout.strip()))
    return int(statistics.median(got))


WRITER = """
import sys, time
from storm_queue.service.storm import Storm
root, k, n, go, slug = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
storm = Storm(root, wait=600)
while time.time() < go:
    time.sleep(0.001)
for i in range(n):
    ask = storm.bump if i % 2 == 0 else storm.unbump
    out = ask(slug, reason=f"w{k}-{i}")
    if not out.recorded or out.outcome != "done":
        sys.exit(f"writer {k} request {i}: {out.outcome} {out.code} {out.message}")
"""


def concurrent_writers(root: Path, writers: int, requests: int) -> dict:
    """``writers`` processes doing ``requests`` requests each through the
    library, started together; then the log is checked."""
    before = sum(1 for _ in open(root / "priority.log", "rb")) if (root / "priority.log").exists() else 0
    go = time.time() + 1.0 + 0.1 * writers  # every process imported and waiting
    # each writer its own lane at the head of a chain: none needs another's, so every request is admitted
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(k), str(requests), str(go), f"l{build.CHAIN * k}"],
                              env=env()) for k in range(writers)]
    codes = [p.wait() for p in procs]
    took = time.time() - go
    reasons: dict[str, int] = {}
    lines = 0
    with open(root / "priority.log", "rb") as f:
        for number, line in enumerate(f, start=1):
            if number > before:
                lines += 1
                reason = json.loads(line).get("reason")
                reasons[reason] = reasons.get(reason, 0) + 1
    expected = {f"w{k}-{i}" for k in range(writers) for i in range(requests)}
    lost = len(expected - set(reasons))
    duplicated = sum(c - 1 for r, c in reasons.items() if r in expected and c > 1) + len(set(reasons) - expected)
    verify = subprocess.run(command() + ["verify", "--root", str(root)], capture_output=True, env=env())
    return {"requests_per_s": writers * requests / took, "seconds": took, "exit_codes_ok": all(c == 0 for c in codes),
            "new_lines": lines, "lost": lost, "duplicated": duplicated, "verify_exit": verify.returncode}


def plain_loop(directory: Path, cycles: int) -> dict:
    """One process doing ``cycles`` append, fsync, rename, directory fsync cycles."""
    directory.mkdir(parents=True, exist_ok=True)
    log, target = directory / "plain.log", directory / "plain.witness"
    line = b'{"v":1,"seq":1,"at":"2025-01-01T00:00:00.000000Z","action":"bump","by":"operator:x","prev":null}\n'
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    start = time.perf_counter()
    for i in range(cycles):
        os.write(fd, line)
        os.fsync(fd)
        tmp = directory / f".plain.witness.tmp.{i}"
        tfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(tfd, b'{"length": %d}\n' % i)
        os.close(tfd)
        os.rename(tmp, target)
        os.fsync(dfd)
    took = time.perf_counter() - start
    os.close(fd)
    os.close(dfd)
    return {"requests_per_s": cycles / took, "seconds": took}


def import_profile(argv: list[str]) -> dict:
    """``python -X importtime`` of one run: the microseconds spent importing
    (the sum over top-level imports) and the costliest modules by self time."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env())
    total, costly = 0, []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative, name = line[len("import time:"):].split("|")
        if not name.startswith("  "):  # a top-level import: its cumulative time counts once
            total += int(cumulative)
        costly.append((int(self_us), name.strip()))
    costly.sort(reverse=True)
    return {"total_us": total, "modules": len(costly), "costliest": costly[:6]}


def built(work: Path, name: str, events: int, lanes: int, deep: bool) -> tuple[Path, float, bool]:
    """The storm for a size, the seconds its build took, and whether it was
    reused (built by an earlier run into the same ``work``)."""
    root = work / name.replace(" ", "-")
    stamp = root / ".bench-built"
    want = {"events": events, "lanes": lanes, "deep": deep}
    if stamp.exists():
        had = json.loads(stamp.read_text())
        if {k: had.get(k) for k in want} == want:
            return root, had.get("seconds", 0.0), True
    if root.exists():
        shutil.rmtree(root)
    start = time.perf_counter()
    build.build(str(root), events, lanes, deep)
    took = time.perf_counter() - start
    stamp.write_text(json.dumps({**want, "seconds": took}))
    return root, took, False


def fresh_copy(root: Path, where: Path) -> Path:
    if where.exists():
        shutil.rmtree(where)
    shutil.copytree(root, where, symlinks=True)
    return where


def run(work: Path, smoke: bool, log=print) -> dict:
    import compileall

    compileall.compile_dir(str(REPO / "storm_queue"), quiet=1)  # as an installed package has it
    sizes = SMOKE_SIZES if smoke else SIZES
    runs, slow_runs = (1, 1) if smoke else (11, 3)
    cli = command()
    rows, roots = [], {}
    for name, events, lanes, deep in sizes:
        root, build_s, reused = built(work, name, events, lanes, deep)
        roots[name] = root
        log(f"{name}: built in {build_s:.1f} s" + (" (by an earlier run)" if reused else ""))
        big = events >= 100_000 or lanes >= 100_000
        row = {"storm": name, "events": events, "lanes": lanes, "build_s": round(build_s, 1), "reused": reused}
        row["next_ms"] = 1000 * timed(cli + ["next", "--root", str(root)], runs)
        row["list_json_ms"] = 1000 * timed(cli + ["list", "--json", "--root", str(root)], slow_runs if big else runs)
        scratch = fresh_copy(root, work / "scratch")  # requests never touch the built storm
        slug = f"l{lanes - 1}"  # the end of a chain: no lane needs it, so its unbump is admitted
        pair = []
        for _ in range(1 + (slow_runs if big else runs)):
            start = time.perf_counter()
            for verb in ("bump", "unbump"):
                done = subprocess.run(cli + [verb, slug, "--root", str(scratch)], capture_output=True, env=env())
                if done.returncode != 0:
                    raise SystemExit(f"{verb} on {name}: {done.stderr.decode(errors='replace')}")
            pair.append(time.perf_counter() - start)
        row["bump_unbump_ms"] = 1000 * statistics.median(pair[1:])
        shutil.rmtree(scratch)
        row["verify_ms"] = 1000 * timed(cli + ["verify", "--root", str(root)], 1 if big else (slow_runs if events else runs),
                                        warmup=0 if big else 1)
        rows.append(row)
        log(f"  next {row['next_ms']:.1f} ms, list --json {row['list_json_ms']:.1f} ms, "
            f"bump+unbump {row['bump_unbump_ms']:.1f} ms, verify {row['verify_ms']:.1f} ms")
    by = {r["storm"]: r for r in rows}
    python_ms = 1000 * timed([sys.executable, "-I", "-c", "pass"], runs)
    zero, million = roots["0 lines"], roots["1M lines"]
    # the two figures of a ratio are taken back to back, so that a busy moment spoils neither alone
    next_0 = 1000 * timed(cli + ["next", "--root", str(zero)], runs)
    next_1m = 1000 * timed(cli + ["next", "--root", str(million)], runs)
    mem_0 = peak_kib(cli + ["list", "--json", "--root", str(zero)], 3)
    mem_1m = peak_kib(cli + ["list", "--json", "--root", str(million)], 3)
    imports = import_profile(["-m", "storm_queue", "next", "--root", str(zero)])
    log("writers ...")
    writers, requests = (2, 5) if smoke else (WRITERS, REQUESTS)
    team = concurrent_writers(fresh_copy(zero, work / "writers"), writers, requests)
    alone = plain_loop(work / "plain", writers * requests)
    shutil.rmtree(work / "writers")
    shutil.rmtree(work / "plain")
    ratios = {
        "next_1m_over_0": next_1m / next_0,
        "next_0_over_python": next_0 / python_ms,
        "writers_over_loop": team["requests_per_s"] / alone["requests_per_s"],
        "memory_1m_over_0": mem_1m / mem_0,
    }
    return {"rows": rows, "python_ms": python_ms, "next_0_ms": next_0, "next_1m_ms": next_1m,
            "memory_kib": {"0 lines": mem_0, "1M lines": mem_1m}, "writers": team, "plain_loop": alone,
            "writers_n": writers, "requests_n": requests, "ratios": ratios, "by": by, "imports": imports}


def met(name: str, value: float) -> bool:
    op, goal = GOALS[name]
    return value <= goal if op == "<=" else value >= goal


def report(result: dict, command_line: str, took: float) -> str:
    r, w, p = result["ratios"], result["writers"], result["plain_loop"]
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# storm-queue benchmark",
        "",
        f"Measured {now} on this machine ({os.cpu_count()} cores shared with other work, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, the storms on "
        f"{_fs_type(REPO)}), by:",
        "",
        f"    {command_line}",
        "",
        f"which took {took / 60:.1f} minutes"
        + (", plus the build column for the storms an earlier run had built into the same --work"
           if any(row["reused"] for row in result["rows"]) else "")
        + ". Storms are built by `bench/build.py` (see its docstring: real lanes,",
        f"real planned requests appended by the library's writer, the checkpoint {checkpoint.EVERY - 1} lines behind the end).",
        "Commands run as whole processes of the installed `storm-queue` console script with compiled",
        "bytecode; each figure is the median of several runs after a warm-up (verify on the big storms: one run).",
        "",
        "| storm | log lines | lanes | build | next | list --json | bump + unbump | verify |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        out.append(f"| {row['storm']} | {row['events']:,} | {row['lanes']:,} | {row['build_s']:.1f} s | {row['next_ms']:.1f} ms | "
                   f"{row['list_json_ms']:.1f} ms | {row['bump_unbump_ms']:.1f} ms | {_ms(row['verify_ms'])} |")
    out += [
        "",
        "Each ratio's two figures are measured back to back, after the table, so that a busy moment",
        "on the shared cores spoils neither alone; they can differ from the table's figures.",
        "",
        "| ratio | measured | goal | met |",
        "|---|---:|---:|---|",
        f"| `next` at 1,000,000 lines / at 0 lines ({result['next_1m_ms']:.1f} / {result['next_0_ms']:.1f} ms) | "
        f"{r['next_1m_over_0']:.2f} | ≤ 1.15 | {_yes(met('next_1m_over_0', r['next_1m_over_0']))} |",
        f"| `next` at 0 lines / `python -I -c pass` ({result['next_0_ms']:.1f} / {result['python_ms']:.1f} ms) | "
        f"{r['next_0_over_python']:.2f} | ≤ 3.5 | {_yes(met('next_0_over_python', r['next_0_over_python']))} |",
        f"| {result['writers_n']} writers × {result['requests_n']} requests ({w['requests_per_s']:.0f}/s) / one process's "
        f"append-fsync-rename-dirfsync loop ({p['requests_per_s']:.0f}/s) | {r['writers_over_loop']:.2f} | ≥ 0.5 | "
        f"{_yes(met('writers_over_loop', r['writers_over_loop']))} |",
        f"| peak memory of `list --json` at 1,000,000 lines / at 0 lines ({result['memory_kib']['1M lines'] / 1024:.1f} / "
        f"{result['memory_kib']['0 lines'] / 1024:.1f} MiB) | {r['memory_1m_over_0']:.2f} | ≤ 1.2 | "
        f"{_yes(met('memory_1m_over_0', r['memory_1m_over_0']))} |",
        "",
        f"After the writers: {w['new_lines']} new log lines, {w['lost']} lost, {w['duplicated']} duplicated, "
        f"`storm-queue verify` exit {w['verify_exit']}.",
        "",
        f"`python -X importtime -m storm_queue next` at 0 lines: {result['imports']['modules']} modules imported in "
        f"{result['imports']['total_us'] / 1000:.1f} ms (the interpreter's own start-up included); the costliest by "
        "self time: " + ", ".join(f"`{name}` {us / 1000:.1f} ms" for us, name in result["imports"]["costliest"]) + ".",
        "",
        "What the ratios depend on:",
        "",
        "- `next` at a million lines reads the witness, the checkpoint, the one line ending at the",
        "  checkpoint's offset (found by seeking back from it) and the lines after it (fewer than",
        f"  {checkpoint.EVERY}); nothing else grows with the log.",
        "- `next` at 0 lines pays for the interpreter, the console script's own `import re`, and the",
        "  storm-queue modules it needs; `next` and `list --json` never load click, rich, filelock,",
        "  dataclasses or typing (tests/unit/test_startup.py keeps it so).",
        "- A request holds the writers' lock while it reads the log's tail, `queue.txt` and the ledgers,",
        "  plans, appends and fsyncs its line, and replaces the witness (a new file fsynced, renamed, the",
        "  directory fsynced), as the contract asks: three fsyncs and the Python work, one writer at a",
        "  time. The plain loop does two fsyncs and no other work, so the ratio falls as the machine's",
        "  CPU is shared (the two cores here are shared with other work) and rises as fsync gets slower.",
        "- `list --json` at a million lines holds the checkpoint's state and the lines after it, never",
        "  the log.",
    ]
    return "\n".join(out) + "\n"


def _ms(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 10_000 else f"{ms:.1f} ms"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _fs_type(path: Path) -> str:
    try:
        best = ("", "a file system")
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if str(path).startswith(parts[1]) and len(parts[1]) >= len(best[0]):
                    best = (parts[1], parts[2])
        return best[1]
    except OSError:
        return "a file system"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the report (markdown) to this file, e.g. bench/README.md")
    parser.add_argument("--work", help="keep the built storms here and reuse them (default: a temporary directory)")
    parser.add_argument("--smoke", action="store_true", help="the smallest sizes, once: a check that the harness runs")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args()
    started = time.monotonic()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="storm-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = run(work, args.smoke, log=lambda s: print(s, file=sys.stderr, flush=True))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    text = report(result, "python bench/run.py" + (" --smoke" if args.smoke else "") + (f" --out {args.out}" if args.out else "")
                  + (f" --work {args.work}" if args.work else ""), took)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "by"}, indent=1))
    else:
        print(text)
    if args.out:
        out = Path(args.out)
        old = out.read_text() if out.exists() else ""
        kept = ""  # the sections bench/verify.py and bench/startup.py wrote into the same file stay
        for begin, end in ((verify_bench.BEGIN, verify_bench.END), (REQUESTS_BEGIN, REQUESTS_END)):
            if begin in old and end in old:
                kept += "\n" + begin + old.split(begin, 1)[1].split(end, 1)[0] + end + "\n"
        out.write_text(text + kept)
    w = result["writers"]
    sound = w["exit_codes_ok"] and w["lost"] == 0 and w["duplicated"] == 0 and w["verify_exit"] == 0 \
        and w["new_lines"] == result["writers_n"] * result["requests_n"]
    if not sound:
        print(f"FAILED: the concurrent writers' log is not whole: {w}", file=sys.stderr)
    return 0 if sound else 1


if __name__ == "__main__":
    sys.exit(main())

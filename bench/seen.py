"""The cost of seeing a storm from anywhere (issue 34): one command measures

    python bench/seen.py [--work DIR] [--minutes 3] [--runs 15] [--out bench/README.md]

- ``metrics`` against ``next`` as whole processes of the installed console
  script, interleaved run by run so that a busy moment on the shared cores
  spoils neither alone, medians, on a storm of 100 lanes with an empty log
  and with a log of 1,000,000 lines (built by bench/build.py; goal: at most
  1.2 on both);
- ``GET /`` of ``storm-queue serve`` on a storm of 10,000 lanes, right after
  a change made from outside (so it reads the storm and renders the page
  anew; goal: under 1 s), and served again unchanged (from its cache);
- the resident memory of a ``serve`` process over a long run of updates
  (``--minutes``, 3 by default; ``--minutes 60`` for the hour the issue
  names): a writer bumps and un-bumps a lane every second while ``--pages``
  open pages (threads doing what the page's script does: ask /api/head
  every second, fetch the page again when its version changed) follow
  the storm; RSS sampled every 10 s (goal: the last sample no more than
  1.1 times the first after a minute's warm-up).

``--work DIR`` keeps the built storms and reuses them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import run as bench  # noqa: E402  (bench/run.py: built, timed, command, env)

BEGIN, END = "<!-- bench/seen.py: begin -->", "<!-- bench/seen.py: end -->"


def interleaved(a: list[str], b: list[str], runs: int, warmup: int = 2) -> tuple[float, float]:
    """Median wall seconds of ``a`` and of ``b``, run alternately."""
    got: tuple[list[float], list[float]] = ([], [])
    for i in range(warmup + runs):
        for k, argv in ((0, a), (1, b)) if i % 2 else ((1, b), (0, a)):
            start = time.perf_counter()
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=bench.env())
            took = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.decode(errors='replace')}")
            if i >= warmup:
                got[k].append(took)
    return statistics.median(got[0]), statistics.median(got[1])


class Serving:
    """``storm-queue serve`` on ``root`` (any free port), ended on exit."""

    def __init__(self, root: Path):
        self.proc = subprocess.Popen([*bench.command(), "serve", "--root", str(root), "--port", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=bench.env())
        line = self.proc.stderr.readline()
        self.url = line.split(" on ", 1)[1].split(" ", 1)[0].rstrip("/")
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=60) as r:
            return r.read()

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    def __enter__(self) -> Serving:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def cli(root: Path, *args: str) -> None:
    subprocess.run([*bench.command(), *args, "--root", str(root)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=bench.env(), timeout=120)


def page_after_change(root: Path, runs: int) -> dict:
    """``GET /`` on a storm of 10,000 lanes after a change, and again unchanged."""
    fresh, kept = [], []
    with Serving(root) as srv:
        size = len(srv.get("/"))
        for i in range(runs):
            cli(root, "unbump" if i % 2 else "bump", "l9990")
            time.sleep(0.5)  # the change notice arrives (inotify): the next GET reads and renders
            start = time.perf_counter()
            srv.get("/")
            fresh.append(time.perf_counter() - start)
            start = time.perf_counter()
            srv.get("/")
            kept.append(time.perf_counter() - start)
    return {"fresh_ms": statistics.median(fresh) * 1000, "fresh_max_ms": max(fresh) * 1000,
            "kept_ms": statistics.median(kept) * 1000, "bytes": size, "runs": runs}


def memory_over_time(root: Path, minutes: float, pages: int) -> dict:
    """RSS of a serve process with ``pages`` open pages following a storm that changes every second."""
    stop = threading.Event()
    fetched = [0]

    def page(path: str) -> None:
        version = None
        while not stop.is_set():
            try:
                head = json.loads(srv.get("/api/head"))
                if head["version"] != version:
                    version = head["version"]
                    srv.get(path)
                    fetched[0] += 1
            except OSError:
                pass
            stop.wait(1.0)

    def writer() -> None:
        from storm_queue.service.storm import Storm

        storm = Storm(str(root))
        n = 0
        while not stop.is_set():
            slug = f"l{random.randrange(90, 100)}"
            (storm.unbump if n % 2 else storm.bump)(slug, reason=f"bench {n}")
            n += 1
            stop.wait(1.0)

    samples = []
    with Serving(root) as srv:
        paths = ["/", "/log", "/lane/l95", "/log?action=refused"]
        threads = [threading.Thread(target=page, args=(paths[i % len(paths)],), daemon=True) for i in range(pages)]
        threads.append(threading.Thread(target=writer, daemon=True))
        for t in threads:
            t.start()
        start = time.monotonic()
        while time.monotonic() - start < minutes * 60:
            time.sleep(10)
            samples.append((round(time.monotonic() - start), srv.rss_kib()))
        stop.set()
        for t in threads:
            t.join(timeout=30)
    warm = [kib for t, kib in samples if t >= 60] or [kib for _, kib in samples]
    return {"minutes": minutes, "pages": pages, "fetched": fetched[0], "first_kib": warm[0], "last_kib": warm[-1],
            "max_kib": max(warm), "growth": warm[-1] / warm[0], "samples": samples}


def measure(work: Path, runs: int, minutes: float, pages: int, log=print) -> dict:
    out = {}
    for name, events in (("0 lines", 0), ("1M lines", 1_000_000)):
        root, took, reused = bench.built(work, name, events, 100, False)
        log(f"{name}: built in {took:.1f} s{' (reused)' if reused else ''}")
        nxt, met = interleaved([*bench.command(), "next", "--root", str(root)],
                               [*bench.command(), "metrics", "--root", str(root)], runs)
        out[name] = {"next_ms": nxt * 1000, "metrics_ms": met * 1000, "ratio": met / nxt}
        log(f"{name}: next {nxt * 1000:.1f} ms, metrics {met * 1000:.1f} ms, ratio {met / nxt:.2f}")
    root, took, _ = bench.built(work, "10k lanes", 1000, 10_000, False)
    out["page"] = page_after_change(root, runs)
    log(f"10k lanes: GET / after a change {out['page']['fresh_ms']:.0f} ms (max {out['page']['fresh_max_ms']:.0f}), "
        f"unchanged {out['page']['kept_ms']:.1f} ms")
    root, _, _ = bench.built(work, "memory", 1000, 100, False)
    out["memory"] = memory_over_time(root, minutes, pages)
    m = out["memory"]
    log(f"memory: {m['first_kib']} KiB -> {m['last_kib']} KiB (max {m['max_kib']}) over {minutes} min, "
        f"{pages} pages, {m['fetched']} pages fetched")
    return out


def report(r: dict, command_line: str, took: float) -> str:
    m, p = r["memory"], r["page"]
    yes = lambda ok: "yes" if ok else "**no**"  # noqa: E731
    lines = [BEGIN, "## Seen from anywhere: metrics and serve", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on this machine ({os.cpu_count()} cores "
             f"shared with other work, Python {platform.python_version()}), by:", "", f"    {command_line}", "",
             f"which took {took / 60:.1f} minutes. `next` and `metrics` are whole processes of the installed console "
             "script, run alternately, medians after a warm-up.", "",
             "| storm | `next` | `metrics` | metrics / next | goal | met |", "|---|---:|---:|---:|---:|---|"]
    for name in ("0 lines", "1M lines"):
        x = r[name]
        lines.append(f"| 100 lanes, {name} | {x['next_ms']:.1f} ms | {x['metrics_ms']:.1f} ms | {x['ratio']:.2f} | "
                     f"≤ 1.2 | {yes(x['ratio'] <= 1.2)} |")
    lines += ["", f"`GET /` of `serve` on a storm of 10,000 lanes ({p['bytes']:,} bytes of HTML), {p['runs']} runs: "
              f"right after a change made from outside (the storm read and the page rendered anew) median "
              f"{p['fresh_ms']:.0f} ms, at most {p['fresh_max_ms']:.0f} ms (goal: under 1 s: {yes(p['fresh_max_ms'] < 1000)}); "
              f"unchanged (from the cache) {p['kept_ms']:.1f} ms.", "",
              f"Memory of one `serve` process over {m['minutes']:g} minutes, a lane bumped or un-bumped every second, "
              f"{m['pages']} open pages following it ({m['fetched']} pages fetched anew): resident "
              f"{m['first_kib'] / 1024:.1f} MiB after the first minute, {m['last_kib'] / 1024:.1f} MiB at the end, at most "
              f"{m['max_kib'] / 1024:.1f} MiB; last / first {m['growth']:.2f} (goal: at most 1.1: {yes(m['growth'] <= 1.1)}).",
              END]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/storm-bench-seen"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result = measure(args.work, args.runs, args.minutes, args.pages)
    text = report(result, "python " + " ".join(sys.argv), time.perf_counter() - start)
    print(text)
    if args.out is not None:
        old = args.out.read_text() if args.out.exists() else ""
        if BEGIN in old and END in old:
            new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END) + 1:]
        else:
            new = old.rstrip("\n") + "\n\n" + text
        args.out.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())

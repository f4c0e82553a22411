"""The log view on a long log: ``storm-queue log`` streams, so its memory
stays flat however many lines the log holds.

    python bench/log_view.py --lines 1000000

writes a storm whose log has that many well-formed lines (and a witness),
then runs ``log --last 5``, ``log --json`` and ``log --slug b`` (into
/dev/null) as real processes, and prints each one's wall time and peak
resident memory, next to ``list --json`` on the same storm for comparison.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from tests.conftest import clean_env, make_storm, write_log  # noqa: E402


def bodies(n: int):
    """Bumps of ``a`` with a reason, and every hundredth line a refusal of ``b``."""
    for i in range(n):
        if i % 100 == 99:
            yield {"action": "refused", "requested": "bump", "slug": "b", "code": "unknown_slug",
                   "message": "queue.txt carries no lane b", "authorised": True}
        else:
            yield {"action": "bump", "slug": "a", "issue": "1", "deps": [], "moved": [] if i else ["a"],
                   "removed": [], "reason": f"reason number {i}"}


def run(root: Path, *args: str) -> tuple[float, int, int]:
    """Wall seconds, peak RSS in MiB and exit code of one CLI process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    with open(os.devnull, "wb") as sink:
        code = subprocess.run([sys.executable, "-m", "storm_queue", *args, "--root", str(root)],
                              stdout=sink, stderr=subprocess.DEVNULL, env=clean_env()).returncode
    took = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return took, max(peak, before) // 1024, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sq-bench-") as tmp:
        root = make_storm(Path(tmp) / "storm", "a 1\n")
        started = time.monotonic()
        write_log(root, bodies(args.lines))
        size = (root / "priority.log").stat().st_size
        print(f"log: {args.lines} lines, {size / 2**20:.1f} MiB, written in {time.monotonic() - started:.1f} s")
        # RUSAGE_CHILDREN's peak is the largest child so far: run the
        # smallest-memory commands first so each figure is its own
        for cmd in (("log", "--last", "5"), ("log", "--slug", "b"), ("log", "--json"), ("log",), ("list", "--json")):
            took, peak, code = run(root, *cmd)
            print(f"storm-queue {' '.join(cmd):<16} exit {code}  {took:6.1f} s  peak RSS <= {peak} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

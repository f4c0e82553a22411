"""N worker processes started together, for bench/database.py.

Each worker connects, prints ``ready``, waits for a line on stdin, works, and
prints as its last line ``RAN FIRST LAST [EXTRA...]``: the jobs it ran and
``time.perf_counter()`` (the system's monotonic clock, the same in every
process) as its first began and as its last ended. A race's time is from the
earliest first to the latest last: every worker's start-up and shut-down are
left out, the same way for every contender.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 1800  # seconds a race may take before its workers are killed


def race(argvs: list[list[str]], env: dict[str, str] | None = None) -> dict:
    """Run one worker per argv, all at once; ``jobs`` (the sum of RAN),
    ``seconds``, ``per_s``, ``per_process`` (each RAN) and ``extra`` (each
    worker's EXTRA words). Every worker is killed if any fails."""
    env = env or {**os.environ, "PYTHONPATH": str(REPO)}
    procs: list[subprocess.Popen] = []
    try:
        for argv in argvs:
            procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a worker ({' '.join(argvs[0][:3])} ...) failed before it was ready: see its error above")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        outs = [p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0].split("\n") for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"a worker ({' '.join(argvs[0][:3])} ...) failed: see its error above")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    last_lines = [next(line for line in reversed(out) if line.strip()).split() for out in outs]
    ran = [int(words[0]) for words in last_lines]
    firsts = [float(w[1]) for w in last_lines if int(w[0])]
    lasts = [float(w[2]) for w in last_lines if int(w[0])]
    seconds = max(lasts) - min(firsts) if firsts else math.nan
    return {"jobs": sum(ran), "seconds": seconds, "per_s": sum(ran) / seconds if seconds > 0 else math.nan,
            "per_process": ran, "extra": [words[3:] for words in last_lines]}

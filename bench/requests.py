"""Many writers, each a process per request (issue 14), in one run:

    python bench/requests.py [--loops 8] [--cycles 25]

Eight concurrent shell loops, each running ``storm-queue bump`` and
  ``storm-queue unbump`` of a lane of its own ``--cycles`` times, in
  requests per second, over the same eight loops running, per request, one
  ``python -I -c`` that takes the same flock, appends one line, fsyncs it,
  replaces a small witness file (write, fsync, rename) and fsyncs the
  directory: the floor of any tool that starts a process per request
  (goal: at least 0.4). Then every request is counted in the log (none
  lost or doubled) and ``storm-queue verify`` must accept it.

(A request's CPU against ``next``'s, and ``next`` against the bare
interpreter, are ``bench/startup.py``'s.) Prints one JSON document; exits
1 when a correctness check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import command, env  # noqa: E402 -- the console script and its environment, as every bench runs them

LOOPS_QUEUE = "".join(f"w{k} {k + 1}\n" for k in range(64))

FLOOR = r"""
import fcntl, os, sys
d = sys.argv[1]
lock = os.open(os.path.join(d, ".priority.log.lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(lock, fcntl.LOCK_EX)
fd = os.open(os.path.join(d, "floor.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b'{"v":1,"seq":1,"action":"bump","reason":"%s"}\n' % sys.argv[2].encode())
os.fsync(fd)
tmp = os.path.join(d, ".floor.witness.tmp")
w = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(w, b'{"length": 1}\n')
os.fsync(w)
os.close(w)
os.rename(tmp, os.path.join(d, "floor.witness"))
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(dfd)
"""


def loops(root: Path, count: int, cycles: int, floor: bool) -> float:
    """Requests per second of ``count`` concurrent shell loops of ``cycles`` bump+unbump pairs."""
    sq = " ".join(command())
    scripts = []
    for k in range(count):
        if floor:
            body = (f'{sys.executable} -I -c "$FLOOR" {root} w{k}-$i-b; {sys.executable} -I -c "$FLOOR" {root} w{k}-$i-u')
        else:
            body = (f"{sq} bump w{k} --reason w{k}-$i-b --root {root} >/dev/null && "
                    f"{sq} unbump w{k} --reason w{k}-$i-u --root {root} >/dev/null || exit 1")
        scripts.append(f"i=0; while [ $i -lt {cycles} ]; do {body}; i=$((i+1)); done")
    e = {**env(), "FLOOR": FLOOR}
    start = time.perf_counter()
    procs = [subprocess.Popen(["sh", "-c", s], env=e) for s in scripts]
    codes = [p.wait() for p in procs]
    took = time.perf_counter() - start
    if any(codes):
        sys.exit(f"a loop failed: exit codes {codes}")
    return 2 * count * cycles / took


def counted(log: Path, count: int, cycles: int) -> dict:
    reasons: dict[str, int] = {}
    with open(log, "rb") as f:
        for line in f:
            reason = json.loads(line).get("reason")
            if reason:
                reasons[reason] = reasons.get(reason, 0) + 1
    expected = {f"w{k}-{i}-{x}" for k in range(count) for i in range(cycles) for x in "bu"}
    return {"lost": len(expected - set(reasons)),
            "doubled": sum(c - 1 for c in reasons.values() if c > 1) + len(set(reasons) - expected)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=25)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        storm, floor = Path(work) / "storm", Path(work) / "floor"
        storm.mkdir()
        floor.mkdir()
        (storm / "queue.txt").write_text(LOOPS_QUEUE)
        result: dict = {"load_before": os.getloadavg()[0]}
        result["tool_requests_per_s"] = loops(storm, args.loops, args.cycles, floor=False)
        result["floor_requests_per_s"] = loops(floor, args.loops, args.cycles, floor=True)
        result["writers_over_floor"] = result["tool_requests_per_s"] / result["floor_requests_per_s"]
        checks = {"tool": counted(storm / "priority.log", args.loops, args.cycles),
                  "floor": counted(floor / "floor.log", args.loops, args.cycles)}
        verify = subprocess.run(command() + ["verify", "--root", str(storm)], capture_output=True, env=env())
        result.update(checks=checks, verify_exit=verify.returncode, load_after=os.getloadavg()[0])
    print(json.dumps(result, indent=1))
    ok = verify.returncode == 0 and all(c == {"lost": 0, "doubled": 0} for c in checks.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

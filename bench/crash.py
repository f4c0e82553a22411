"""Crash consistency, the long run: writer processes (lane writers, and
runners that claim, renew, finish, recover and unpark) killed with SIGKILL at
random moments, trial after trial (see tests/faults/crash_harness.py for what
a trial is and what it checks, the runner invariants included).

    python bench/crash.py --trials 10000

prints the figures the README's Reliability section quotes, and exits 1 if
any acknowledged request was lost or any trial broke a promise (the failed
trials' storms are kept for a look).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from tests.faults import crash_harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    started = time.monotonic()

    def progress(fig: crash_harness.Figures) -> None:
        print(f"... {fig.trials} trials, {fig.kills} kills, {fig.claims_acknowledged} claims, {fig.lost} lost, "
              f"{len(fig.failures)} failed, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

    fig = crash_harness.run(args.trials, args.seed, progress=progress)
    print(f"storm-queue crash run, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, seed {args.seed}, "
          f"{time.monotonic() - started:.0f} s")
    print(fig.report())
    for failure in fig.failures[:20]:
        print("FAILED", failure)
    return 1 if fig.failures or fig.lost else 0


if __name__ == "__main__":
    sys.exit(main())

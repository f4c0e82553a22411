"""Crash consistency, the long run: writer processes (lane writers, and
runners that claim, renew, finish, recover and unpark) killed with SIGKILL at
random moments, trial after trial (see tests/faults/crash_harness.py for what
a trial is and what it checks, the runner invariants included).

    python bench/crash.py --trials 10000

prints the figures the README's Reliability section quotes, and exits 1 if
any acknowledged request was lost or any trial broke a promise (the failed
trials' storms are kept for a look).

    python bench/crash.py --store postgresql --trials 1000 [--url SUPERUSER_URL]

runs the same kind of trials on a database storm (tests/faults/pg_crash.py):
clients killed mid-request, backends ended with pg_terminate_backend, the
server restarted with pg_ctl restart -m immediate (on a throwaway server of
its own; never on a server --url names), and the answers counted by exit
code. It exits 1 if any trial broke a promise, a client's stderr included.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=None, help="default: 10000 on a directory, 1000 on a database")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--store", choices=("directory", "postgresql"), default="directory")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document (--store postgresql)")
    parser.add_argument("--url", help="a superuser URL of a PostgreSQL server to use instead of a throwaway one "
                                      "(--store postgresql; it is never restarted)")
    args = parser.parse_args()
    if (args.url or args.json) and args.store != "postgresql":
        parser.error("--url and --json go with --store postgresql")
    started = time.monotonic()
    if args.store == "postgresql":
        from tests.faults import pg_crash as harness

        trials = 1000 if args.trials is None else args.trials

        shown = [0]

        def progress(fig) -> None:
            print(f"... {fig.trials} trials, {fig.kills} kills, {fig.restarts} restarts, {fig.acknowledged} "
                  f"acknowledged, {fig.lost} lost, {fig.noise} noisy stderr, {len(fig.failures)} failed, "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            for failure in fig.failures[shown[0]:]:
                if "error ignored terminating" not in failure:  # the driver's noise: counted, shown at the end
                    print("FAILED", failure, file=sys.stderr, flush=True)
            shown[0] = len(fig.failures)

        fig = harness.run(trials, args.seed, url=args.url, progress=progress)
    else:
        from tests.faults import crash_harness as harness

        trials = 10000 if args.trials is None else args.trials

        def progress(fig) -> None:
            print(f"... {fig.trials} trials, {fig.kills} kills, {fig.claims_acknowledged} claims, {fig.lost} lost, "
                  f"{len(fig.failures)} failed, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

        fig = harness.run(trials, args.seed, progress=progress)
    if args.json:
        print(json.dumps({"store": args.store, "seed": args.seed, "seconds": round(time.monotonic() - started),
                          **fig.to_json()}))
        return 1 if fig.failures or fig.lost else 0
    print(f"storm-queue crash run ({args.store}), {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, seed {args.seed}, "
          f"{time.monotonic() - started:.0f} s")
    print(fig.report())
    for failure in fig.failures[:20]:
        print("FAILED", failure)
    return 1 if fig.failures or fig.lost else 0


if __name__ == "__main__":
    sys.exit(main())

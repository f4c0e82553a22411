"""A Python runner's cost a lane, by how it asks the storm (issue 32,
item 4), on a directory storm and a database storm (a throwaway server,
tests/pgserver.py, fsync off), side by side, in one run:

- ``requests``: one long-lived ``Storm``, ``storm.claim(...)`` then
  ``storm.finish(...)`` a lane;
- ``lease``: the same ``Storm``, ``with storm.lease(ttl=600): pass`` a
  lane (the claim, a renewing thread started and joined, the finish);
- ``shell``: what a Python runner did before, one ``storm-queue claim``
  and one ``storm-queue finish`` process a lane (fewer lanes: ``--shell``).

Each mode runs on a fresh storm of LANES no-op lanes (``[runner]
unattended``: no review holds the storm), ROUNDS times in turn; the
median round is reported (lanes/s, ms a lane), with the connections the
driver opened in the round (one ``Storm``: its one connection, and the
lease's renewing twin's). Nothing is asserted: figures.

    python bench/runner_api.py [--lanes 200] [--shell 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from tests.pgserver import PgServer  # noqa: E402

TOML = "[runner]\nttl = 600\nslots = 1\nunattended = true\n"
CLI = [sys.executable, "-m", "storm_queue"]
ENV = {**{k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")},
       "PYTHONPATH": str(REPO)}


def directory(lanes: int) -> str:
    root = Path(tempfile.mkdtemp(prefix="runner-api-"))
    (root / "queue.txt").write_text("".join(f"l{i:05d} {i}\n" for i in range(lanes)))
    (root / "storm.toml").write_text(TOML)
    (root / "UNATTENDED").write_text("")
    return str(root)


class Databases:
    """Fresh storms on one throwaway server."""

    def __init__(self) -> None:
        self.server = PgServer(settings={"fsync": "off"}).start()
        self.role = self.server.create_role("bench_op")
        self.made = 0

    def storm(self, lanes: int) -> str:
        from storm_queue.store.postgres import driver

        self.made += 1
        name = f"bench{self.made}"
        self.server.create_database(name, owner=self.role)
        url = self.server.url(name, self.role)
        subprocess.run([*CLI, "init", url], check=True, capture_output=True, env=ENV, timeout=120)
        toml = Path(tempfile.mkdtemp()) / "storm.toml"
        toml.write_text(TOML)
        subprocess.run([*CLI, "declare", str(toml), "--root", url], check=True, capture_output=True, env=ENV,
                       timeout=120)
        with driver.connect(url) as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)",
                            [(f"l{i:05d}", str(i)) for i in range(lanes)])
        return url

    def stop(self) -> None:
        self.server.stop()


def connections() -> list[int]:
    """A counter of the connections the store's driver opens from now on."""
    from storm_queue.store.postgres import driver

    made = [0]
    real = driver.connect

    def connect(*args, **kwargs):
        made[0] += 1
        return real(*args, **kwargs)

    driver.connect = connect
    return made


def run(mode: str, root: str, lanes: int) -> tuple[float, int]:
    """Seconds for ``lanes`` lanes asked as ``mode``, and the connections made."""
    from storm_queue import Storm

    made = connections() if root.startswith("postgresql://") else [0]
    began = time.perf_counter()
    if mode == "shell":
        for _ in range(lanes):
            words = subprocess.run([*CLI, "claim", "--holder", "bench", "--root", root], check=True,
                                   capture_output=True, text=True, env=ENV, timeout=120).stdout.split()
            assert words[0] == "run", words
            subprocess.run([*CLI, "finish", words[1], "--token", words[3], "--result", "ok", "--root", root],
                           check=True, capture_output=True, env=ENV, timeout=120)
        return time.perf_counter() - began, 2 * lanes if root.startswith("postgresql://") else 0
    storm = Storm.find(root, env=ENV)
    try:
        for _ in range(lanes):
            if mode == "requests":
                out = storm.claim(holder="bench")
                assert out.slug is not None, out.decision
                assert storm.finish(out.slug, out.token, "ok").outcome == "done"
            else:
                with storm.lease(holder="bench", ttl=600) as lane:
                    pass
                assert lane.finished.outcome == "done"
    finally:
        storm.close()
    return time.perf_counter() - began, made[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int, default=200)
    ap.add_argument("--shell", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    databases = Databases()
    try:
        from storm_queue.store.postgres import driver

        real = driver.connect
        found: dict[str, dict[str, list[tuple[float, int]]]] = {"directory": {}, "database": {}}
        for _ in range(args.rounds):
            for kind in found:
                for mode in ("requests", "lease", "shell"):
                    lanes = args.shell if mode == "shell" else args.lanes
                    root = directory(lanes) if kind == "directory" else databases.storm(lanes)
                    driver.connect = real
                    took, made = run(mode, root, lanes)
                    found[kind].setdefault(mode, []).append((lanes / took, made))
        driver.connect = real
        load = os.getloadavg()[0]
    finally:
        databases.stop()
    report = {"lanes": args.lanes, "shell_lanes": args.shell, "rounds": args.rounds, "load_at_end": round(load, 1),
              "python": sys.version.split()[0]}
    for kind, modes in found.items():
        for mode, runs in modes.items():
            rate = statistics.median(r for r, _ in runs)
            report[f"{kind} {mode}"] = {"lanes_per_s": round(rate, 1), "ms_per_lane": round(1000 / rate, 2),
                                        "rounds_lanes_per_s": [round(r, 1) for r, _ in runs],
                                        "connections": sorted({m for _, m in runs})}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

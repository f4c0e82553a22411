"""The peer queues bench/database.py measures storm-queue against, each in
the bench's own environment, never in storm-queue's:

    python -m venv /tmp/storm-bench-venv
    /tmp/storm-bench-venv/bin/pip install procrastinate pgqueuer 'psycopg[binary]'

(made on first use; ``--peers-python`` names another interpreter). A peer
that cannot be installed or imported is reported with the reason, never
dropped. Each contender runs no-op jobs in a fresh database of the same
server (bench/peer_worker.py, through bench/race.py):

- ``procrastinate_8proc``: N processes, each one worker of concurrency 1;
- ``procrastinate_1proc_c8``: one process, one worker of concurrency N;
- ``pgqueuer_batch1`` / ``pgqueuer_batch10``: N processes, each one
  QueueManager with ``batch_size`` 1 / 10 (drain mode).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from race import race

HERE = Path(__file__).resolve().parent
VENV = Path("/tmp/storm-bench-venv")
PACKAGES = ("procrastinate", "pgqueuer", "psycopg[binary]")
WORKER = str(HERE / "peer_worker.py")


def contenders(runners: int) -> dict[str, tuple[str, int, int]]:
    """Each contender's name: (peer, processes, the worker's N)."""
    return {"procrastinate_8proc": ("procrastinate", runners, 1),
            "procrastinate_1proc_c8": ("procrastinate", 1, runners),
            "pgqueuer_batch1": ("pgqueuer", runners, 1),
            "pgqueuer_batch10": ("pgqueuer", runners, 10)}


def interpreter(python: str | None) -> tuple[str | None, str | None]:
    """(the bench environment's python, None), making VENV when PYTHON is not
    given and VENV has none; (None, why) when it cannot be made."""
    if python:
        return python, None
    exe = VENV / "bin" / "python"
    if not exe.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
        if made.returncode:
            return None, f"python -m venv {VENV} failed: {made.stderr.strip()[-300:]}"
    if subprocess.run([str(exe), "-c", "import procrastinate, pgqueuer, psycopg"], capture_output=True).returncode:
        done = subprocess.run([str(exe), "-m", "pip", "install", "-q", *PACKAGES], capture_output=True, text=True)
        if done.returncode:
            lines = [line for line in done.stderr.splitlines() if line.strip() and "is ignored" not in line]
            return None, f"pip install {' '.join(PACKAGES)} failed: {' | '.join(lines[-3:])}"
    return str(exe), None


def versions(python: str | None, why: str | None) -> dict[str, str | dict]:
    """Each peer's installed version, or ``{"unavailable": why}``."""
    out: dict[str, str | dict] = {}
    for peer in ("procrastinate", "pgqueuer"):
        if python is None:
            out[peer] = {"unavailable": why}
            continue
        try:
            done = subprocess.run([python, WORKER, "version", peer], capture_output=True, text=True)
        except OSError as e:
            out[peer] = {"unavailable": f"cannot run {python}: {e.strerror}"}
            continue
        err = (done.stderr.strip().splitlines() or ["no output"])[-1]
        out[peer] = done.stdout.strip() if done.returncode == 0 else {"unavailable": f"cannot import {peer}: {err}"}
    return out


def peer_round(python: str, url: str, peer: str, processes: int, n: int, jobs: int) -> dict:
    """One contender's round in the empty database URL: ``per_s`` and its checks."""
    from storm_queue.store.postgres import driver

    setup = subprocess.run([python, WORKER, "setup", peer, url, str(jobs)], capture_output=True, text=True)
    if setup.returncode:
        raise RuntimeError(f"{peer}'s setup failed: {setup.stderr.strip()[-1000:]}")
    raced = race([[python, WORKER, "run", peer, url, str(n)] for _ in range(processes)], env=None)
    with driver.connect(url) as conn:
        if peer == "procrastinate":
            done = conn.execute("SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*) FROM procrastinate_jobs").fetchone()
            finished = done[0] == done[1] == jobs
        else:
            left = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]
            done = conn.execute("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'").fetchone()[0]
            finished = left == 0 and done == jobs
    return {"per_s": raced["per_s"], "jobs": raced["jobs"], "finished_once": finished and raced["jobs"] == jobs}

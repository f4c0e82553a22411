"""One process of a peer queue for bench/database.py, run by the bench's own
environment's interpreter (bench/peers.py makes it; neither peer is ever a
dependency of storm-queue):

    python bench/peer_worker.py version PEER
    python bench/peer_worker.py setup PEER URL JOBS
    python bench/peer_worker.py run PEER URL N

PEER is ``procrastinate`` or ``pgqueuer``. ``version`` prints the installed
version (exit 1 with the import error when it cannot be imported). ``setup``
installs the peer's schema in the (empty) database of URL and queues JOBS
no-op jobs. ``run`` connects, prints ``ready``, waits for a line on stdin, then
works until no job is left (procrastinate: one worker of concurrency N, ``wait``
off; pgqueuer: one QueueManager, ``batch_size`` N, drain mode) and prints the
number of jobs this process ran, and when the first began and the last ended
(``Seen``): the peer's own start-up and shut-down (schema checks, listeners,
a notify watcher's one-second timeout) are not the queue's throughput.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
import time
from datetime import timedelta


class Seen:
    """The jobs a process ran: how many, and ``time.perf_counter()`` as the
    first began and as the last ended (the system's monotonic clock, the same
    in every process)."""

    def __init__(self) -> None:
        self.ran, self.first, self.last = 0, float("nan"), float("nan")

    def begin(self) -> None:
        if not self.ran:
            self.first = time.perf_counter()

    def end(self) -> None:
        self.ran += 1
        self.last = time.perf_counter()

    def __str__(self) -> str:
        return f"{self.ran} {self.first} {self.last}"


def version(peer: str) -> None:
    __import__(peer)
    print(importlib.metadata.version(peer))


async def procrastinate(url: str, jobs: int, concurrency: int) -> Seen | int:
    import logging

    import procrastinate as p

    logging.getLogger("procrastinate").setLevel(logging.ERROR)  # not its warning that App is made in __main__

    app = p.App(connector=p.PsycopgConnector(conninfo=url, min_size=1, max_size=max(2, concurrency + 1)))
    seen = Seen()

    @app.task(name="noop", queue="bench")
    async def noop() -> None:
        seen.begin()
        seen.end()

    async with app.open_async():
        if jobs:
            await app.schema_manager.apply_schema_async()
            await noop.batch_defer_async(*[{} for _ in range(jobs)])
            return jobs
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await app.run_worker_async(queues=["bench"], concurrency=concurrency, wait=False,
                                   listen_notify=False, install_signal_handlers=False)
    return seen


async def pgqueuer(url: str, jobs: int, batch: int) -> Seen | int:
    import psycopg
    from pgqueuer import PsycopgDriver, QueueManager, Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    async with conn:
        queries = Queries(PsycopgDriver(conn))
        if jobs:
            await queries.install()
            await queries.enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
            return jobs
        qm = QueueManager(queries)
        seen = Seen()

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            seen.begin()
            seen.end()

        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        # drain: leave once the queue is empty; a short dequeue timeout so the
        # last worker does not sit out a 30 s poll before it sees so
        await qm.run(batch_size=batch, mode=QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=0.02))
    return seen


def main() -> None:
    what, peer, *rest = sys.argv[1:]
    if what == "version":
        return version(peer)
    url, n = rest[0], int(rest[1])
    work = {"procrastinate": procrastinate, "pgqueuer": pgqueuer}[peer]
    print(asyncio.run(work(url, n, 0) if what == "setup" else work(url, 0, n)), flush=True)


if __name__ == "__main__":
    main()

"""The two floors bench/database.py measures storm-queue's runners against,
each N processes (one connection each) claiming and finishing JOBS no-op jobs
in a fresh database, through bench/race.py:

- the chained floor (bench/chain.sql): one hash-chained log in total order
  under one advisory lock, a fencing token on every lease, one round trip per
  request (``chain_claim``, then ``chain_finish``: each a plpgsql call). What
  storm-queue keeps, with nothing else: the least a queue that keeps it costs.
- the bare floor: ``UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED
  LIMIT 1) RETURNING id``, then ``UPDATE ... SET state = 'done'``: the claim
  and finish of any PostgreSQL queue, no log, no order, no fencing.

Each checks its own work after the race: every job claimed and finished once
(the chain: claimed in id order, every line's digest the sha256 of the one
before's and its body).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from race import race

HERE = Path(__file__).resolve().parent

#: one process of the chained floor: claim, finish, until no job is ready
CHAIN = """
import sys, time
from storm_queue.store.postgres import driver

with driver.connect(sys.argv[1]) as c:
    c.execute("SELECT 1")
    print("ready", flush=True)
    sys.stdin.readline()
    ran, first = 0, time.perf_counter()
    while (job := c.execute("SELECT id, token FROM chain_claim(%s)", (sys.argv[2],)).fetchone()):
        assert c.execute("SELECT chain_finish(%s, %s, 'ok')", job).fetchone()[0]
        ran += 1
    print(ran, first, time.perf_counter())
"""

#: one process of the bare floor: claim by SKIP LOCKED, finish, until none is ready
BARE = """
import sys, time
from storm_queue.store.postgres import driver

claim = ("UPDATE bare_job SET state = 'running' WHERE id = (SELECT id FROM bare_job WHERE state = 'ready' "
         "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id")
with driver.connect(sys.argv[1]) as c:
    c.execute("SELECT 1")
    print("ready", flush=True)
    sys.stdin.readline()
    ran, first = 0, time.perf_counter()
    while (job := c.execute(claim).fetchone()):
        c.execute("UPDATE bare_job SET state = 'done' WHERE id = %s AND state = 'running'", job)
        ran += 1
    print(ran, first, time.perf_counter())
"""

BARE_TABLE = """
CREATE TABLE bare_job (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'ready');
CREATE INDEX bare_job_ready ON bare_job (id) WHERE state = 'ready';
"""


def _jobs(url: str, schema: str, table: str, jobs: int) -> None:
    from storm_queue.store.postgres import driver

    with driver.connect(url) as conn:
        conn.execute(schema)
        conn.execute(f"INSERT INTO {table} (state) SELECT 'ready' FROM generate_series(1, %s)", (jobs,))


def chain(url: str, jobs: int, n: int) -> dict:
    """The chained floor's round in the empty database URL: ``per_s`` and its checks."""
    from storm_queue.store.postgres import driver

    _jobs(url, (HERE / "chain.sql").read_text() + "\nCREATE INDEX chain_job_ready ON chain_job (id) WHERE state = 'ready';",
          "chain_job", jobs)
    raced = race([[sys.executable, "-c", CHAIN, url, f"runner-{i}"] for i in range(n)])
    with driver.connect(url) as conn:
        lines = conn.execute("SELECT seq, body, digest FROM chain_log ORDER BY seq").fetchall()
        done = conn.execute("SELECT count(*) FROM chain_job WHERE state = 'done'").fetchone()[0]
    prev, sound = "0" * 64, True
    for seq, body, digest in lines:
        sound = sound and json.loads(body)["prev"] == prev and hashlib.sha256((prev + body).encode()).hexdigest() == digest
        prev = digest
    bodies = [json.loads(body) for _, body, _ in lines]
    claims = [b["job"] for b in bodies if b["action"] == "claim"]
    finishes = sorted(b["job"] for b in bodies if b["action"] == "finish")
    return {"per_s": raced["per_s"], "jobs": raced["jobs"],
            "claimed_once_in_order": claims == list(range(1, jobs + 1)),
            "finished_once": finishes == list(range(1, jobs + 1)) and done == jobs,
            "chain_sound": sound and [s for s, _, _ in lines] == list(range(1, len(lines) + 1))}


def bare(url: str, jobs: int, n: int) -> dict:
    """The bare floor's round in the empty database URL: ``per_s`` and its check."""
    from storm_queue.store.postgres import driver

    _jobs(url, BARE_TABLE, "bare_job", jobs)
    raced = race([[sys.executable, "-c", BARE, url] for _ in range(n)])
    with driver.connect(url) as conn:
        done = conn.execute("SELECT count(*) FROM bare_job WHERE state = 'done'").fetchone()[0]
    return {"per_s": raced["per_s"], "jobs": raced["jobs"], "finished_once": done == jobs == raced["jobs"]}

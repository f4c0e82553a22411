"""Build a storm of a given size with the library's own planning, framing,
chain and writer code:

    python bench/build.py DIR --events N --lanes M [--deep] [--seed S]
    python bench/build.py URL --events N --lanes M [--deep] [--seed S]

``queue.txt`` holds M real lanes, ``l0`` .. ``l{M-1}`` (issue i+1): lane i
depends on lane i-1 except every fifth, so dependencies come in chains of
five; with ``--deep`` every lane depends on the one before it, a single chain
M lanes deep. The log holds N events that a real operator could have
recorded, each planned by ``storm_queue.lane`` against the lane replayed so
far: bumps of random lanes (their dependencies pulled forward), pushes of
queued lanes, unbumps of named lanes (refused, and recorded as a refusal,
while another named lane needs them), at most four named lanes at a time,
and one request in five a bump of a mistyped slug, refused (``unknown_slug``)
and recorded.
With ``--deep`` the first event bumps the deepest lane, so the whole chain
is in the priority lane.

Events are appended by ``storm_queue.store.directory.log.writer.append`` in batches of 1000
(one write, one fsync and one witness per batch; the events of a batch share
its time stamp, a minute apart from batch to batch), so the storm is exactly
what the writer produces, and ``storm-queue verify`` accepts it. The writer
leaves the checkpoint as a long-lived storm has it: the last batch is cut so
that the checkpoint is ``checkpoint.EVERY - 1`` lines before the end, the
most a command ever folds after it.

Given a PostgreSQL URL (an empty database) instead of a directory, it builds
a database storm of the same lanes and events: ``init``'s own path makes the
schema and line 1, the lanes go into ``storm_queue.lane`` in queue order, the
events are framed and chained by the library's ``frame`` after line 1 (a
batch of 1000 sharing a time stamp, a minute apart) and streamed into
``storm_queue.event`` with one binary COPY, and the state row is written as
a long-lived storm has it: its body ``database.STATE_EVERY - 1`` lines
before the end, the most a command folds after it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from storm_queue.core import fold  # noqa: E402
from storm_queue.store.directory.accounts import account_name  # noqa: E402
from storm_queue.core.lane import Refusal, Snapshot, plan_bump, plan_push, plan_unbump  # noqa: E402
from storm_queue.core.ledgers import Ledgers  # noqa: E402
from storm_queue.store.directory.log import checkpoint, writer  # noqa: E402
from storm_queue.core import statebody  # noqa: E402
from storm_queue.core.framing import digest, encode  # noqa: E402
from storm_queue.core.logread import LogRead  # noqa: E402
from storm_queue.core.queuetext import format_line, parse  # noqa: E402

BATCH = 1000
MAX_NAMED = 4
CHAIN = 5
START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def queue_text(lanes: int, deep: bool) -> str:
    """The lanes of the storm, one a line."""
    out = []
    for i in range(lanes):
        deps = (f"l{i - 1}",) if i and (deep or i % CHAIN) else ()
        out.append(format_line(f"l{i}", str(i + 1), deps))
    return "".join(out)


def _body(verb: str, slug: str, result, snap: Snapshot, appended: bool | None = None) -> dict:
    """The log body a request of ``verb`` records, as the desk builds it."""
    if isinstance(result, Refusal):
        return {"action": "refused", "requested": verb, "slug": slug, "code": result.code,
                "message": result.message, "authorised": True}
    body: dict = {"action": verb, "slug": slug}
    if verb != "unbump":
        lane = snap.lanes[slug]
        body.update(issue=lane.issue, deps=list(lane.deps))
    body.update(moved=list(result.moved), removed=list(result.removed))
    if result.noop:
        body["noop"] = result.noop
    if verb == "push":
        body["appended"] = bool(appended)
    return body


def plan_events(n: int, lanes: dict, deep: bool, rng: random.Random):
    """Yield ``n`` request bodies, each planned against the lane so far."""
    ledgers = Ledgers(frozenset(), frozenset(), frozenset(), {}, False)
    slugs = list(lanes)
    state = fold.EMPTY
    for i in range(n):
        snap = Snapshot(lanes, ledgers, state)
        r = rng.random()
        if deep and i == 0:
            verb, slug = "bump", slugs[-1]
        elif r >= 0.8:  # a slug mistyped: refused by the planner, recorded
            verb, slug = "bump", f"x{rng.choice(slugs)}"
        elif state.named and (r < 0.35 or len(state.named) >= MAX_NAMED):
            verb, slug = "unbump", rng.choice(state.named)
        elif r < 0.45:
            verb, slug = "push", rng.choice(slugs)
        else:
            verb, slug = "bump", rng.choice(slugs)
        if verb == "bump":
            body = _body(verb, slug, plan_bump(snap, slug), snap)
        elif verb == "push":
            lane = lanes[slug]
            result, appended = plan_push(snap, slug, lane.issue, None)
            body = _body(verb, slug, result, snap, appended)
        else:
            body = _body(verb, slug, plan_unbump(snap, slug), snap)
        state = fold.apply(state, body)
        yield body


def build(root: str, events: int, lanes: int, deep: bool = False, seed: int = 1) -> dict:
    """Write the storm at ``root`` (which must not hold one yet); return its figures."""
    os.makedirs(root, exist_ok=True)
    log_path = os.path.join(root, "priority.log")
    if os.path.lexists(log_path) or os.path.lexists(os.path.join(root, "queue.txt")):
        raise SystemExit(f"{root} already holds a storm; build into a new directory")
    text = queue_text(lanes, deep)
    with open(os.path.join(root, "queue.txt"), "w") as f:
        f.write(text)
    queue = {lane.slug: lane for lane in parse(text).lanes}
    by = f"operator:{account_name(os.geteuid())}"
    rng = random.Random(seed)
    log = LogRead(log_path, fresh=True)
    # the last append holds EVERY-1 lines, so the checkpoint stays that far behind the end
    tail = min(events, checkpoint.EVERY - 1)
    cuts = list(range(BATCH, events - tail, BATCH)) + [events - tail, events]
    bodies = plan_events(events, queue, deep, rng)
    done, minute = 0, 0
    for cut in sorted(set(c for c in cuts if c > 0)):
        batch = [next(bodies) for _ in range(cut - done)]
        at = (START + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        written = writer.append(log, batch, at, by)
        refreshed = written[-1]["seq"] - log.checkpoint_seq >= checkpoint.EVERY
        log = LogRead(log_path, state=fold.replay(written, log.state), seq=written[-1]["seq"],
                      digest=digest(encode(written[-1])), length=log.length + sum(len(encode(e)) for e in written),
                      log_exists=True, checkpoint_seq=written[-1]["seq"] if refreshed else log.checkpoint_seq)
        done, minute = cut, minute + 1
    return {"root": root, "lanes": lanes, "events": log.seq, "bytes": log.length,
            "checkpoint_line": log.checkpoint_seq, "lane": len(log.state.lane), "named": len(log.state.named)}


def build_database(url: str, events: int, lanes: int, deep: bool = False, seed: int = 1) -> dict:
    """Build the storm into the empty database at ``url``; return its figures."""
    from psycopg2.extras import execute_values

    from storm_queue.store.postgres import driver
    from storm_queue.store.postgres import store as database
    from storm_queue.core.framing import decode
    from storm_queue.core.framing import frame

    created = database.create(url)
    by = f"operator:{created.operator}"
    queue = {lane.slug: lane for lane in parse(queue_text(lanes, deep)).lanes}
    with driver.connect(url) as conn:
        (line1,), = conn.execute("SELECT line FROM storm_queue.event WHERE seq = 1").fetchall()
        line1 = bytes(line1)
        start = datetime.fromisoformat(decode(line1)["at"])
        with conn.transaction():
            execute_values(conn.cursor(), "INSERT INTO storm_queue.lane (slug, issue, deps) VALUES %s",
                           [(lane.slug, lane.issue, list(lane.deps)) for lane in queue.values()], "(%s, %s, %s::text[])",
                           page_size=BATCH)
            seq, prev = 1, digest(line1)
            folder = fold.Fold()
            folder.step(decode(line1))
            body_at = max(1, 1 + events - (database.STATE_EVERY - 1))  # the body this far behind the end
            body = (seq, prev, folder.state())
            planned = plan_events(events, queue, deep, random.Random(seed))
            for batch_start in range(0, events, BATCH):  # (COPY: psycopg2 refuses it under the driver's wait callback)
                at = (start + timedelta(minutes=1 + batch_start // BATCH)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                rows = []
                for event, line in frame([next(planned) for _ in range(min(BATCH, events - batch_start))],
                                         seq, prev, at, by):
                    rows.append((event["seq"], line))
                    folder.step(event)
                    seq, prev = event["seq"], digest(line)
                    if seq == body_at:
                        body = (seq, prev, folder.state())
                execute_values(conn.cursor(), "INSERT INTO storm_queue.event (seq, line) VALUES %s", rows,
                               page_size=BATCH)
            state = folder.state()
            conn.execute("UPDATE storm_queue.state SET seq = %s, digest = %s, body = %s, body_seq = %s, "
                         "body_digest = %s", (seq, prev, statebody.dump_state(body[2]), body[0], body[1]))
    return {"root": created.root, "lanes": lanes, "events": seq, "body_line": body[0],
            "lane": len(state.lane), "named": len(state.named)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the storm's directory, or an empty PostgreSQL database's URL")
    parser.add_argument("--events", type=int, required=True, help="log lines to write")
    parser.add_argument("--lanes", type=int, required=True, help="lanes in queue.txt")
    parser.add_argument("--deep", action="store_true", help="one dependency chain through every lane")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.lanes < 1 or args.events < 0:
        parser.error("--lanes must be at least 1 and --events at least 0")
    started = time.monotonic()
    if args.dir.startswith(("postgresql://", "postgres://")):
        figures = build_database(args.dir, args.events, args.lanes, args.deep, args.seed)
    else:
        figures = build(args.dir, args.events, args.lanes, args.deep, args.seed)
    print(" ".join(f"{k}={v}" for k, v in figures.items()) + f" seconds={time.monotonic() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

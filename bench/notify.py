"""What a database storm's notices cost and whom they wake (issue 32, item
2), before and after, side by side, in one run on one throwaway server:

    python bench/notify.py [--before main] [--requests 1000] [--flood 300] [--seconds 10] [--rounds 2]

For each tree (``--before REV``, taken out of git with ``git archive`` into
a temporary directory, and this checkout), ``--rounds`` times, the trees in
turn (each round's figures are printed, separated by ``/``), in a database
of its own, a process running that tree's storm-queue:

1. a runner loop through the library, one lane at a time (claim, renew,
   finish ok; ``[runner] slots = 1``, unattended), until ``--requests``
   requests were made, while a LISTEN connection of the bench's own counts
   the notifications on the channel ``storm_queue`` (up to a marker NOTIFY
   sent after the loop: notices arrive in commit order, so none is
   missed and none after is counted): NOTIFYs per 1,000 requests;
2. one ``claim --wait`` (through the library, in a thread; its asks of the
   server counted: ``leases._claim``, one round trip each) waiting on a
   busy slot, while a role with no standing in the storm sends ``--flood``
   notifications on ``storm_queue`` (``pg_notify('storm_queue', 'x')``,
   each its own transaction) spread over ``--seconds`` seconds: the claim's
   asks during the flood (0 is none extra); then a finish frees the slot
   and the claim answers;
3. ``serve``'s reading of the storm (``web.seen.Seen``, interval 2 s),
   asked every 50 ms: how long after a renew returns it shows it (five
   renews, the median and the largest).

No figure is asserted; exit 1 when a run went wrong (a claim that did not
answer ``run``, a lane left unclaimed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _notices(conn, until: str) -> int:
    """The notifications on storm_queue read from ``conn`` before the payload ``until``."""
    from storm_queue.store.wake import readable

    count, deadline = 0, time.monotonic() + 120
    while True:
        if time.monotonic() > deadline:
            raise RuntimeError("the marker notice never came")
        readable(conn.fileno(), 1.0)
        for channel, payload in conn.notifies():
            if channel != "storm_queue":
                continue
            if payload == until:
                return count
            count += 1


def worker(url: str, stranger: str, requests: int, flood: int, seconds: float) -> dict:
    """Both measures on the storm at ``url`` (made here), with the storm-queue on sys.path."""
    from storm_queue.service import leases
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres import driver

    lanes = requests // 3 + 4
    sq = [sys.executable, "-m", "storm_queue"]
    toml = Path(tempfile.mkdtemp()) / "storm.toml"
    toml.write_text("[runner]\nslots = 1\nunattended = true\n")
    for args in (("init", url), ("declare", str(toml), "--root", url)):
        done = subprocess.run([*sq, *args], capture_output=True, text=True, timeout=120, cwd=toml.parent)  # (-m: not this checkout's)
        if done.returncode:
            raise RuntimeError(f"storm-queue {args[0]}: {done.stderr}")
    with driver.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)",
                        [(f"l{i:05d}", str(i)) for i in range(lanes)])

    # 1. the runner loop, heard by a listener of our own
    ear = driver.connect(url)
    ear.execute("LISTEN storm_queue")
    storm = Storm.find(url)
    made = 0
    started = time.perf_counter()
    while made < requests:
        out = storm.claim(holder="r1")
        _, slug, _, token = out.decision.split(" ")
        storm.renew(slug, int(token))
        storm.finish(slug, int(token), "ok")
        made += 3
    loop_seconds = time.perf_counter() - started
    with driver.connect(url) as other:
        other.execute("NOTIFY storm_queue, 'bench-marker'")
    sent = _notices(ear, "bench-marker")
    ear.close()

    # 2. a waiting claim under a stranger's flood
    out = storm.claim(holder="r1")  # the one slot busy
    _, slug, _, token = out.decision.split(" ")
    asks = [0]
    real = leases._claim

    def counted(*args, **kwargs):
        asks[0] += 1
        return real(*args, **kwargs)

    leases._claim = counted
    waiter = Storm.find(url)
    opened = waiter.store.changes
    waiting = threading.Event()

    class Spied:
        def __enter__(self):
            self.inner = opened().__enter__()
            return self

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

        def wait(self, timeout):
            waiting.set()
            return self.inner.wait(timeout)

    waiter.store.changes = Spied
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(waiter.claim(holder="r2", wait=600)), daemon=True)
    thread.start()
    if not waiting.wait(60):
        raise RuntimeError("the claim never began to wait")
    time.sleep(0.2)
    before = asks[0]
    with driver.connect(stranger) as spy:
        for i in range(flood):
            spy.execute("SELECT pg_notify('storm_queue', 'x')")
            time.sleep(seconds / flood)
        spy.execute("SELECT pg_notify('storm_queue', 'x-last')")
    time.sleep(1.2)  # the claim's TICK: whatever the flood woke has asked by now
    during = asks[0] - before
    storm.finish(slug, int(token), "ok")
    thread.join(60)
    leases._claim = real
    woke = answer[0].decision if answer else None

    # 3. how soon serve's reading (web/seen.py) shows a renew, asked every 50 ms
    from storm_queue.web.seen import Seen

    _, slug, _, token = answer[0].decision.split(" ")
    seen = Seen(lambda: Storm.find(url), 2.0)
    seen.start()
    delays = []
    for _ in range(5):
        time.sleep(0.3)
        version = seen.current().version
        storm.renew(slug, int(token))
        started = time.perf_counter()
        while seen.current().version == version:
            time.sleep(0.05)
        delays.append(time.perf_counter() - started)
    seen.close()
    storm.close()
    delays.sort()
    return {"serve_sees_renew_ms": f"{delays[2] * 1000:.0f} (max {delays[-1] * 1000:.0f})","requests": made, "notifies": sent, "per_1000": round(sent * 1000 / made, 1),
            "loop_requests_per_s": round(made / loop_seconds, 1), "flood": flood, "flood_seconds": seconds,
            "asks_during_flood": during, "answer_after_finish": woke}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="the git revision measured as before")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--flood", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2, help="each tree this many times, in turn")
    ap.add_argument("--worker", nargs=2, metavar=("URL", "STRANGER"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], a.requests, a.flood, a.seconds)))
        return
    sys.path.insert(0, str(REPO))
    from tests.pgserver import PgServer

    work = Path(tempfile.mkdtemp(prefix="bench-notify-"))
    before = work / "before"
    before.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", a.before], capture_output=True, check=True, timeout=120)
    subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True, timeout=120)
    server = PgServer().start()
    rows, bad = {}, False
    try:
        server.create_role("bench_stranger")
        trees = ((f"before ({a.before})", before), ("after", REPO))
        for i, (name, tree) in enumerate([t for _ in range(a.rounds) for t in trees]):  # ABAB: a busy moment spoils neither alone
            owner = f"bench_notify_{i}"
            server.create_role(owner)
            server.create_database(owner, owner)
            url = server.url(owner, owner)
            done = subprocess.run([sys.executable, "-B", str(Path(__file__).resolve()), "--worker", url,
                                   server.url(owner, "bench_stranger"), "--requests", str(a.requests),
                                   "--flood", str(a.flood), "--seconds", str(a.seconds)],
                                  capture_output=True, text=True, timeout=1800,
                                  env={**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"})
            if done.returncode:
                print(f"{name}: {done.stderr}", file=sys.stderr)
                bad = True
                continue
            rows.setdefault(name, []).append(json.loads(done.stdout.splitlines()[-1]))
            bad = bad or not str(rows[name][-1]["answer_after_finish"]).startswith("run ")
    finally:
        server.stop()
    print(f"| measure | {' | '.join(rows)} |")
    print(f"|---|{'---:|' * len(rows)}")
    for key, words in (("per_1000", "NOTIFYs per 1,000 requests (claim, renew, finish)"),
                       ("notifies", "NOTIFYs sent in the loop"), ("requests", "requests in the loop"),
                       ("loop_requests_per_s", "the loop's requests per second (one runner)"),
                       ("asks_during_flood", f"a waiting claim's asks during {a.flood} strangers' NOTIFYs in {a.seconds:g} s"),
                       ("answer_after_finish", "the waiting claim's answer once the slot is freed"),
                       ("serve_sees_renew_ms", "serve's reading shows a renew after, ms (median of 5, asked every 50 ms)")):
        print(f"| {words} | {' | '.join(' / '.join(str(r[key]) for r in runs) for runs in rows.values())} |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

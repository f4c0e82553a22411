"""Several real processes hammer bump, unbump and push on one storm at once
(contract section 3 item 5, section 4): afterwards the log replays, ``seq``
runs 1..N without a gap, every request is on it exactly once, each line
was decided on the state the line before left, and the replayed lane equals
the derivation. On a directory storm and on a database storm alike (the
``store`` fixture)."""

from __future__ import annotations

import hashlib
import json
import random
from concurrent.futures import ThreadPoolExecutor


QUEUE = """\
a 1
b 2 a
c 3
d 4 c
e 5
f 6
g 7 f
h 8
i 9 h
"""
SLUGS = ("a", "b", "c", "d", "e", "f", "g", "h", "i")
WORKERS = 6
PER_WORKER = 20


def _plan(worker: int) -> list[tuple[str, list[str]]]:
    """What one worker asks, in order: (reason, argv). Every reason is unique."""
    rng = random.Random(1000 + worker)
    asks = []
    pushed = 0
    for n in range(PER_WORKER):
        reason = f"w{worker}-r{n}"
        roll = rng.random()
        if roll < 0.4:
            asks.append((reason, ["bump", rng.choice(SLUGS)]))
        elif roll < 0.85:
            mine = [f"p{worker}-{k}" for k in range(1, pushed + 1)]
            asks.append((reason, ["unbump", rng.choice(SLUGS + tuple(mine) * 3)]))
        else:
            pushed += 1
            deps = ",".join(rng.sample(SLUGS, rng.randint(0, 1)))
            argv = ["push", f"p{worker}-{pushed}", str(100 * worker + pushed)] + (["--deps", deps] if deps else [])
            asks.append((reason, argv))
    return asks


def _work(store, worker: int) -> list[dict]:
    done = []
    for reason, argv in _plan(worker):
        proc = store.cli(*argv, "--reason", reason, "--json", timeout=60, process=True)
        done.append({"reason": reason, "argv": argv, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr})
    return done


def test_many_writers_at_once_leave_one_whole_log(store):
    """Real processes: six writers at once, from threads."""
    store.make(QUEUE, integrated=["h"])
    first = len(store.events())  # a database storm's line 1 records its init
    with ThreadPoolExecutor(WORKERS) as pool:
        results = [r for batch in pool.map(lambda w: _work(store, w), range(WORKERS)) for r in batch]
    assert len(results) == WORKERS * PER_WORKER

    # every process got an answer, never a crash, a busy storm or an unknown order
    for r in results:
        assert r["rc"] in (0, 2), r
        r["json"] = json.loads(r["stdout"])  # exactly one JSON document
        out = r["json"]
        verb = r["argv"][0]
        assert out["action"] == verb, r
        assert out["recorded"] is True, r
        assert (out["outcome"] == "refused") == (r["rc"] == 2), r
        if out["outcome"] == "refused":
            assert out["code"] in ("not_prioritised", "needed_by_named", "dependency_unknown"), r
    # and at least some of them were admitted and some refused: it was a real contest
    assert any(r["json"]["outcome"] == "done" for r in results)
    assert sum(1 for r in results if r["argv"][0] == "unbump" and r["json"]["outcome"] == "done") > 0

    # the log replays, through the CLI too
    listed = store.cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["warnings"] == []

    lines = store.lines()
    recorded = [r for r in results if r["json"]["recorded"]]
    assert len(lines) == first + len(recorded)

    # seq 1..N, no gaps, every prev chains, the witness is the last line
    prev = None
    events = store.events()
    for number, (line, event) in enumerate(zip(lines, events), start=1):
        assert event["seq"] == number
        assert event["prev"] == prev
        prev = hashlib.sha256(line).hexdigest()
    events = events[first:]
    if store.kind == "directory":  # a database storm's head is its state row, which verify checks
        witness = json.loads((store.path / ".priority.log.witness").read_bytes())
        assert (witness["length"], witness["seq"], witness["digest"]) == (sum(map(len, lines)), len(lines), prev)
    else:
        audit = store.cli("verify", "--json")
        assert audit.returncode == 0 and json.loads(audit.stdout)["sound"] is True, audit.stdout

    # each request is on the log exactly once, as what it asked and what it was told
    by_reason = {}
    for event in events:
        assert event["reason"] not in by_reason, f"request {event['reason']} recorded twice"
        by_reason[event["reason"]] = event
    assert set(by_reason) == {r["reason"] for r in results}
    for r in results:
        event, out = by_reason[r["reason"]], r["json"]
        verb, slug = r["argv"][0], r["argv"][1]
        assert event["slug"] == slug
        if out["outcome"] == "refused":
            assert event["action"] == "refused"
            assert (event["requested"], event["code"]) == (verb, out["code"])
        else:
            assert event["action"] == verb
            assert event["moved"] == out["moved"] and event["removed"] == out["removed"]

    # serialised: each line was decided on the lane the line before it left
    lane: list[str] = []
    for event in events:
        if event["action"] in ("bump", "push"):
            assert not set(event["moved"]) & set(lane), event
            assert set(event["removed"]) <= set(lane), event
        if event["action"] == "unbump":
            assert event["slug"] in lane, event
            assert set(event["removed"]) <= set(lane), event
        if event["action"] == "refused" and event["code"] == "not_prioritised":
            assert event["slug"] not in lane, event
        lane = [s for s in lane if s not in event.get("removed", ())] if event["action"] != "refused" else lane
        if event["action"] in ("bump", "push"):
            lane += [s for s in event["moved"] if s not in lane]

    # every pushed lane that was admitted is in queue.txt (the lane rows) exactly once
    slugs = store.lanes()
    if store.kind == "directory":
        from storm_queue.store.directory import queuefile

        assert queuefile.read(str(store.path / "queue.txt")).skipped == ()
    for r in results:
        if r["argv"][0] == "push":
            assert slugs.count(r["argv"][1]) == (1 if r["json"]["outcome"] == "done" else 0), r

    # the replayed lane is the derivation of the named set
    assert list(store.replayed().lane) == lane
    assert store.equals_its_derivation()

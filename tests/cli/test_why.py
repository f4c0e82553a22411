"""``storm-queue why SLUG`` (issue 3 item 3): where a lane stands and why,
in words and as JSON, for every kind of slug; it writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from storm_queue.core import why as whymod
from storm_queue.core.fold import replay
from storm_queue.core.lane import Snapshot
from storm_queue.core.ledgers import Ledgers
from storm_queue.core.queuetext import parse
from storm_queue.core.resolver import resolve
from tests.conftest import run_cli, tree

QUEUE = "a 1\nb 2 a\nc 3 b,x\nd 4\ne 5\n.bad 6\n"


def prepared(storm) -> Path:
    root = storm(QUEUE, integrated=["x"], running=["e"], toml="[runner]\nslots = 2\n")  # a claims a slot too
    assert run_cli(root, "bump", "c", "--reason", "release blocker").returncode == 0
    return root


def why(root: Path, slug: str) -> dict:
    done = run_cli(root, "why", slug, "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == (0 if doc["known"] else 2), done.stderr
    return doc


def test_a_named_lane_says_what_it_waits_on_and_who_prioritised_it(storm) -> None:
    root = prepared(storm)
    done = run_cli(root, "why", "c")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "c: waiting: waits on b (waiting)"
    assert "position 3 of 5 in run order" in lines
    assert "runs after: a, b" in lines
    assert "depends on: b: waits on a (not yet run) (not satisfied)" in lines
    assert "depends on: x: integrated" in lines
    prio = next(line for line in lines if line.startswith("prioritised by name by operator:"))
    assert '(bump #1), reason "release blocker"' in prio
    assert lines[-1] == "next: run a 1"
    doc = why(root, "c")
    assert doc["state"] == "waiting" and doc["position"] == 3 and doc["of"] == 5
    assert doc["ahead"] == ["a", "b"] and doc["running"] == ["e"]
    assert doc["waits_on"] == ["b"]
    assert [(d["slug"], d["state"], d["satisfied"]) for d in doc["deps"]] == [("b", "waiting", False), ("x", "settled", True)]
    assert doc["named"] and doc["prioritised"]
    assert doc["mark"]["reason"] == "release blocker" and doc["mark"]["slug"] == "c" and doc["mark"]["seq"] == 1


def test_a_pulled_forward_dependency_names_what_pulled_it(storm) -> None:
    root = prepared(storm)
    out = run_cli(root, "why", "a").stdout
    assert "position 1 of 5 in run order; it is what next runs" in out
    assert "in the priority lane, pulled forward for c by operator:" in out
    assert "needed by prioritised: c" in out
    doc = why(root, "a")
    assert doc["next"] and not doc["named"] and doc["prioritised"] and doc["needed_by"] == ["c"]


def test_plain_lanes_running_and_settled(storm) -> None:
    root = prepared(storm)
    assert "not prioritised: it runs in queue.txt order" in run_cli(root, "why", "d").stdout
    assert why(root, "d")["ahead"] == ["a", "b", "c"]
    assert why(root, "e")["state"] == "running"
    settled = why(root, "x")
    assert settled["state"] == "settled" and settled["status"] == "integrated; queue.txt no longer carries it"


def test_stray_and_skipped_are_known(storm) -> None:
    root = prepared(storm)
    assert run_cli(root, "push", "gone", "9").returncode == 0
    (root / "queue.txt").write_text(QUEUE + "dup 7\ndup 8\n")
    stray = why(root, "gone")
    assert stray["state"] == "stray" and stray["prioritised"] and stray["mark"]["action"] == "push"
    done = run_cli(root, "why", "gone")
    assert done.returncode == 0 and "gone: stray: prioritised, but queue.txt no longer carries it" in done.stdout
    dup = why(root, "dup")
    assert dup["state"] == "ready" and [s["line"] for s in dup["skipped"]] == [8]
    assert "skipped: queue.txt line 8: \"dup 8\": " in run_cli(root, "why", "dup").stdout


def test_unknown_and_invalid_slugs_are_clear_answers(storm) -> None:
    root = prepared(storm)
    before = tree(root, times=True)
    done = run_cli(root, "why", "nosuch")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == ("storm-queue: nosuch: unknown: the storm does not know it: queue.txt, the ledgers "
                           "and the priority lane do not carry it\n")
    doc = why(root, "nosuch")
    assert doc["known"] is False and doc["state"] == "unknown"
    bad = run_cli(root, "why", "../etc")
    assert bad.returncode == 2 and 'storm-queue: "../etc": invalid: not a name' in bad.stderr
    # a skipped line's slug that is not a name is still refused as a name
    assert why(root, ".bad")["state"] == "invalid"
    assert tree(root, times=True) == before, "why writes nothing"


def test_unknown_order_is_exit_3(storm) -> None:
    root = prepared(storm)
    (root / "priority.log").write_bytes(b"{}\n")
    done = run_cli(root, "why", "a")
    assert done.returncode == 3 and "unknown" in done.stderr


def test_explain_is_pure() -> None:
    queue = parse("a 1\nb 2 a\n")
    events = [{"action": "bump", "seq": 1, "at": "T", "by": "operator:o", "slug": "b", "moved": ["a", "b"], "removed": [], "reason": "r"}]
    snap = Snapshot({lane.slug: lane for lane in queue.lanes},
                    Ledgers(frozenset(), frozenset(), frozenset(), {}, False), replay(events))
    got = whymod.explain(snap, resolve(snap), queue.skipped, "b")
    assert (got.state, got.position, got.ahead, got.waits_on, got.named) == ("waiting", 2, ("a",), ("a",), True)
    assert got.mark.reason == "r" and got.mark.by == "operator:o"
    assert whymod.explain(snap, resolve(snap), queue.skipped, "a").needed_by == ("b",)


def test_who_prioritised_survives_a_checkpoint(storm) -> None:
    """list and why fold from the checkpoint; the marks it keeps still say
    who put each lane in the priority lane, when and why."""
    from storm_queue.store.directory.log import checkpoint
    from tests.conftest import write_log

    root = storm(QUEUE)
    write_log(root, ({"action": "bump", "slug": "d", "issue": "4", "deps": [], "moved": [] if i else ["d"],
                      "removed": [], "reason": f"r{i}"} for i in range(checkpoint.EVERY + 1)))
    assert run_cli(root, "bump", "b", "--reason", "late").returncode == 0
    assert Path(checkpoint.checkpoint_path(str(root / "priority.log"))).exists()
    d, a = why(root, "d"), why(root, "a")
    assert (d["mark"]["seq"], d["mark"]["reason"], d["mark"]["by"]) == (1, "r0", "operator:op")
    assert (a["mark"]["seq"], a["mark"]["slug"], a["mark"]["reason"]) == (checkpoint.EVERY + 2, "b", "late")
    rows = {r["slug"]: r for r in json.loads(run_cli(root, "list", "--json").stdout)["rows"]}
    assert rows["d"]["mark"] == d["mark"]


def test_a_lane_late_in_a_long_queue_names_the_first_ten_ahead_and_counts_the_rest(storm) -> None:
    """``why`` is a few lines: a lane at position 501 named all 500 lanes
    ahead in one line (58,008 on a real storm). The text names the first
    ten; ``--json``'s ``ahead`` keeps every one."""
    root = storm("".join(f"l{i} {i + 1}\n" for i in range(501)))
    done = run_cli(root, "why", "l500")
    assert done.returncode == 0, done.stderr
    first = ", ".join(f"l{i}" for i in range(10))
    assert f"runs after: {first} and 490 more (storm-queue list shows the order)" in done.stdout.splitlines()
    assert why(root, "l500")["ahead"] == [f"l{i}" for i in range(500)]


def test_why_says_what_every_reader_says_of_a_torn_tail_and_a_declaration_refusing_requests(storm) -> None:
    """A reader ignores a torn tail and says so, on stderr and in
    ``warnings`` with --json (contract, section 4); list and next did, why
    said nothing. Likewise a storm.toml every request is refused under."""
    root = prepared(storm)
    with open(root / "priority.log", "ab") as f:
        f.write(b'{"v":1')
    (root / "storm.toml").write_text('[priority]\nsources = "bot"\n')
    plain = run_cli(root, "why", "a")
    assert plain.returncode == 0
    assert "torn write of 6 bytes" in plain.stderr and "every request is refused until storm.toml is fixed" in plain.stderr
    assert "torn write" not in plain.stdout
    warnings = why(root, "a")["warnings"]
    assert len(warnings) == 2 and "torn write" in warnings[0] and "storm.toml" in warnings[1], warnings

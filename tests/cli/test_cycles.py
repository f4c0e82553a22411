"""Dependency cycles are named (issue 20, item 1), on both stores: the
state ``cycle`` in ``list --json`` and the table, ``why`` naming every
member, ``doctor`` an error naming the members and their lines, and
``next`` and ``claim`` saying on stderr that a cycle is why nothing runs
(their answer stays ``wait``)."""

from __future__ import annotations

import json

QUEUE = "a 1 c\nb 2 a\nc 3 b\nd 4 a\ne 5 e\n"


def test_a_cycle_is_named_by_every_reader_and_the_runner(store) -> None:
    store.make(QUEUE)
    listed = json.loads(store.cli("list", "--json").stdout)
    assert [(r["slug"], r["state"]) for r in listed["rows"]] == [
        ("a", "cycle"), ("b", "cycle"), ("c", "cycle"), ("d", "waiting"), ("e", "cycle")]
    assert listed["decision"] == "wait"
    by_slug = {r["slug"]: r for r in listed["rows"]}
    assert "a (line 1), b (line 2), c (line 3)" in by_slug["b"]["status"]
    assert by_slug["d"]["status"] == "waits on a (cycle)"
    assert "e (line 5) depends on itself" in by_slug["e"]["status"]
    plain = store.cli("list", "--plain").stdout
    assert [line.split()[4] for line in plain.splitlines()[2:]] == ["cycle", "cycle", "cycle", "waiting", "cycle"]
    why = store.cli("why", "c")
    assert why.returncode == 0 and all(f"{m} (line {n})" in why.stdout for m, n in (("a", 1), ("b", 2), ("c", 3)))
    for args in (("next",), ("claim", "--holder", "r1")):
        done = store.cli(*args)
        assert done.returncode == 0 and done.stdout == "wait\n", (args, done.stdout)
        assert "nothing can run: dependency cycle: a (line 1), b (line 2), c (line 3)" in done.stderr, done.stderr
        assert "e (line 5) depends on itself" in done.stderr
    doctor = store.cli("doctor", "--json")
    assert doctor.returncode == 1
    found = [(f["severity"], f["code"], f["subject"]) for f in json.loads(doctor.stdout)["findings"]
             if f["code"] == "dependency_cycle"]
    assert found == [("error", "dependency_cycle", "a b c"), ("error", "dependency_cycle", "e")]


def test_a_cycle_behind_a_ready_lane_is_named_but_the_storm_runs(store) -> None:
    store.make("x 9\na 1 b\nb 2 a\n")
    done = store.cli("next")
    assert done.stdout == "run x 9\n" and "nothing can run" not in done.stderr
    assert [r["state"] for r in json.loads(store.cli("list", "--json").stdout)["rows"]] == ["ready", "cycle", "cycle"]


def test_a_cycle_through_a_settled_or_waived_dependency_is_none(store) -> None:
    store.make("a 1 b\nb 2 a\nc 3 c\n", integrated=["b"])
    states = {r["slug"]: r["state"] for r in json.loads(store.cli("list", "--json").stdout)["rows"]}
    assert states == {"a": "ready", "c": "cycle"}


def test_list_state_shows_only_the_lanes_in_those_states(store) -> None:
    """Issue 20, item 8: in --json, in plain output and in the table (a
    real process: the table is drawn for a terminal, a pseudo-terminal here)."""
    import re

    from tests.cli.test_list_view import run_in_pty

    store.make("x 9\n" + QUEUE)
    doc = json.loads(store.cli("list", "--state", "cycle,ready", "--json").stdout)
    assert [(r["slug"], r["state"]) for r in doc["rows"]] == [
        ("x", "ready"), ("a", "cycle"), ("b", "cycle"), ("c", "cycle"), ("e", "cycle")]
    assert doc["decision"] == "run x 9"  # the decision is the storm's, whatever is shown
    plain = store.cli("list", "--state", "waiting", "--plain").stdout.splitlines()
    assert [line.split()[2] for line in plain[2:]] == ["d"]
    code, table = run_in_pty(store.root, "list", "--state", "ready")
    assert code == 0
    shown = {cells[3].strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", table).splitlines()
             if line.startswith("│") and len(cells := line.split("│")) > 4 and cells[3].strip()}
    assert shown == {"x"}, table
    bad = store.cli("list", "--state", "ready,asleep")
    assert bad.returncode == 2 and "asleep is not a state" in bad.stderr and "quarantined" in bad.stderr


def test_a_long_cycle_is_named_in_full_by_why_and_doctor_and_in_part_by_each_lane(store) -> None:
    """A cycle of n lanes names n members n times in ``list`` no more (3,000
    lanes made 168 MB of it): each lane names the first eight and how many
    more; ``why`` and ``doctor`` name every one."""
    n = 40
    store.make("".join(f"c{i} {i + 1} c{(i + 1) % n}\n" for i in range(n)))
    rows = json.loads(store.cli("list", "--json").stdout)["rows"]
    assert {r["state"] for r in rows} == {"cycle"} and len(rows) == n
    first = ", ".join(f"c{i} (line {i + 1})" for i in range(8))
    assert {r["status"] for r in rows} == {
        f"in a dependency cycle: {first} and 32 more of its 40 lanes (storm-queue doctor names them all); none runs "
        "until one of their lines no longer names another"}
    every = ", ".join(f"c{i} (line {i + 1})" for i in range(n))
    assert f"in a dependency cycle: {every};" in store.cli("why", "c17").stdout
    found = [f for f in json.loads(store.cli("doctor", "--json").stdout)["findings"] if f["code"] == "dependency_cycle"]
    assert [f["subject"] for f in found] == [" ".join(f"c{i}" for i in range(n))]
    assert every in found[0]["message"]

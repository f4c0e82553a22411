"""End to end (issue 6 item 6): ``schedule SLUG --not-before TIME`` and
``push ... --not-before TIME`` as real processes. A lane whose time has not
come is ``scheduled``: it keeps its place in the run order and ``next`` and
``claim`` pass over it. No test waits for a time to come: the times are
an hour away, far in the future, ``now`` or in the past."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_claim import OPERATOR, STAMP, check_log, claim, cli, doc, log_bytes, refused
from tests.conftest import log_events, make_storm

#: the accepted forms a refused time names
FORMS = ("now", "+N", "date", "RFC 3339")

def listed(root: Path) -> list[dict]:
    return doc(root, "list")["rows"]


def states(root: Path) -> list[tuple[str, str]]:
    return [(r["slug"], r["state"]) for r in listed(root)]


def test_a_scheduled_lane_keeps_its_place_and_is_passed_over(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "b 2\nc 3\nd 4\n", toml="[runner]\nslots = 2\n")
    done = cli(root, "schedule", "b", "--not-before", "+1h", "--reason", "after the deploy window")
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["by"], event["reason"]) == (
        "schedule", "b", OPERATOR, "after the deploy window")
    assert STAMP.match(event["not_before"]) and event["not_before"] > event["at"]
    assert event["not_before"] in done.stdout
    assert states(root) == [("b", "scheduled"), ("c", "ready"), ("d", "ready")]
    row = listed(root)[0]
    assert (row["position"], row["not_before"]) == (1, event["not_before"])
    assert event["not_before"] in row["status"]
    assert "scheduled" in cli(root, "list", "--plain").stdout
    why = doc(root, "why", "b")
    assert (why["state"], why["position"]) == ("scheduled", 1)
    assert cli(root, "next").stdout == "run c 3\n"
    assert claim(root) == "run c 3 1"
    assert states(root) == [("b", "scheduled"), ("c", "running"), ("d", "ready")]
    # now lifts the schedule: b is ready again, in its place, and runs next
    cli(root, "schedule", "b", "--not-before", "now")
    assert log_events(root)[-1]["not_before"] <= log_events(root)[-1]["at"]
    assert states(root) == [("b", "ready"), ("c", "running"), ("d", "ready")]
    assert cli(root, "next").stdout == "run b 2\n"
    assert claim(root) == "run b 2 1"
    check_log(root, "schedule", "claim")


def test_a_scheduled_prioritised_lane_keeps_its_place_in_the_priority_lane(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\nc 3\n")
    cli(root, "bump", "c")
    cli(root, "bump", "b")
    cli(root, "schedule", "c", "--not-before", "2999-01-01")
    assert log_events(root)[-1]["not_before"] == "2999-01-01T00:00:00.000000Z"
    rows = listed(root)
    assert [(r["slug"], r["prioritised"], r["state"]) for r in rows] == [
        ("c", True, "scheduled"), ("b", True, "ready"), ("a", False, "ready")]
    assert claim(root) == "run b 2 1"
    # scheduling it again for the same time is a recorded no-op
    answer = doc(root, "schedule", "c", "--not-before", "2999-01-01T00:00:00Z")
    assert answer["outcome"] == "noop" and answer["recorded"] is True
    assert "noop" in log_events(root)[-1]
    # a time already past (RFC 3339 with an offset) makes it ready, still first
    cli(root, "schedule", "c", "--not-before", "2000-01-01T09:00:00+01:00")
    assert log_events(root)[-1]["not_before"] == "2000-01-01T08:00:00.000000Z"
    assert [(r["slug"], r["state"]) for r in listed(root)] == [("c", "ready"), ("b", "running"), ("a", "ready")]
    check_log(root, "schedule", "claim")


def test_push_not_before_appends_prioritises_and_schedules(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    done = cli(root, "push", "z", "9", "--not-before", "+1h")
    assert "z" in done.stdout
    assert (root / "queue.txt").read_text() == "a 1\nb 2\nz 9\n"
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["issue"], event["appended"], event["moved"]) == (
        "push", "z", "9", True, ["z"])
    assert STAMP.match(event["not_before"]) and event["not_before"] > event["at"]
    rows = listed(root)
    assert [(r["slug"], r["prioritised"], r["state"]) for r in rows] == [
        ("z", True, "scheduled"), ("a", False, "ready"), ("b", False, "ready")]
    assert rows[0]["not_before"] == event["not_before"]
    assert cli(root, "next").stdout == "run a 1\n"
    assert claim(root) == "run a 1 1"
    assert doc(root, "why", "z")["state"] == "scheduled"
    check_log(root, "push", "claim")


@pytest.mark.parametrize("args", [("schedule", "b"), ("push", "z", "9")], ids=["schedule", "push"])
def test_a_time_that_is_not_one_is_refused_naming_the_forms(tmp_path: Path, args: tuple[str, ...]) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    queue = (root / "queue.txt").read_text()
    for garbage in ("tomorrow", "+5x", "2026-13-45", "12:00", "2026-12-01T08:00:00"):
        event = refused(root, "invalid_time", 2, *args, "--not-before", garbage)
        assert event["authorised"] is False and event["slug"] == args[1]
        assert garbage in event["message"]
        for form in FORMS:
            assert form in event["message"], event["message"]
    stderr = cli(root, *args, "--not-before", "garbage", code=2).stderr
    assert "invalid_time" in stderr and all(form in stderr for form in FORMS)
    assert (root / "queue.txt").read_text() == queue
    assert [r["state"] for r in listed(root)] == ["ready", "ready"]
    assert all(e["action"] == "refused" for e in log_events(root))
    check_log(root)


def test_schedule_of_an_unknown_slug_is_refused(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    event = refused(root, "unknown_slug", 2, "schedule", "nosuchlane", "--not-before", "+1h")
    assert event["authorised"] is True and "push" in event["message"]
    assert (root / "queue.txt").read_text() == "a 1\n"
    assert states(root) == [("a", "ready")]
    check_log(root)


def test_schedule_with_no_time_is_a_usage_error_and_records_nothing(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    cli(root, "bump", "a")
    before = log_bytes(root)
    done = cli(root, "schedule", "a", code=2)
    assert "--not-before" in done.stderr
    assert log_bytes(root) == before


def test_a_relative_time_counts_from_the_line_that_records_it_on_either_store(store) -> None:
    """``+N`` and ``now`` count from the request's own time, its line's
    ``at`` (taken under the lock), not from when the command started: a
    database storm's request connects first, and a request may wait for
    its lock, yet ``+10s`` is ten seconds after ``at`` to the microsecond."""
    from storm_queue.core.clock import seconds
    from tests.conftest import run_cli

    store.make("a 1\nb 2\n")
    for args, delay in ((("schedule", "a", "--not-before", "+10s"), 10), (("schedule", "b", "--not-before", "now"), 0),
                        (("push", "c", "3", "--not-before", "+2h"), 7200)):
        done = run_cli(store.root, *args)
        assert done.returncode == 0, done.stderr
        event = store.events()[-1]
        assert seconds(event["not_before"]) - seconds(event["at"]) == delay, (args, event)
        if args[0] == "schedule":
            assert event["not_before"] in done.stdout

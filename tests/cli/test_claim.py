"""End to end (issue 6 items 1 to 5): ``claim``, ``renew``, ``finish``,
``recover`` and ``unpark`` as real processes against a real storm.

Every test ends by reading the log back with ``log`` (one readable line per
recorded event) and ``verify`` (exit 0). Leases that must expire are taken
with a TTL of 1 s (``[runner] ttl_min = 1``), and the injected clock
(``conftest.clock``) moves past their expiry instead of a sleep.

The tests that take ``store`` run on a directory storm and on a database
storm alike; what only a directory has (running markers, result.json files,
a stranger account) is checked on the directory alone, and the rest of the
directory-only tests here are about those.
"""

from __future__ import annotations

import json
import os
import pwd
import re
from pathlib import Path

import pytest

from tests.cli.test_authority import run_forked, storm_dir  # noqa: F401 -- storm_dir is a fixture
from tests.conftest import clean_env, make_storm, run_cli, tree
from tests.conftest import log_events as _log_events

OPERATOR = "operator:" + pwd.getpwuid(os.getuid()).pw_name
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\Z")
#: long enough that no lease a test does not mean to lose expires, however loaded the machine
LONG = "600"
#: how far a test moves the clock on for a 1 s lease to be past its expiry
ORPHAN_SLEEP = 2.5

FAST = "[runner]\nttl_min = 1\nttl = 1\n"
SOURCES = '[priority]\nsources = ["bot", "x"]\n'


# -- helpers ----------------------------------------------------------


def _root(root):
    """A directory, or a store's root (tests/stores.py)."""
    return root.root if hasattr(root, "cli") else root


def log_events(root) -> list[dict]:
    """The log's lines: a directory's, or a store's."""
    return root.events() if hasattr(root, "cli") else _log_events(root)


def asked(root) -> list[dict]:
    """The log's lines but a database storm's first, which records its init."""
    return [e for e in log_events(root) if e["action"] != "init"]


def operator_of(root) -> str:
    """Who the operator is in the log: this account, or the database role that ran init."""
    if getattr(root, "kind", "directory") == "directory":
        return OPERATOR
    return log_events(root)[0]["by"]


def result_of(root, slug: str):
    """What a finish recorded for SLUG: a store's result, or result.json; None when none."""
    if hasattr(root, "cli"):
        return root.result(slug)
    path = result_json(root, slug)
    return json.loads(path.read_text()) if path.exists() else None


def no_marker(root, slug: str) -> bool:
    """No running marker (a database storm has none)."""
    return getattr(root, "kind", "directory") != "directory" or not marker(_root_path(root), slug).exists()


def _root_path(root) -> Path:
    return root.path if hasattr(root, "cli") else root


def cli(root, *args: str, code: int = 0, env: dict[str, str] | None = None):
    done = run_cli(_root(root), *args, env=env)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return done


def doc(root: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> dict:
    return json.loads(cli(root, *args, "--json", code=code, env=env).stdout)


def rows(root: Path) -> dict[str, dict]:
    return {r["slug"]: r for r in doc(root, "list")["rows"]}


def marker(root: Path, slug: str) -> Path:
    return root / "lanes" / slug / ".qwenstorm" / "running"


def result_json(root: Path, slug: str) -> Path:
    return root / "lanes" / slug / ".qwenstorm" / "result.json"


def log_bytes(root) -> bytes | None:
    if hasattr(root, "cli"):
        return b"".join(root.lines())
    path = root / "priority.log"
    return path.read_bytes() if path.exists() else None


def claim(root: Path, *args: str) -> str:
    """A claim that must be admitted: its decision line."""
    done = cli(root, "claim", *args)
    assert done.stdout.count("\n") == 1, done.stdout
    return done.stdout.rstrip("\n")


def refused(root: Path, code: str, exit_code: int, *args: str, env: dict[str, str] | None = None) -> dict:
    """Ask ``args`` (refused with ``code``); check the answer and the
    recorded refusal, and return that log event."""
    before = len(log_events(root))
    done = cli(root, *args, code=exit_code, env=env)
    assert done.stdout == "", done.stdout
    assert f"refused ({code})" in done.stderr, done.stderr
    events = log_events(root)
    assert len(events) == before + 1, events[before:]
    event = events[-1]
    assert (event["action"], event["requested"], event["code"]) == ("refused", args[0], code)
    as_json = doc(root, *args, code=exit_code, env=env)
    assert (as_json["outcome"], as_json["code"], as_json["recorded"]) == ("refused", code, True)
    return event


def check_log(root: Path, *actions: str) -> list[str]:
    """``log`` prints one readable line for each recorded event (seq, time,
    who, the action and its lane), every one of ``actions`` is among them,
    and ``verify`` finds the log sound. Returns the lines."""
    events = log_events(root)
    done = cli(root, "log")
    lines = done.stdout.splitlines()
    assert len(lines) == len(events), done.stdout
    for line, event in zip(lines, events):
        assert line.split()[:3] == [str(event["seq"]), event["at"], event["by"]], line
        verb = event["requested"] if event["action"] == "refused" else event["action"]
        assert f" {verb} " in line + " " or (verb == "init" and " init: " in line), line  # a database's line 1
        if event.get("slug") is not None:
            assert re.search(rf"\b{re.escape(event['slug'])}\b", line), line
        if event["action"] == "refused":
            assert f"refused ({event['code']})" in line, line
        elif event.get("token") is not None:
            assert f"token {event['token']}" in line, line
        if event["action"] == "claim":
            assert f"attempt {event['attempt']}" in line and event["holder"] in line, line
        if event["action"] == "quarantine":
            assert f"after {event['attempts']} attempts" in line, line
        if event["action"] == "schedule":
            assert event["not_before"] in line, line
    seen = {e["action"] for e in events}
    assert set(actions) <= seen, (actions, seen)
    for action in actions:
        assert any(f" {action} " in line for line in lines), (action, done.stdout)
    verified = cli(root, "verify")
    assert "sound" in verified.stdout
    assert doc(root, "verify")["sound"] is True
    return lines


# -- claim ------------------------------------------------------------


def test_claim_prints_run_and_records_one_claim_event(store) -> None:
    store.make("a 1\nb 2\n", toml=FAST)
    root = store
    done = cli(root, "claim", "--holder", "runner-1", "--ttl", "120")
    assert done.stdout == "run a 1 1\n"
    events = asked(root)
    assert len(events) == 1
    event = events[0]
    assert {k: event[k] for k in ("action", "by", "slug", "issue", "holder", "token", "ttl", "attempt")} == {
        "action": "claim", "by": operator_of(root), "slug": "a", "issue": "1", "holder": "runner-1", "token": 1,
        "ttl": 120, "attempt": 1}
    assert STAMP.match(event["expires"]) and event["expires"] > event["at"]
    if store.kind == "directory":  # the running marker is the lease's cache, as JSON
        body = json.loads(marker(store.path, "a").read_text())
        assert (body["holder"], body["token"], body["expires"]) == ("runner-1", 1, event["expires"])
    row = rows(root)["a"]
    assert (row["state"], row["running"]) == ("running", "lease")
    assert (row["lease"]["holder"], row["lease"]["token"], row["lease"]["expires"]) == ("runner-1", 1, event["expires"])
    assert "runner-1" in row["status"] and "token 1" in row["status"]
    # a running lane is never chosen again: the next decision is b
    assert cli(root, "next").stdout == "run b 2\n"
    check_log(root, "claim")


def test_claim_by_a_declared_source_is_recorded_as_the_source(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml="[runner]\nslots = 2\n" + SOURCES)
    assert claim(root, "--source", "bot", "--holder", "h") == "run a 1 1"
    event = log_events(root)[-1]
    assert (event["action"], event["by"], event["slug"], event["token"]) == ("claim", "source:bot", "a", 1)
    event = refused(root, "undeclared_source", 1, "claim", "--source", "stranger-bot")
    assert event["by"] == "source:stranger-bot" and event["authorised"] is False
    assert rows(root)["b"]["state"] == "ready"
    check_log(root, "claim")


def test_claim_json_has_the_decision_token_and_expiry(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    answer = doc(root, "claim", "--holder", "h1")
    event = log_events(root)[-1]
    assert answer["decision"] == "run a 1 1"
    assert (answer["outcome"], answer["slug"], answer["token"], answer["recorded"]) == ("done", "a", 1, True)
    assert answer["expires"] == event["expires"]
    assert event["ttl"] == 600  # the default [runner] ttl
    # a decision that is not run has no token and records nothing
    waiting = doc(root, "claim")
    assert waiting["decision"] == "wait" and waiting["recorded"] is False
    assert "token" not in waiting and "expires" not in waiting
    check_log(root, "claim")


def test_default_holder_is_a_name_naming_the_runner(tmp_path: Path) -> None:
    """A real process: the default holder names the claim's parent process (this one)."""
    root = make_storm(tmp_path / "storm", "a 1\n")
    done = run_cli(root, "claim", process=True)
    assert (done.returncode, done.stdout) == (0, "run a 1 1\n"), done.stderr
    holder = log_events(root)[-1]["holder"]
    assert NAME.match(holder) and ".." not in holder, holder
    # this host and the process that asked (run_cli runs the CLI straight from pytest)
    assert holder.endswith(f"-{os.getpid()}"), holder
    assert json.loads(marker(root, "a").read_text())["holder"] == holder
    check_log(root, "claim")


@pytest.mark.parametrize("case", ["empty", "review", "wait"])
def test_claim_that_does_not_run_records_nothing(tmp_path: Path, case: str) -> None:
    if case == "empty":
        root = make_storm(tmp_path / "storm", "a 1\n", integrated=["a"])
        cli(root, "bump", "a")  # a recorded no-op: a log exists to stay unchanged
        expected = "empty"
    elif case == "review":
        root = make_storm(tmp_path / "storm", "a 1\nb 2\n", finished=["a"])
        cli(root, "bump", "b")
        expected = "review a"
    else:
        root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml="[runner]\nslots = 1\n")
        assert claim(root) == "run a 1 1"
        expected = "wait"
    before = log_bytes(root)
    assert before is not None
    markers = sorted(p.relative_to(root) for p in root.glob("lanes/*/.qwenstorm/running"))
    assert claim(root) == expected
    assert doc(root, "claim")["decision"] == expected
    assert log_bytes(root) == before
    assert sorted(p.relative_to(root) for p in root.glob("lanes/*/.qwenstorm/running")) == markers
    check_log(root)


def test_claim_on_a_storm_with_no_lanes_is_empty_and_writes_no_log(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "")
    assert claim(root) == "empty"
    assert log_bytes(root) is None
    assert not (root / "lanes").exists()


def test_invalid_holder_is_refused_and_recorded(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    event = refused(root, "invalid_holder", 2, "claim", "--holder", "bad name")
    assert event["authorised"] is False and event["by"] == OPERATOR
    assert "bad name" in event["message"]
    assert not marker(root, "a").exists()
    assert rows(root)["a"]["state"] == "ready"
    assert all(e["action"] == "refused" for e in log_events(root))
    check_log(root)


def test_ttl_out_of_range_and_past_max_lease_age_are_refused(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n",
                      toml="[runner]\nttl_min = 2\nttl = 30\nttl_max = 1000\nmax_lease_age = 500\n")
    for ttl in ("1", "1001"):
        event = refused(root, "lease_ttl_out_of_range", 2, "claim", "--ttl", ttl)
        assert "2..1000" in event["message"]
    event = refused(root, "lease_age_exceeded", 2, "claim", "--ttl", "501")
    assert "500" in event["message"]
    assert [e["action"] for e in log_events(root)] == ["refused"] * 6  # each asked as text, then --json
    assert not marker(root, "a").exists() and rows(root)["a"]["state"] == "ready"
    # the bounds themselves are allowed
    assert claim(root, "--ttl", "500") == "run a 1 1"
    assert log_events(root)[-1]["ttl"] == 500
    check_log(root, "claim")


@pytest.mark.parametrize("value", ["", "build-7"])
def test_a_lane_process_may_not_claim(tmp_path: Path, value: str) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    env = clean_env(STORM_QUEUE_LANE=value)
    event = refused(root, "lane_process", 1, "claim", env=env)
    assert event["by"] == "lane:" + json.dumps(value) and event["authorised"] is False
    assert not any(e["action"] == "claim" for e in log_events(root))
    assert not marker(root, "a").exists()
    # a lane cannot renew or finish either
    refused(root, "lane_process", 1, "finish", "a", "--token", "1", "--result", "ok", env=env)
    assert rows(root)["a"]["state"] == "ready"
    check_log(root)


# -- renew and finish ---------------------------------------------------


def test_renew_extends_the_lease_and_is_refused_past_max_lease_age(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n",
                      toml="[runner]\nttl_min = 1\nttl = 30\nttl_max = 1000\nmax_lease_age = 500\n")
    assert claim(root, "--holder", "r1", "--ttl", "100") == "run a 1 1"
    first = log_events(root)[-1]["expires"]
    done = cli(root, "renew", "a", "--token", "1", "--ttl", "200")
    assert done.stdout.startswith("renewed a token 1 until "), done.stdout
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["token"], event["ttl"]) == ("renew", "a", 1, 200)
    assert event["expires"] > first
    assert done.stdout.rstrip("\n").endswith(event["expires"])
    body = json.loads(marker(root, "a").read_text())
    assert (body["holder"], body["token"], body["expires"]) == ("r1", 1, event["expires"])
    assert rows(root)["a"]["lease"]["expires"] == event["expires"]
    answer = doc(root, "renew", "a", "--token", "1", "--ttl", "300")
    renewed = log_events(root)[-1]["expires"]
    assert (answer["token"], answer["expires"]) == (1, renewed) and renewed > event["expires"]
    # a TTL reaching past claim + max_lease_age is refused, and the lease stands
    refusal = refused(root, "lease_age_exceeded", 2, "renew", "a", "--token", "1", "--ttl", "500")
    assert refusal["authorised"] is True and "max_lease_age" in refusal["message"]
    assert rows(root)["a"]["lease"]["expires"] == renewed
    assert json.loads(marker(root, "a").read_text())["expires"] == renewed
    # only the live lease's token renews
    refused(root, "stale_fence", 2, "renew", "a", "--token", "2")
    refused(root, "stale_fence", 2, "renew", "b", "--token", "1")
    assert rows(root)["a"]["lease"]["expires"] == renewed
    check_log(root, "claim", "renew")


def test_renew_without_a_ttl_keeps_the_leases_own_ttl(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n", toml="[runner]\nttl_min = 1\nttl = 600\n")
    assert claim(root, "--ttl", "90") == "run a 1 1"
    cli(root, "renew", "a", "--token", "1")
    assert log_events(root)[-1]["ttl"] == 90  # not [runner] ttl
    cli(root, "renew", "a", "--token", "1", "--ttl", "120")
    cli(root, "renew", "a", "--token", "1")
    assert [e["ttl"] for e in log_events(root) if e["action"] == "renew"] == [90, 120, 120]
    assert rows(root)["a"]["lease"]["ttl"] == 120
    # a lease's own TTL the policy no longer allows is refused like a --ttl
    (root / "storm.toml").write_text("[runner]\nttl_min = 200\nttl = 600\n")
    refused(root, "lease_ttl_out_of_range", 2, "renew", "a", "--token", "1")


def test_finish_ok_writes_the_result_and_the_lane_awaits_review(store) -> None:
    store.make("a 1\nb 2\n")
    root = store
    assert claim(root, "--holder", "r1") == "run a 1 1"
    done = cli(root, "finish", "a", "--token", "1", "--result", "ok", "--note", "all green")
    assert "a finished ok" in done.stdout
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["token"], event["result"], event["note"]) == (
        "finish", "a", 1, "ok", "all green")
    result = result_of(root, "a")
    assert (result["completed"], result["status"], result["token"]) == (True, "ok", 1)
    assert no_marker(root, "a")
    row = rows(root)["a"]
    assert row["state"] == "finished" and row["lease"] is None
    assert [(h["token"], h["end"], h["note"]) for h in row["history"]] == [(1, "ok", "all green")]
    assert cli(root, "next").stdout == "review a\n"
    before = log_bytes(root)
    assert claim(root) == "review a"
    assert log_bytes(root) == before
    # the lease is over: its token finishes nothing more
    refused(root, "stale_fence", 2, "finish", "a", "--token", "1", "--result", "failed")
    assert result_of(root, "a")["status"] == "ok"
    check_log(root, "claim", "finish")


def test_finish_failed_makes_the_lane_claimable_under_a_new_token(store) -> None:
    store.make("a 1\nb 2\n")
    root = store
    assert claim(root) == "run a 1 1"
    done = cli(root, "finish", "a", "--token", "1", "--result", "failed")
    assert "attempt 1 of 3" in done.stdout
    assert no_marker(root, "a") and result_of(root, "a") is None
    row = rows(root)["a"]
    assert (row["state"], row["attempts"]) == ("ready", 1)
    assert [(h["token"], h["end"]) for h in row["history"]] == [(1, "failed")]
    assert claim(root) == "run a 1 2"
    event = log_events(root)[-1]
    assert (event["action"], event["token"], event["attempt"]) == ("claim", 2, 2)
    if store.kind == "directory":
        assert json.loads(marker(store.path, "a").read_text())["token"] == 2
    check_log(root, "claim", "finish")


# -- quarantine and unpark ---------------------------------------------


def test_spent_attempts_quarantine_the_lane_until_the_operator_unparks_it(store) -> None:
    store.make("a 1\nb 2\n", toml="[runner]\nattempts = 3\n" + SOURCES)
    root = store
    for attempt in (1, 2, 3):
        assert claim(root, "--holder", f"r{attempt}") == f"run a 1 {attempt}"
        assert log_events(root)[-1]["attempt"] == attempt
        done = cli(root, "finish", "a", "--token", str(attempt), "--result", "failed", "--note", f"crash {attempt}")
    assert "quarantined" in done.stdout
    finish, quarantine = log_events(root)[-2:]
    assert (finish["action"], finish["token"], finish["result"]) == ("finish", 3, "failed")
    assert (quarantine["action"], quarantine["slug"], quarantine["attempts"], quarantine["budget"]) == (
        "quarantine", "a", 3, 3)
    # one append: consecutive lines with one time
    assert quarantine["seq"] == finish["seq"] + 1 and quarantine["at"] == finish["at"]
    row = doc(root, "list")["rows"][0]
    assert (row["slug"], row["position"], row["state"], row["attempts"]) == ("a", 1, "quarantined", 3)
    assert row["quarantined"] == quarantine["at"]
    assert [(h["token"], h["holder"], h["end"]) for h in row["history"]] == [
        (1, "r1", "failed"), (2, "r2", "failed"), (3, "r3", "failed")]
    assert "quarantined" in row["status"] and "unpark" in row["status"]
    # never claimed: claim moves on to b
    assert claim(root) == "run b 2 1"
    cli(root, "finish", "b", "--token", "1", "--result", "ok")
    store.settle(["b"])
    # ... and with nothing else to run, claim waits and records nothing
    before = log_bytes(root)
    assert claim(root) == "wait"
    assert log_bytes(root) == before
    assert rows(root)["a"]["state"] == "quarantined"
    # unpark: operator only, with a reason, of a quarantined lane
    event = refused(root, "operator_only", 1, "unpark", "a", "--reason", "fixed", "--source", "bot")
    assert event["by"] == "source:bot" and event["authorised"] is False
    refused(root, "blank_reason", 2, "unpark", "a")
    refused(root, "blank_reason", 2, "unpark", "a", "--reason", "   ")
    refused(root, "not_quarantined", 2, "unpark", "b", "--reason", "why not")
    assert rows(root)["a"]["state"] == "quarantined"
    done = cli(root, "unpark", "a", "--reason", "flaky disk replaced")
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["by"], event["reason"]) == (
        "unpark", "a", operator_of(root), "flaky disk replaced")
    row = rows(root)["a"]
    assert (row["state"], row["attempts"], row["quarantined"]) == ("ready", 0, None)
    assert [h["end"] for h in row["history"]] == ["failed"] * 3  # history is never erased
    # claimable again, under a token greater than every earlier one, on a fresh budget
    assert claim(root) == "run a 1 4"
    assert log_events(root)[-1]["attempt"] == 1
    assert len(rows(root)["a"]["history"]) == 4
    refused(root, "not_quarantined", 2, "unpark", "a", "--reason", "again")
    check_log(root, "claim", "finish", "quarantine", "unpark")


# -- orphans ------------------------------------------------------------


def test_orphaned_lease_is_recovered_and_the_old_token_is_fenced_off(store, clock) -> None:
    store.make("a 1\n", toml=FAST)
    root = store
    assert claim(root, "--holder", "lost-runner") == "run a 1 1"
    claimed = log_events(root)[-1]
    assert claimed["ttl"] == 1
    clock.advance(ORPHAN_SLEEP)
    row = rows(root)["a"]
    assert (row["state"], row["running"]) == ("running", "orphan")
    assert "orphaned" in row["status"] and "lost-runner" in row["status"]
    assert "orphaned" in cli(root, "list", "--plain").stdout
    # the lease is over: its token may not finish the lane, even before anyone takes it back
    event = refused(root, "stale_fence", 2, "finish", "a", "--token", "1", "--result", "ok")
    assert event["slug"] == "a" and "expired" in event["message"]
    assert result_of(root, "a") is None
    done = cli(root, "recover")
    assert "took back a" in done.stdout
    expire = log_events(root)[-1]
    assert (expire["action"], expire["slug"], expire["token"], expire["expired"]) == (
        "expire", "a", 1, claimed["expires"])
    assert no_marker(root, "a")
    row = rows(root)["a"]
    assert (row["state"], row["lease"]) == ("ready", None)
    assert [(h["token"], h["end"]) for h in row["history"]] == [(1, "expired")]
    # nothing more to take back
    assert doc(root, "recover")["outcome"] == "noop"
    assert claim(root, "--holder", "new-runner", "--ttl", LONG) == "run a 1 2"
    event = refused(root, "stale_fence", 2, "finish", "a", "--token", "1", "--result", "ok")
    assert (event["requested"], event["slug"], event["authorised"]) == ("finish", "a", True)
    assert "older" in event["message"]
    assert result_of(root, "a") is None
    assert rows(root)["a"]["lease"]["holder"] == "new-runner"
    cli(root, "finish", "a", "--token", "2", "--result", "ok")
    assert result_of(root, "a")["token"] == 2
    check_log(root, "claim", "expire", "finish")


def test_settling_a_lane_whose_lease_expired_records_when_it_expired(store, clock) -> None:
    """A settle of a lane whose lease has expired but was not taken back
    takes it back first: its expire line says when the lease expired (as
    a claim's or recover's does), not when the settle came (found by the
    database crash run, trial 624 of seed 20261205)."""
    store.make("a 1\nb 2\n", toml=FAST)
    assert claim(store, "--holder", "lost-runner") == "run a 1 1"
    claimed = log_events(store)[-1]
    clock.advance(ORPHAN_SLEEP)
    assert cli(store, "settle", "a", "abandoned").returncode == 0
    expire, settle = log_events(store)[-2:]
    assert (expire["action"], expire["slug"], expire["token"], expire["expired"]) == (
        "expire", "a", 1, claimed["expires"])
    assert expire["expired"] < expire["at"] and (settle["action"], settle["slug"]) == ("settle", "a")


def test_claim_and_recover_slug_take_back_orphans_and_a_crash_spends_an_attempt(tmp_path: Path, clock) -> None:
    # three storms whose leases expire in one move of the clock
    root = make_storm(tmp_path / "storm", "a 1\nb 2\nc 3\n", toml=FAST + "slots = 2\n")
    assert claim(root) == "run a 1 1"
    assert claim(root) == "run b 2 1"
    spent = make_storm(tmp_path / "spent", "a 1\nb 2\n", toml=FAST + "attempts = 1\n")
    assert claim(spent, "--holder", "crashed") == "run a 1 1"
    full = make_storm(tmp_path / "full", "a 1\nb 2\n", toml=FAST)
    assert claim(full, "--ttl", "60") == "run a 1 1"
    cli(full, "renew", "a", "--token", "1", "--ttl", LONG)
    clock.advance(ORPHAN_SLEEP)
    # the operator's recover SLUG takes back that orphan only
    assert "took back b" in cli(root, "recover", "b").stdout
    expire = log_events(root)[-1]
    assert (expire["action"], expire["slug"], expire["token"]) == ("expire", "b", 1)
    assert [(s, r["state"]) for s, r in rows(root).items()] == [("a", "running"), ("b", "ready"), ("c", "ready")]
    assert not marker(root, "b").exists() and marker(root, "a").exists()
    # the next claim takes back a (guarded by the token it observed), then leases it again
    assert claim(root, "--ttl", LONG) == "run a 1 2"
    expire, again = log_events(root)[-2:]
    assert (expire["action"], expire["slug"], expire["token"]) == ("expire", "a", 1)
    assert (again["action"], again["slug"], again["token"], again["attempt"]) == ("claim", "a", 2, 2)
    assert expire["at"] == again["at"] and again["seq"] == expire["seq"] + 1
    assert json.loads(marker(root, "a").read_text())["token"] == 2
    check_log(root, "claim", "expire")
    # a runner that crashed without reporting spent its lane's last attempt: quarantined, and b runs
    assert claim(spent) == "run b 2 1"
    expire, quarantine, taken = log_events(spent)[-3:]
    assert (expire["action"], expire["slug"], expire["token"]) == ("expire", "a", 1)
    assert (quarantine["action"], quarantine["slug"], quarantine["attempts"], quarantine["budget"]) == (
        "quarantine", "a", 1, 1)
    assert (taken["action"], taken["slug"]) == ("claim", "b")
    row = rows(spent)["a"]
    assert row["state"] == "quarantined"
    assert [(h["holder"], h["end"]) for h in row["history"]] == [("crashed", "expired")]
    assert not marker(spent, "a").exists()
    check_log(spent, "claim", "expire", "quarantine")
    # a renewed lease did not expire: its one slot stays taken, and claim records nothing
    before = log_bytes(full)
    assert rows(full)["a"]["running"] == "lease"
    assert claim(full) == "wait"
    assert log_bytes(full) == before
    check_log(full, "claim", "renew")


def test_a_hand_written_marker_runs_the_lane_until_the_operator_recovers_it(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml="[runner]\nslots = 2\n" + SOURCES)
    marker(root, "a").parent.mkdir(parents=True)
    marker(root, "a").write_text("started by hand on host-3\n")
    row = rows(root)["a"]
    assert (row["state"], row["running"], row["lease"]) == ("running", "marker", None)
    assert "marker with no lease" in row["status"]
    why = cli(root, "why", "a").stdout
    assert "running" in why and "marker with no lease" in why
    assert doc(root, "why", "a")["state"] == "running"
    # claim never takes it: it runs b, then (two slots busy) waits
    assert claim(root) == "run b 2 1"
    before = log_bytes(root)
    assert claim(root) == "wait"
    assert log_bytes(root) == before
    event = refused(root, "operator_only", 1, "recover", "a", "--source", "x")
    assert event["by"] == "source:x"
    assert marker(root, "a").exists()
    # a runner that takes no leases marks every lane it runs so: recover takes it back only with --force
    event = refused(root, "marker_running", 2, "recover", "a", "--reason", "host-3 is gone")
    assert "--force" in event["message"] and marker(root, "a").exists()
    done = cli(root, "recover", "a", "--force", "--reason", "host-3 is gone")
    assert "took back a" in done.stdout
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["by"], event["token"], event["reason"]) == (
        "recover", "a", OPERATOR, None, "host-3 is gone")
    assert not marker(root, "a").exists()
    assert rows(root)["a"]["state"] == "ready"
    assert claim(root) == "run a 1 1"
    check_log(root, "claim", "recover")


def test_a_marker_with_a_token_is_observed_so_no_later_token_repeats_it(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    marker(root, "a").parent.mkdir(parents=True)
    marker(root, "a").write_text('{"token": 7}\n')
    row = rows(root)["a"]
    assert (row["state"], row["running"]) == ("running", "marker")
    assert claim(root) == "wait"  # the one slot is taken by the marker
    cli(root, "recover", "a", "--force", "--reason", "that runner is gone")
    event = log_events(root)[-1]
    assert (event["action"], event["slug"], event["token"]) == ("recover", "a", 7)
    assert not marker(root, "a").exists()
    assert claim(root) == "run a 1 8"
    check_log(root, "claim", "recover")


def test_recover_of_a_live_lease_or_a_lane_not_running_is_refused(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert claim(root, "--holder", "alive") == "run a 1 1"
    event = refused(root, "lease_live", 2, "recover", "a")
    assert "alive" in event["message"] and event["authorised"] is True
    assert json.loads(marker(root, "a").read_text())["token"] == 1
    assert rows(root)["a"]["lease"]["holder"] == "alive"
    refused(root, "not_running", 2, "recover", "b")
    refused(root, "unknown_slug", 2, "recover", "nosuchlane")
    # recover without a slug finds no orphan: a recorded-nothing noop
    before = log_bytes(root)
    assert doc(root, "recover")["outcome"] == "noop"
    assert log_bytes(root) == before
    check_log(root, "claim")


# -- another account ----------------------------------------------------


@pytest.mark.parametrize("with_lease", [False, True], ids=["fresh storm", "storm with a lease"])
def test_a_stranger_may_not_claim_and_changes_nothing(storm_dir, with_lease: bool) -> None:  # noqa: F811
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\nb 2\n", toml="[runner]\nslots = 2\n")
    if with_lease:
        assert claim(root) == "run a 1 1"
    before = tree(root)
    ran = run_forked(root, "claim")
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert ran.stdout == "" and "not_operator" in ran.stderr and "not recorded" in ran.stderr
    answer = json.loads(run_forked(root, "claim", "--json").stdout)
    assert (answer["code"], answer["by"], answer["recorded"]) == ("not_operator", "account:nobody", False)
    for args in (("renew", "a", "--token", "1"), ("finish", "a", "--token", "1", "--result", "ok"),
                 ("recover",), ("recover", "a"), ("unpark", "a", "--reason", "r")):
        ran = run_forked(root, *args)
        assert ran.returncode == 1 and "not_operator" in ran.stderr, (args, ran.stdout, ran.stderr)
    assert tree(root) == before
    if with_lease:
        assert rows(root)["a"]["lease"]["token"] == 1
        check_log(root, "claim")
    else:
        assert log_bytes(root) is None

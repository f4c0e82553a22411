"""The storm's own backoff (issue 33, item 1): a failed lane is retried by
the storm, not by a runner's ``schedule`` (which a runner role may not
make). ``[runner] retry_delay`` and ``retry_max``: a ``finish --result
failed`` that does not quarantine the lane records ``not_before`` on its
own line, the finish's time plus ``retry_delay * 2**(attempts-1)`` at most
``retry_max``; the lane is ``scheduled`` until then (``list``, ``why``),
claims pass it over, and once the clock passes it the lane is claimed
again. On both stores: the database's served finish writes the same line
(tests/database/test_served.py holds the two byte for byte)."""

from __future__ import annotations

import json

from storm_queue.core.clock import seconds, stamp

TOML = "[runner]\nattempts = 4\nretry_delay = 30\nretry_max = 50\nunattended = true\n"


def doc(store, *args: str, code: int = 0) -> dict:
    done = store.cli(*args, "--json")
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def row(store, slug: str) -> dict:
    [found] = [r for r in doc(store, "list")["rows"] if r["slug"] == slug]
    return found


def test_a_failed_lane_is_scheduled_by_the_storms_backoff_and_claimed_again_once_it_is_due(store, clock) -> None:
    store.make("a 1\nb 2\n", toml=TOML)
    assert doc(store, "claim", "--holder", "h")["decision"] == "run a 1 1"
    failed = doc(store, "finish", "a", "--token", "1", "--result", "failed", "--note", "exit 1")
    event = store.events()[-1]
    assert (event["action"], event["result"], event["note"]) == ("finish", "failed", "exit 1")
    assert event["not_before"] == stamp(seconds(event["at"]) + 30)
    assert failed["message"] == f"a failed (token 1); attempt 1 of 4, it will be claimed again after {event['not_before']}"
    words = store.cli("log", "--last", "1").stdout
    assert f"claimed again after {event['not_before']}" in words, words

    a = row(store, "a")
    assert (a["state"], a["not_before"]) == ("scheduled", event["not_before"]) and event["not_before"] in a["status"]
    why = doc(store, "why", "a")
    assert why["state"] == "scheduled"
    assert f"scheduled: not before {event['not_before']}" in store.cli("why", "a").stdout
    assert doc(store, "claim", "--holder", "h")["decision"] == "run b 2 1"  # a is passed over
    doc(store, "finish", "b", "--token", "1", "--result", "ok")
    assert doc(store, "claim", "--holder", "h")["decision"] == "wait b"

    clock.advance(30)  # the backoff has passed: claimed again
    assert row(store, "a")["state"] == "ready"
    assert doc(store, "claim", "--holder", "h")["decision"] == "run a 1 2"
    doc(store, "finish", "a", "--token", "2", "--result", "failed")
    second = store.events()[-1]
    assert second["not_before"] == stamp(seconds(second["at"]) + 50)  # 60, capped at retry_max
    clock.advance(49)
    assert doc(store, "claim", "--holder", "h")["decision"] == "wait b"
    clock.advance(1)
    assert doc(store, "claim", "--holder", "h")["decision"] == "run a 1 3"
    doc(store, "finish", "a", "--token", "3", "--result", "failed")
    clock.advance(50)
    assert doc(store, "claim", "--holder", "h")["decision"] == "run a 1 4"
    last = doc(store, "finish", "a", "--token", "4", "--result", "failed")
    assert "quarantined after 4 attempts" in last["message"]
    ended = store.events()[-2:]
    assert [e["action"] for e in ended] == ["finish", "quarantine"] and "not_before" not in ended[0]
    assert row(store, "a")["state"] == "quarantined"
    assert doc(store, "verify")["sound"] is True


def test_without_a_declared_retry_delay_a_failed_lane_is_claimed_again_at_once(store, clock) -> None:
    store.make("a 1\nb 2\n", toml="[runner]\nattempts = 3\n")
    assert doc(store, "claim", "--holder", "h")["decision"] == "run a 1 1"
    failed = doc(store, "finish", "a", "--token", "1", "--result", "failed")
    assert failed["message"] == "a failed (token 1); attempt 1 of 3, it will be claimed again"
    assert "not_before" not in store.events()[-1]
    assert doc(store, "claim", "--holder", "h")["decision"] == "run a 1 2"

"""Issue 20 ("the second day"), items 6 and 7: a lease ends when its holder
ends. ``release`` gives a live lease back (the lane is claimable at once,
the attempt stays spent); ``recover SLUG --force --reason TEXT`` ends a
live lease whose holder is gone (its token refused afterwards);
``cancel SLUG --reason TEXT`` settles a lane abandoned and revokes its
lease, so that the holder's next renew or finish is refused
``lane_cancelled`` (exit 2). Every test runs on both stores
(tests/stores.py); the runner script's half is in test_runner_signals.py."""

from __future__ import annotations

import json

import pytest

TOML = '[priority]\nsources = ["cron"]\n\n[runner]\nttl_min = 1\nslots = 2\nattempts = 3\n'


def answer(store, *args: str, code: int = 0) -> dict:
    done = store.cli(*args, "--json")
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def why(store, slug: str) -> dict:
    return answer(store, "why", slug)


def marker(store, slug: str):
    """A directory storm's running marker of SLUG (a cache of the lease), or None."""
    path = store.lanes_dir / slug / ".qwenstorm" / "running"
    return json.loads(path.read_text()) if path.exists() else None


def test_release_gives_the_live_lease_back_the_lane_is_claimable_at_once_and_the_attempt_stays_spent(store):
    store.make("a 1\nb 2\n", toml=TOML)
    assert answer(store, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    done = answer(store, "release", "a", "--token", "1", "--reason", "stopped by SIGINT")
    assert (done["outcome"], done["token"], done["recorded"]) == ("done", 1, True)
    event = store.events()[-1]
    assert (event["action"], event["slug"], event["token"], event["holder"], event["reason"]) == (
        "release", "a", 1, "r1", "stopped by SIGINT")
    assert "release a: token 1 given back by its holder r1" in store.cli("log", "--action", "release").stdout
    seen = why(store, "a")
    assert (seen["state"], seen["lease"], seen["attempts"]) == ("ready", None, 1)
    assert [(h["token"], h["end"]) for h in seen["history"]] == [(1, "released")]
    if store.kind == "directory":
        assert marker(store, "a") is None
    # claimable at once, by anyone, under a greater token; the attempt count goes on
    again = answer(store, "claim", "--holder", "r2")
    assert again["decision"] == "run a 1 2"
    assert store.events()[-1]["attempt"] == 2
    # the released token is stale from then on, and the refusal is recorded
    for verb in (("release", "a", "--token", "1"), ("renew", "a", "--token", "1"),
                 ("finish", "a", "--token", "1", "--result", "ok")):
        refused = answer(store, *verb, code=2)
        assert (refused["code"], refused["recorded"]) == ("stale_fence", True), verb
    assert why(store, "a")["lease"]["token"] == 2
    assert store.result("a") is None
    assert store.equals_its_derivation()


def test_a_release_that_spends_the_last_attempt_quarantines_the_lane(store):
    store.make("a 1\n", toml="[runner]\nattempts = 1\n")
    assert answer(store, "claim")["decision"] == "run a 1 1"
    done = answer(store, "release", "a", "--token", "1")
    assert "quarantined" in done["message"]
    assert [e["action"] for e in store.events()][-3:] == ["claim", "release", "quarantine"]
    assert why(store, "a")["state"] == "quarantined"
    assert answer(store, "claim")["decision"].split()[0] == "wait"


def test_release_is_the_holders_request_a_stranger_or_undeclared_source_is_refused(store):
    store.make("a 1\n", toml=TOML)
    answer(store, "claim")
    assert answer(store, "release", "a", "--token", "1", "--source", "nobody", code=1)["code"] == "undeclared_source"
    lines = len(store.events())
    usage = store.cli("release", "a", "--token", "0")
    assert usage.returncode == 2 and len(store.events()) == lines  # a usage error, not a request: not recorded
    assert answer(store, "release", "a", "--token", "1", "--source", "cron")["outcome"] == "done"


def test_recover_force_ends_a_live_lease_whose_holder_is_gone_and_its_token_is_refused_afterwards(store):
    store.make("a 1\nb 2\n", toml=TOML)
    answer(store, "claim", "--holder", "gone")
    assert answer(store, "recover", "a", code=2)["code"] == "lease_live"
    assert "--force" in answer(store, "recover", "a", code=2)["message"]
    assert answer(store, "recover", "a", "--force", code=2)["code"] == "blank_reason"
    assert answer(store, "recover", "a", "--force", "--reason", " ", code=2)["code"] == "blank_reason"
    assert answer(store, "recover", "a", "--force", "--reason", "x", "--source", "cron", code=1)["code"] == "operator_only"
    assert why(store, "a")["lease"]["token"] == 1  # nothing of those refusals touched the lease
    done = answer(store, "recover", "a", "--force", "--reason", "host r1 reinstalled")
    assert (done["outcome"], done["recorded"]) == ("done", True)
    event = store.events()[-1]
    assert (event["action"], event["slug"], event["token"], event["force"], event["marker"], event["reason"]) == (
        "recover", "a", 1, True, False, "host r1 reinstalled")
    seen = why(store, "a")
    assert (seen["state"], seen["lease"], [h["end"] for h in seen["history"]]) == ("ready", None, ["recovered"])
    if store.kind == "directory":
        assert marker(store, "a") is None
    for verb in (("renew", "a", "--token", "1"), ("finish", "a", "--token", "1", "--result", "ok"),
                 ("release", "a", "--token", "1")):
        assert answer(store, *verb, code=2)["code"] == "stale_fence", verb
    assert answer(store, "claim")["decision"] == "run a 1 2"
    assert store.result("a") is None


def test_recover_force_of_a_lane_without_a_live_lease_is_what_recover_does(store, clock):
    """--force only adds the live lease's case: a lane not running is
    refused ``not_running``; an orphaned lease is taken back as an
    expiry; --force without SLUG is a usage error, not recorded."""
    store.make("a 1\nb 2\n", toml=TOML)
    assert answer(store, "recover", "b", "--force", "--reason", "x", code=2)["code"] == "not_running"
    answer(store, "claim", "--ttl", "5")
    clock.advance(6)
    answer(store, "recover", "a", "--force", "--reason", "x")
    assert [e["action"] for e in store.events()][-1] == "expire"
    lines = len(store.events())
    done = store.cli("recover", "--force", "--reason", "x")
    assert done.returncode == 2 and "name it" in done.stderr, done.stderr
    assert len(store.events()) == lines


def test_cancel_settles_a_waiting_lane_abandoned_recorded_and_again_is_a_recorded_noop(store):
    store.make("a 1\nb 2 a\nc 3\n", toml=TOML)
    assert answer(store, "cancel", "b", code=2)["code"] == "blank_reason"
    assert answer(store, "cancel", "b", "--reason", "x", "--source", "nobody", code=1)["code"] == "undeclared_source"
    assert answer(store, "cancel", "zz", "--reason", "x", code=2)["code"] == "unknown_slug"
    assert store.settled("abandoned") == []
    done = answer(store, "cancel", "b", "--reason", "superseded")
    assert (done["outcome"], done["recorded"], done.get("token")) == ("done", True, None)
    event = store.events()[-1]
    assert (event["action"], event["slug"], event["token"], event["reason"], event["by"].split(":")[0]) == (
        "cancel", "b", None, "superseded", "operator")
    assert store.settled("abandoned") == ["b"]
    seen = why(store, "b")
    assert (seen["state"], seen["status"], seen["cancelled"]["reason"]) == ("settled", "abandoned", "superseded")
    again = answer(store, "cancel", "b", "--reason", "again")
    assert (again["outcome"], again["recorded"]) == ("noop", True)
    assert store.events()[-1]["noop"] == "b is already abandoned"
    assert answer(store, "cancel", "c", "--reason", "by the bot", "--source", "cron")["outcome"] == "done"
    assert store.events()[-1]["by"] == "source:cron"
    # the cancelled lanes never run; the others do
    assert answer(store, "claim")["decision"] == "run a 1 1"
    answer(store, "finish", "a", "--token", "1", "--result", "ok")
    assert store.settled("abandoned") == ["b", "c"]
    assert store.equals_its_derivation()


def test_cancel_of_a_running_lane_revokes_its_lease_and_the_holders_renew_and_finish_are_lane_cancelled(store):
    store.make("a 1\nb 2\n", toml=TOML)
    assert answer(store, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    done = answer(store, "cancel", "a", "--reason", "wrong branch")
    assert (done["outcome"], done["token"]) == ("done", 1)
    assert store.events()[-1]["token"] == 1
    assert store.settled("abandoned") == ["a"]
    if store.kind == "directory":
        assert marker(store, "a") is None
    for verb in (("renew", "a", "--token", "1"), ("finish", "a", "--token", "1", "--result", "ok"),
                 ("release", "a", "--token", "1")):
        refused = answer(store, *verb, code=2)
        assert (refused["code"], refused["recorded"]) == ("lane_cancelled", True), verb
        assert "wrong branch" in refused["message"] and "stop its work" in refused["message"]
    assert store.result("a") is None
    seen = why(store, "a")
    assert (seen["state"], seen["status"], seen["lease"]) == ("settled", "abandoned", None)
    assert [h["end"] for h in seen["history"]] == ["cancelled"]
    # not claimable again: the next claim runs b, and a token on a is never minted again
    assert answer(store, "claim")["decision"] == "run b 2 1"
    assert answer(store, "cancel", "a", "--reason", "twice")["outcome"] == "noop"
    text = store.cli("log", "--slug", "a").stdout
    assert "cancel a: settled abandoned; the lease of token 1 revoked" in text


@pytest.mark.parametrize("verb", ["release", "cancel"])
def test_a_lane_process_may_not_release_or_cancel(store, verb):
    store.make("a 1\n", toml=TOML)
    answer(store, "claim")
    args = ("release", "a", "--token", "1") if verb == "release" else ("cancel", "a", "--reason", "x")
    from tests.conftest import clean_env

    done = store.cli(*args, "--json", env=clean_env(STORM_QUEUE_LANE="a"))
    assert done.returncode == 1 and json.loads(done.stdout)["code"] == "lane_process"
    assert why(store, "a")["lease"]["token"] == 1

"""Issue 32 item 1: ``finish SLUG --token N --result ok|failed --then-claim
[--holder NAME] [--ttl SECONDS] [--wait SECONDS]``, through the real command
line, on a directory storm and a database storm alike: one request that
records the finish's line, then exactly the lines the claim records, with
consecutive seqs; stdout the claim's one decision line, ``--json`` both
documents; a refused finish claims nothing and exits as ``finish`` does;
``--key`` makes the pair one request; ``--wait`` waits for work after the
finish is recorded. (That the lines are byte for byte the Python path's on
a database's server, and what each answers, is the twin test's:
tests/database/test_served.py.)"""

from __future__ import annotations

import threading


from tests.stores import doc, under_test

POLICY = "[runner]\nslots = 2\nttl_min = 1\n"


def test_the_finish_then_exactly_the_claims_lines_one_request(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\nc 3\n", toml=POLICY, unattended=True)
    assert s.cli("claim", "--holder", "r1").stdout == "run a 1 1\n"
    leased = doc(s, "claim", "--holder", "r2")
    assert leased["decision"] == "run b 2 1"
    before = s.events()[-1]["seq"]

    done = s.cli("finish", "a", "--token", "1", "--result", "ok", "--then-claim", "--holder", "r1", "--ttl", "90")
    assert (done.returncode, done.stdout, done.stderr) == (0, "run c 3 1\n", "")
    finish, claim = s.events()[-2:]
    assert [finish["seq"], claim["seq"]] == [before + 1, before + 2] and claim["prev"] is not None
    assert (finish["action"], finish["slug"], finish["token"], finish["result"]) == ("finish", "a", 1, "ok")
    assert (claim["action"], claim["slug"], claim["holder"], claim["token"], claim["ttl"]) == ("claim", "c", "r1", 1, 90)
    assert finish["at"] == claim["at"] and finish["by"] == claim["by"]  # one request, under one hold of the lock
    assert "key" not in finish and "key" not in claim

    # --json: the finish's document and the claim's, as finish --json and claim --json print them
    both = doc(s, "finish", "b", "--token", "1", "--result", "failed", "--then-claim", "--holder", "r2")
    assert set(both) == {"finish", "claim"}
    assert (both["finish"]["action"], both["finish"]["outcome"], both["finish"]["recorded"]) == ("finish", "done", True)
    assert both["finish"]["message"] == "b failed (token 1); attempt 1 of 3, it will be claimed again"
    assert (both["claim"]["action"], both["claim"]["decision"], both["claim"]["holder"]) == ("claim", "run b 2 2", "r2")
    assert both["claim"]["halted"] is False and both["claim"]["token"] == 2
    assert set(leased) == set(both["claim"])  # the same document as a claim of its own
    assert [e["action"] for e in s.events()[-2:]] == ["finish", "claim"]


def test_a_refused_finish_claims_nothing_and_exits_as_finish_does(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\n", toml=POLICY, unattended=True)
    assert s.cli("claim", "--holder", "r1").stdout == "run a 1 1\n"
    count = len(s.events())
    refused = s.cli("finish", "a", "--token", "7", "--result", "ok", "--then-claim")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "refused (stale_fence)" in refused.stderr
    assert [e["action"] for e in s.events()[count:]] == ["refused"]
    both = doc(s, "finish", "a", "--token", "7", "--result", "ok", "--then-claim", code=2)
    assert both["finish"]["code"] == "stale_fence" and both["claim"] is None
    plain = s.cli("finish", "a", "--token", "1", "--result", "ok", "--holder", "r1")  # the claim's flags need it
    assert plain.returncode == 2 and "--then-claim" in plain.stderr and len(s.events()) == count + 2
    assert s.cli("next").stdout == "run b 2\n"  # nothing was claimed


def test_under_a_key_the_pair_is_one_request(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\n", toml=POLICY, unattended=True)
    assert s.cli("claim", "--holder", "r1").stdout == "run a 1 1\n"
    first = doc(s, "finish", "a", "--token", "1", "--result", "ok", "--then-claim", "--holder", "r1", "--key", "k-7")
    count = len(s.events())
    finish, claim = s.events()[-2:]
    assert (finish["key"], claim["key"]) == ("k-7", "k-7/then-claim")
    again = doc(s, "finish", "a", "--token", "1", "--result", "ok", "--then-claim", "--holder", "r1", "--key", "k-7")
    assert len(s.events()) == count  # nothing new recorded
    assert again["finish"]["repeat"] == finish["seq"] and again["claim"]["repeat"] == claim["seq"]
    assert again["claim"]["decision"] == first["claim"]["decision"] == "run b 2 1"
    other = doc(s, "finish", "a", "--token", "1", "--result", "failed", "--then-claim", "--key", "k-7", code=2)
    assert other["finish"]["code"] == "idempotency_conflict" and other["claim"] is None
    too_long = doc(s, "finish", "b", "--token", "1", "--result", "ok", "--then-claim", "--key", "k" * 190, code=2)
    assert too_long["finish"]["code"] == "invalid_key" and "k" * 190 + "/then-claim" in too_long["finish"]["message"]


def test_wait_waits_for_work_after_the_finish_is_recorded(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\n", toml=POLICY, unattended=True)
    assert s.cli("claim", "--holder", "r1").stdout == "run a 1 1\n"
    assert s.cli("hold", "b", "--reason", "not yet").returncode == 0
    unheld = []
    timer = threading.Timer(1.0, lambda: unheld.append(s.cli("unhold", "b", "--reason", "go", process=True)))
    timer.start()
    try:
        done = s.cli("finish", "a", "--token", "1", "--result", "ok", "--then-claim", "--holder", "r1", "--wait", "30",
                     process=True)
    finally:
        timer.join(60)
    assert unheld and unheld[0].returncode == 0, unheld
    assert (done.returncode, done.stdout) == (0, "run b 2 1\n"), done.stderr
    assert [e["action"] for e in s.events()[-3:]] == ["finish", "unhold", "claim"]  # the finish, before the wait

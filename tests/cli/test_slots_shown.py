"""``why`` and ``watch`` agree with ``claim`` when the slots are full
(issue 33, item 7), on both stores: the next lane is shown as waiting for
a slot, naming the lanes that hold them; ``next`` keeps answering the
order; ``list`` keeps the order on its ``next:`` line and says on a
``slots:`` line (``slots`` in ``--json``) that a claim waits."""

from __future__ import annotations

import json

import pytest

HELD = "a, b hold all 2 [runner] slots"
WAIT = f"wait for a slot: c 3 runs next once a slot frees ({HELD})"


def answer(done) -> dict:
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def full(store):
    """Four lanes, two slots, both held by claims of a and b."""
    store.make("a 1\nb 2\nc 3\nd 4\n", toml="[runner]\nslots = 2\n")
    for slug in ("a", "b"):
        done = store.cli("claim", "--holder", f"r-{slug}")
        assert done.stdout.startswith(f"run {slug} "), done.stdout + done.stderr
    return store


def test_why_and_watch_say_what_a_claim_answers_next_keeps_the_order(full) -> None:
    assert full.cli("next").stdout == "run c 3\n"  # the order, for a runner that counts its own slots
    lines = len(full.events())
    assert full.cli("claim", "--holder", "r-c").stdout == "wait\n"  # within [runner] slots
    assert len(full.events()) == lines
    why = full.cli("why", "c").stdout.splitlines()
    assert why[0] == f"c: ready: waits for a slot ({HELD})"
    assert "position 3 of 4 in run order; it is what runs next, once a slot frees" in why
    assert why[-1] == f"next: {WAIT}"
    doc = answer(full.cli("why", "c", "--json"))
    assert (doc["state"], doc["next"], doc["waits_for_slot"], doc["decision"]) == ("ready", True, True, "run c 3")
    assert doc["slots"] == {"limit": 2, "held": ["a", "b"]}
    other = answer(full.cli("why", "d", "--json"))
    assert (other["waits_for_slot"], other["slots"]) == (False, {"limit": 2, "held": ["a", "b"]})
    assert full.cli("why", "d").stdout.splitlines()[-1] == f"next: {WAIT}"
    frame = full.cli("watch", "--once").stdout.splitlines()
    assert frame[1] == f"next: {WAIT}"


def test_list_keeps_the_order_and_says_a_claim_waits(full) -> None:
    plain = full.cli("list", "--plain").stdout.splitlines()
    assert plain[1] == "next: run c 3"
    assert plain[2] == f"slots: {HELD}: a claim answers wait; c 3 runs next once a slot frees"
    doc = answer(full.cli("list", "--json"))
    assert doc["decision"] == "run c 3" and doc["slots"] == {"limit": 2, "held": ["a", "b"]}


def test_a_slot_that_frees_is_seen_at_once_and_a_halt_says_halted(full) -> None:
    token = full.snapshot().state.run("a").lease.token
    assert full.cli("finish", "a", "--token", str(token), "--result", "ok").returncode == 0
    doc = answer(full.cli("why", "c", "--json"))
    assert (doc["waits_for_slot"], doc["slots"]) == (False, None)
    assert full.cli("why", "c").stdout.splitlines()[-1] == "next: review a"  # a awaits review, as next says
    assert full.cli("settle", "a", "integrated").returncode == 0
    assert full.cli("watch", "--once").stdout.splitlines()[1] == "next: run c 3"
    assert answer(full.cli("list", "--json"))["slots"] is None
    assert full.cli("claim", "--holder", "r-c").stdout.startswith("run c 3 ")
    assert answer(full.cli("why", "d", "--json"))["slots"] == {"limit": 2, "held": ["b", "c"]}
    assert full.cli("halt", "--reason", "disk full").returncode == 0
    halted = answer(full.cli("why", "d", "--json"))
    assert (halted["slots"], halted["decision"], halted["halted"]) == (None, "halted", True)
    assert full.cli("watch", "--once").stdout.splitlines()[1] == "next: halted"


def test_an_orphan_holds_no_slot_a_claim_would_take_back(store, clock) -> None:
    """A lease past its expiry is taken back by the claim first: it does
    not keep the next lane waiting (as the claim decides). The clock
    fixture moves a database storm's clock too (its claims are timed by
    the server)."""
    from storm_queue.core.clock import seconds

    store.make("a 1\nb 2\nc 3\nd 4\n", toml="[runner]\nslots = 2\nttl_min = 1\n")
    assert store.cli("claim", "--holder", "r-a", "--ttl", "900").stdout.startswith("run a 1 ")
    assert store.cli("claim", "--holder", "r-b", "--ttl", "5").stdout.startswith("run b 2 ")
    assert store.cli("bump", "c", "--reason", "first").returncode == 0  # c runs before b if b is taken back
    assert answer(store.cli("why", "c", "--json"))["slots"] == {"limit": 2, "held": ["a", "b"]}
    full = store
    clock.advance(max(0.0, seconds(store.snapshot().state.run("b").lease.expires) + 1 - clock()))
    doc = answer(full.cli("why", "c", "--json"))
    assert doc["slots"] is None and doc["decision"] == "run c 3"
    assert full.cli("claim", "--holder", "r-c").stdout.startswith("run c 3 ")

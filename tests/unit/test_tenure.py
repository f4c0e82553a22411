"""Unit tests of what became of a lease (issue 33, item 4), in the pure
core: ``tenure.tenure`` says live exactly when the fence of renew, finish
and release admits the token (``runs.holds``), and otherwise how the
lease ended, for every way the log can end one; a halt ends none."""

from __future__ import annotations

import pytest

from storm_queue.core import runs
from storm_queue.core.tenure import ENDINGS, tenure
from tests.unit.test_lease_ends import cancel, fenced, release
from tests.unit.test_runs import World


def seen(w: World, slug: str, token: int):
    found = tenure(w.snap(), slug, token)
    assert found is not None
    assert (found.ended is None) == runs.holds(w.snap(), slug, token)  # live: exactly what the fence admits
    if found.ended is not None:
        assert found.ended in ENDINGS
        assert fenced(w, slug, token)  # and its renew, finish, release are refused
    assert found.line.startswith(f"{found.ended or 'live'} {slug} {token}: ")
    return found


def test_a_live_lease_names_its_holder_and_expiry_and_a_halt_does_not_end_it() -> None:
    w = World("a 1\nb 2\n")
    c = w.claim(holder="r1")
    found = seen(w, "a", c.token)
    assert (found.ended, found.holder, found.expires) == (None, "r1", c.expires)
    assert found.line == f"live a 1: held by r1 until {c.expires}"
    w.record([{"action": "halt", "reason": "disk full"}])
    assert w.state.halt is not None
    assert seen(w, "a", c.token).ended is None


def test_a_cancel_says_who_cancelled_when_and_why() -> None:
    w = World("a 1\n")
    c = w.claim(holder="r1")
    cancel(w, "a", reason='wrong "branch"\n')
    found = seen(w, "a", c.token)
    at = w.events[-1]["at"]
    assert (found.ended, found.by, found.at, found.reason, found.ledger) == (
        "cancelled", "operator:op", at, 'wrong "branch"\n', "abandoned")
    assert found.words == f'by operator:op at {at} ("wrong \\"branch\\"\\x0a"); a is settled abandoned'
    assert found.line.isprintable()  # outside text quoted, escaped


@pytest.mark.parametrize("result", ["ok", "failed"])
def test_a_finish_and_a_release_end_a_lease(result: str) -> None:
    w = World("a 1\n")
    c = w.claim(holder="r1")
    w.finish("a", c.token, result)
    found = seen(w, "a", c.token)
    assert (found.ended, found.result, found.at) == ("finished", result, w.events[-1]["at"])
    w2 = World("a 1\n")
    c2 = w2.claim(holder="r1")
    release(w2, "a", c2.token)
    assert seen(w2, "a", c2.token).ended == "released"


def test_an_expiry_ends_a_lease_before_it_is_taken_back_and_a_newer_claim_is_named() -> None:
    w = World("a 1\n")
    c = w.claim(holder="r1", ttl=5)
    w.advance(6)
    found = seen(w, "a", c.token)  # past its expiry: a renew is refused already
    assert (found.ended, found.at) == ("expired", c.expires)
    assert "not yet taken back" in found.words
    again = w.claim(holder="r2")  # takes it back (an expire line), and leases it anew
    assert again.token == 2
    found = seen(w, "a", c.token)
    assert (found.ended, found.newer) == ("expired", 2)
    assert found.words.endswith("; a is now leased to r2 under token 2")
    assert seen(w, "a", 2).ended is None


def test_a_forced_recover_a_forced_settle_and_a_reset_end_a_lease() -> None:
    w = World("a 1\n")
    c = w.claim()
    w.recover("a", force=True)
    assert seen(w, "a", c.token).ended == "recovered"
    w = World("a 1\n")
    c = w.claim()
    w.integrated.add("a")  # settle --force: the ledger, then the expiry and the settle line
    w.record([{"action": "expire", "slug": "a", "token": c.token, "expired": w.now},
              {"action": "settle", "slug": "a", "ledger": "integrated"}])
    found = seen(w, "a", c.token)
    assert (found.ended, found.ledger) == ("settled", "integrated")
    w = World("a 1\n")
    w.record([{"action": "reset", "reason": "damaged", "abandons": 4096}])  # tokens of the old log are below it
    assert tenure(w.snap(), "a", 3).ended == "reset"


def test_a_lane_settled_by_hand_keeps_its_live_lease_live_as_the_fence_does() -> None:
    w = World("a 1\n")
    c = w.claim()
    w.integrated.add("a")
    found = seen(w, "a", c.token)
    assert (found.ended, found.ledger) == (None, "integrated")


def test_a_token_never_leased_is_none_and_one_seen_on_a_marker_is_superseded() -> None:
    w = World("a 1\n")
    assert tenure(w.snap(), "a", 1) is None
    c = w.claim()
    assert tenure(w.snap(), "a", c.token + 1) is None
    assert tenure(w.snap(), "b", 1) is None
    w = World("a 1\n", running={"a": 7})
    w.recover("a", force=True)  # a marker's token is observed: later tokens pass it
    found = tenure(w.snap(), "a", 7)
    assert found is not None and found.ended == "superseded"

"""The starving lane in the pure core (issue 12 item 5), with a fake clock:
``ready_since`` is the latest moment that could have made a lane ready,
``passed_over`` the claims of other lanes since, and ``starving`` needs
both a wait longer than ``starving_after`` and a lane started ahead. By
Hypothesis: ``passed_over`` never exceeds the claims made while the lane
was ready, starving never comes undone as time passes, and the run order
never changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from storm_queue.core import fold, resolver
from storm_queue.core import queuetext
from storm_queue.core.clock import stamp
from storm_queue.core.lane import Snapshot
from storm_queue.core.ledgers import Ledgers
from storm_queue.core.records import replace
from storm_queue.core.starving import NOT_READY, claim_times, ready_since, waits

T0 = 1_800_000_000.0  # the fake clock starts here
QUEUED = stamp(T0)  # queue.txt's last change


def at(t: float) -> str:
    return stamp(T0 + t)


def claim(slug: str, t: float, token: int = 1) -> dict:
    return {"action": "claim", "slug": slug, "issue": "1", "holder": "r1", "token": token, "ttl": 60,
            "expires": at(t + 60), "attempt": token, "at": at(t), "by": "operator:alice"}


def finish(slug: str, t: float, result: str = "ok", token: int = 1) -> dict:
    return {"action": "finish", "slug": slug, "token": token, "result": result, "at": at(t), "by": "operator:alice"}


def snap(queue: str, events: list[dict], now: float, integrated=(), finished=()) -> Snapshot:
    q = queuetext.parse(queue)
    led = Ledgers(frozenset(integrated), frozenset(), frozenset(finished), {}, False)
    return Snapshot({l.slug: l for l in q.lanes}, led, fold.replay(events), at(now), {}, (), (QUEUED, QUEUED))


def test_a_lane_passed_over_for_longer_than_starving_after_is_starving():
    events = [claim("c", 10), finish("c", 20), claim("b", 30)]
    s = snap("a 1\nb 2\nc 3\n", events, now=100, finished=["c"])
    view = resolver.resolve(s)
    found = waits(s, view.rows, 60, T0 + 100)
    assert found["a"].ready_since == QUEUED and found["a"].passed_over == 2 and found["a"].starving
    assert found["b"] is NOT_READY and found["c"] is NOT_READY  # running, finished
    # not yet: 100 s is not longer than 200 s
    assert not waits(s, view.rows, 200, T0 + 100)["a"].starving
    # no starving_after: never starving, the counts stay
    assert waits(s, view.rows, None, T0 + 100)["a"] == replace(found["a"], starving=False)


def test_nothing_started_ahead_means_not_starving_however_long_it_waits():
    s = snap("a 1\nb 2\n", [], now=10 ** 6)
    assert waits(s, resolver.resolve(s).rows, 1, T0 + 10 ** 6)["b"].passed_over == 0
    assert not waits(s, resolver.resolve(s).rows, 1, T0 + 10 ** 6)["b"].starving


def test_ready_since_is_the_latest_event_that_made_it_ready():
    add = {"action": "add", "slug": "late", "issue": "9", "deps": [], "appended": True, "at": at(50), "by": "operator:alice"}
    settle = {"action": "settle", "slug": "dep", "ledger": "integrated", "at": at(70), "by": "operator:alice"}
    events = [claim("x", 10), add, claim("x", 60, 2), finish("x", 65, "failed", 2), settle, claim("y", 80)]
    s = snap("x 1\ny 2\nlate 9\ndep 4\nneeds 5 dep\n", events, now=100, integrated=["dep"])
    assert ready_since(s, "late") == at(50)  # queued by add
    assert ready_since(s, "x") == at(65)  # its last attempt failed then
    assert ready_since(s, "needs") == at(70)  # its dependency was integrated then
    found = waits(s, resolver.resolve(s).rows, None, T0 + 100)
    assert (found["late"].passed_over, found["x"].passed_over, found["needs"].passed_over) == (2, 1, 1)


def test_a_waiver_and_a_schedule_that_came_date_the_wait():
    waive = {"action": "waive", "slug": "ui", "dep": "api", "undo": False, "moved": [], "removed": [],
             "at": at(40), "by": "operator:alice", "seq": 3}
    sched = {"action": "schedule", "slug": "later", "not_before": at(90), "at": at(5), "by": "operator:alice"}
    s = snap("api 1\nui 2 api\nlater 3\n", [waive, sched], now=100)
    assert ready_since(s, "ui") == at(40) and ready_since(s, "later") == at(90)


# -- properties, by Hypothesis ------------------------------------------------------

LANES = ("a", "b", "c", "d")


@st.composite
def histories(draw):
    """Claims at increasing times, each ending (ok or failed) before the next,
    then a time after them all."""
    events, t, tokens = [], 1.0, dict.fromkeys(LANES, 0)
    for slug in draw(st.lists(st.sampled_from(LANES), max_size=8)):
        t += draw(st.integers(1, 500))
        tokens[slug] += 1
        events.append(claim(slug, t, tokens[slug]))
        t += draw(st.integers(1, 500))
        events.append(finish(slug, t, draw(st.sampled_from(["ok", "failed"])), tokens[slug]))
    now = t + draw(st.integers(0, 5000))
    finished = {e["slug"] for e in events if e["action"] == "finish" and e["result"] == "ok"}
    return events, now, finished


@settings(max_examples=200, deadline=None)
@given(histories(), st.none() | st.integers(1, 3000))
def test_passed_over_never_exceeds_the_claims_made_while_ready_and_the_order_never_changes(history, after):
    events, now, finished = history
    s = snap("a 1\nb 2\nc 3\nd 4\n", events, now, finished=sorted(finished))
    view = resolver.resolve(s)
    found = waits(s, view.rows, after, T0 + now)
    claims = claim_times(s)
    assert list(found) == [r.slug for r in view.rows]  # every row, in the resolver's order
    assert resolver.resolve(s) == view  # looking changes nothing
    for row in view.rows:
        wait = found[row.slug]
        if row.state != resolver.READY:
            assert wait == NOT_READY
            continue
        made_while_ready = [c for c in claims if c > wait.ready_since]
        assert wait.passed_over <= len(made_while_ready)
        others = [e for e in events if e["action"] == "claim" and e["slug"] != row.slug and e["at"] > wait.ready_since]
        assert wait.passed_over == len(others)
        assert wait.ready_since <= s.now
        if wait.starving:
            assert after is not None and wait.passed_over > 0 and wait.ready_since < stamp(T0 + now - after)
            # starving never comes undone as time passes (nothing else happening)
            assert waits(s, view.rows, after, T0 + now + 3600)[row.slug].starving


def test_starving_after_is_a_duration_and_anything_else_is_a_declaration_error():
    from storm_queue.core import config

    for text, seconds in (('"1s"', 1), ('"90m"', 5400), ('"6h"', 21600), ('"2d"', 172800)):
        decl = config.parse(f"[priority]\nstarving_after = {text}\n")
        assert decl.error is None and decl.starving_after == seconds, text
    assert config.parse("[priority]\n").starving_after is None
    for bad in ('"6"', '"0h"', '"-1h"', '"6 h"', '"1w"', "6", '"٣h"', '"99999999999d"', "true"):
        decl = config.parse(f"[priority]\nstarving_after = {bad}\n")
        assert decl.sources_error and "starving_after" in decl.sources_error and not decl.log_error, bad

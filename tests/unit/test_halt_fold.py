"""Issue 12 items 3 and 6 in the pure core: the fold keeps the operator's
halt (who, when, why) and each lane's last unpark; a no-op changes
nothing; the checkpoint keeps both; the resolver says ``wait`` and a
claim's plan ``halted`` while a halt is in force; ``lane.keepers`` names
the named lanes that need a lane now."""

from __future__ import annotations

from storm_queue.core import fold
from storm_queue.core.config import Policy
from storm_queue.core.fold import EMPTY, Act
from storm_queue.core.halt import plan_halt, plan_resume
from storm_queue.core.lane import Snapshot, keepers, needed_by
from storm_queue.core.ledgers import Ledgers
from storm_queue.core import statebody
from storm_queue.core.queuetext import Lane
from storm_queue.core.records import replace
from storm_queue.core.resolver import decided, resolve
from storm_queue.core.runs import plan_claim

T1, T2 = "2026-12-01T10:00:00.000000Z", "2026-12-01T11:00:00.000000Z"
NO_LEDGERS = Ledgers(frozenset(), frozenset(), frozenset(), {}, False)


def ev(action: str, seq: int, at: str = T1, by: str = "operator:op", **extra) -> dict:
    return {"action": action, "seq": seq, "at": at, "by": by, **extra}


def snap(queue: dict[str, tuple[str, ...]], state=EMPTY) -> Snapshot:
    lanes = {slug: Lane(slug, str(i + 1), deps, i + 1) for i, (slug, deps) in enumerate(queue.items())}
    return Snapshot(lanes, NO_LEDGERS, state, T2)


def test_a_halt_is_kept_with_who_when_and_why_until_a_resume():
    halted = fold.replay([ev("halt", 1, reason="disk full")])
    assert halted.halt == Act(1, T1, "operator:op", "disk full")
    again = fold.apply(halted, ev("halt", 2, at=T2, reason="again", noop="already halted"))
    assert again.halt == halted.halt  # a no-op keeps the first halt
    assert fold.apply(halted, ev("resume", 3, reason="ok")).halt is None
    assert replace(fold.apply(EMPTY, ev("resume", 1, reason="x", noop="not halted")), requests={}) == EMPTY  # nothing but the count
    assert fold.apply(halted, ev("refused", 4, requested="resume", code="operator_only")).halt == halted.halt


def test_an_unpark_is_kept_on_the_run_with_who_when_and_why():
    s = fold.replay([ev("quarantine", 1, slug="a", attempts=1, budget=1),
                     ev("unpark", 2, at=T2, slug="a", reason="fixed")])
    run = s.run("a")
    assert (run.quarantined, run.attempts, run.unparked) == (None, 0, Act(2, T2, "operator:op", "fixed"))


def test_the_checkpoint_keeps_the_halt_and_the_unpark():
    s = fold.replay([ev("quarantine", 1, slug="a", attempts=1, budget=1), ev("unpark", 2, slug="a", reason="r"),
                     ev("halt", 3, reason="h")])
    assert statebody.load_state(statebody.dump_state(s)) == s
    bad = replace(s, halt=Act("3", T1, "operator:op", None))  # not a record the fold could make
    try:
        statebody.load_state(statebody.dump_state(bad))
    except ValueError as exc:
        assert "wrong shape" in str(exc)
    else:
        raise AssertionError("a halt with a text seq was read back")


def test_halt_and_resume_plans_are_no_ops_when_nothing_would_change():
    assert plan_halt(snap({})) == {"action": "halt"}
    halted = fold.replay([ev("halt", 1, reason='a "b"')])
    noop = plan_halt(snap({}, halted))["noop"]
    assert noop.startswith("the storm is already halted by operator:op at " + T1) and 'reason "a \\"b\\""' in noop
    assert plan_resume(snap({})) == {"action": "resume", "noop": "the storm is not halted"}
    assert plan_resume(snap({}, halted)) == {"action": "resume"}


def test_while_halted_next_says_halted_and_a_claim_leases_nothing():
    queue = {"a": (), "b": ()}
    assert resolve(snap(queue)).decision == "run a 1"
    halted = fold.replay([ev("halt", 1, reason="r")])
    view = resolve(snap(queue, halted))
    assert (view.decision, view.halt) == ("halted", halted.halt)
    assert decided(snap(queue, halted)).decision == "halted"
    claim = plan_claim(snap(queue, halted), Policy(), "r1", 60, 0.0)
    assert (claim.decision, claim.slug, claim.events) == ("halted", None, ())


def test_keepers_name_the_named_lanes_that_need_a_lane_now():
    queue = {"schema": (), "api": ("schema",), "billing": ("api",), "ui": ("api",)}
    both = fold.replay([ev("bump", 1, slug="billing", issue="3", deps=["api"], moved=["schema", "api", "billing"], removed=[]),
                        ev("bump", 2, slug="ui", issue="4", deps=["api"], moved=["ui"], removed=[])])
    assert keepers(snap(queue, both)) == {"schema": ("billing", "ui"), "api": ("billing", "ui")}
    only_ui = fold.apply(both, ev("unbump", 3, slug="billing", moved=[], removed=["billing"]))
    assert keepers(snap(queue, only_ui)) == {"schema": ("ui",), "api": ("ui",)}
    assert needed_by(snap(queue, only_ui), "api") == ("ui",)
    assert only_ui.marks["api"].slug == "billing"  # the record of who pulled it stays

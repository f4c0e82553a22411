"""Holding one lane, and letting it go: ``hold`` and ``unhold`` (issue 33,
item 3). A held lane keeps its place in run order and in the priority lane,
but ``next`` and ``claim`` never start it (its state is ``held``), so the
lanes that depend on it wait; a lane running when it is held runs on (a
hold decides what starts; ``cancel`` stops). The hold is folded from the
log (``fold.Run.held``: who, when, why and its line), so both stores, a
checkpoint and every replay keep it alike.

The planning is pure (``plan_hold``, ``plan_unhold``, ``hold_words``); the
requests are ``service.requests.hold`` and ``unhold``."""

from __future__ import annotations

from .lane import Refusal, Snapshot
from .names import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .fold import Act


def hold_words(held: Act) -> str:
    """Who held the lane, when and why, in words (outside text quoted)."""
    return held.words("held")


def hold_note(slug: str, held: Act) -> str:
    """A held lane as one sentence for a reader: who, when, why, and the way on."""
    return f"{hold_words(held)}: not started until storm-queue unhold {printable(slug)} --reason TEXT"


def plan_hold(snap: Snapshot, slug: str) -> dict[str, Any] | Refusal:
    """The ``hold`` event of ``slug``: refused for a settled lane
    (``lane_settled``: it never starts again) and for one ``queue.txt``
    does not carry (``unknown_slug``); a no-op, saying since when, for a
    lane already held. A running or finished lane may be held: the hold
    decides only what starts."""
    if snap.ledgers.settled(slug):
        ledger = "integrated" if slug in snap.ledgers.integrated else "abandoned"
        return Refusal("lane_settled", f"{slug} is settled ({ledger}), so it never starts again: there is nothing to hold")
    if slug not in snap.lanes:
        return Refusal("unknown_slug", f"queue.txt carries no lane {slug}, so there is nothing to hold")
    held = snap.state.run(slug).held
    if held is not None:
        return {"action": "hold", "slug": slug, "noop": f"{slug} is already {hold_words(held)}"}
    return {"action": "hold", "slug": slug}


def plan_unhold(snap: Snapshot, slug: str) -> dict[str, Any]:
    """The ``unhold`` event of ``slug``: a no-op when it is not held."""
    if snap.state.run(slug).held is None:
        return {"action": "unhold", "slug": slug, "noop": f"{slug} is not held"}
    return {"action": "unhold", "slug": slug}


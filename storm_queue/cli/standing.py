"""What the operator's views (``list``, ``why``, ``watch``) say is next:
``next``'s decision (the order), except on a storm that moved (``moved to
URL``) and while every one of ``[runner] slots`` is held (the wait a
claim answers, naming the lanes that hold them); and what a listing
narrowed to some states says when none is in them. Outside text escaped."""

from __future__ import annotations

from ..core.names import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..core.runs import Slots
    from ..service.storm import Listing


def slots_json(slots: Slots | None) -> dict[str, Any] | None:
    """Every slot held (a claim answers wait): how many, and the lanes holding them."""
    return None if slots is None else {"limit": slots.limit, "held": list(slots.held)}


def slots_words(slots: Slots) -> str:
    """Who holds every slot, in words: ``a, b hold all 2 [runner] slots``."""
    held = ", ".join(printable(s) for s in slots.held)
    if slots.limit == 1:
        return f"{held} holds the one [runner] slot"
    return f"{held} hold all {slots.limit} [runner] slots"


def slots_line(decision: str, slots: Slots) -> str:
    """``list``'s word for every slot held, under its ``next:`` line (the order)."""
    return f"{slots_words(slots)}: a claim answers wait; {decision[4:]} runs next once a slot frees"


def next_words(decision: str, moved: str = "", slots: Slots | None = None) -> str:
    """What ``list``, ``why`` and ``watch`` say is next: ``next``'s decision
    (the order), except ``moved to URL`` on a storm that moved (``next`` and
    ``claim`` exit 3 there) and, while every slot is held, the wait a claim
    answers, naming the lane next in order and the lanes holding the slots."""
    if moved:
        return f"moved to {printable(moved)}"
    if slots is not None and decision.startswith("run "):
        return f"wait for a slot: {decision[4:]} runs next once a slot frees ({slots_words(slots)})"
    return decision


def none_words(listing: Listing) -> str:
    """What a listing with no lane to show says: none to run, or with
    ``list --state``, none in the states asked for (``none quarantined``)."""
    return "none " + " or ".join(listing.only) if listing.only else "none to run"

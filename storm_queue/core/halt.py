"""The operator's halt of the whole storm, and its end: ``halt`` and
``resume``. While a halt is in force no lane starts (``next`` says
``wait``, ``claim`` answers ``halted`` and leases nothing); leases already
held run on, and may renew and finish. The halt is folded from the log
(``fold.LaneState.halt``), so both stores keep it alike.

The planning is pure (``plan_halt``, ``plan_resume``, ``halt_words``); the
requests are ``service.requests.halt`` and ``resume``."""

from __future__ import annotations

from .lane import Snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .fold import Act


def halt_words(halt: Act) -> str:
    """Who halted the storm, when and why, in words (outside text quoted)."""
    return halt.words("halted")


def halt_note(halt: Act) -> str:
    """The halt as one sentence for a reader: who, when, why, and the way on."""
    return (f"the storm is {halt_words(halt)}: no lane starts until storm-queue resume --reason TEXT; "
            "leases already held run on")


def plan_halt(snap: Snapshot) -> dict[str, Any]:
    """The ``halt`` event: a no-op (saying since when) when a halt is in force."""
    if snap.state.halt is not None:
        return {"action": "halt", "noop": f"the storm is already {halt_words(snap.state.halt)}"}
    return {"action": "halt"}


def plan_resume(snap: Snapshot) -> dict[str, Any]:
    """The ``resume`` event: a no-op when no halt is in force."""
    if snap.state.halt is None:
        return {"action": "resume", "noop": "the storm is not halted"}
    return {"action": "resume"}

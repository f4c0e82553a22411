"""The operator's halt of the whole storm, and its end: ``halt`` and
``resume``. While a halt is in force no lane starts (``next`` says
``wait``, ``claim`` answers ``halted`` and leases nothing); leases already
held run on, and may renew and finish. The halt is folded from the log
(``fold.LaneState.halt``), so both stores keep it alike.

The planning is pure (``plan_halt``, ``plan_resume``, ``halt_words``); the
``Halting`` mixin shapes the request and gives it to
``passage.Passage._request``."""

from __future__ import annotations

from .lane import Refusal, Snapshot
from .names import printable, quote
from .outcome import Outcome, Request, Step
from .shapes import optional_text, shape_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .fold import Act


def halt_words(halt: Act) -> str:
    """Who halted the storm, when and why, in words (outside text quoted)."""
    words = f"halted by {printable(halt.by)} at {printable(halt.at)}"
    if halt.reason is not None:
        words += f", reason {quote(halt.reason)}"
    return words


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


class Halting:
    """The operator's halt and resume, for ``service.storm.Storm``."""

    def halt(self, reason: str | None, source: str | None = None, dry_run: bool = False,
             key: str | None = None) -> Outcome:
        """Halt the storm: from now on no lane starts until ``resume``.
        Operator only, with a reason; halting a halted storm is a recorded
        no-op. Leases already held are untouched."""
        return self._halt_or_resume("halt", reason, source, dry_run, key)

    def resume(self, reason: str | None, source: str | None = None, dry_run: bool = False,
               key: str | None = None) -> Outcome:
        """End the halt: lanes start again. Operator only, with a reason;
        resuming a storm that is not halted is a recorded no-op."""
        return self._halt_or_resume("resume", reason, source, dry_run, key)

    def _halt_or_resume(self, verb: str, reason: str | None, source: str | None, dry_run: bool,
                        key: str | None) -> Outcome:
        req = Request(verb, None, optional_text(reason), optional_text(source), optional_text(key))
        refusal = shape_names(None, (), req.source)
        if refusal is None and not (req.reason or "").strip():
            refusal = Refusal("blank_reason", f"{verb} needs --reason TEXT saying why "
                              + ("no lane may start" if verb == "halt" else "lanes may start again"))

        def plan(snap: Snapshot, by: str) -> Step:
            event = plan_halt(snap) if verb == "halt" else plan_resume(snap)
            if "noop" in event:
                return Step(Outcome("noop", verb, None, by, message=f"nothing to do: {event['noop']}"), [event])
            words = ("halted: no lane starts (claim leases nothing, next says wait) until storm-queue resume; "
                     "leases already held run on" if verb == "halt" else "resumed: lanes start again")
            return Step(Outcome("done", verb, None, by, message=words), [event])

        return self._request(req, refusal, plan, dry_run, operator_only=True)

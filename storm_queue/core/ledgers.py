"""What the ledgers say of the lanes: settled (integrated, abandoned),
finished, running, unattended; and the ``result.json`` bodies storm-queue
writes for a lane. Pure values: each store reads and writes its own
(files in ``store.directory.ledger``, rows in ``store.postgres``)."""

from __future__ import annotations

from .records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


@dataclass(frozen=True)
class Ledgers:
    """The ledgers and markers; ``running`` maps each lane with a running
    marker to the fencing token the marker carries (None: a marker with no
    token, written by hand or by a runner that does not claim)."""

    integrated: frozenset[str]
    abandoned: frozenset[str]
    finished: frozenset[str]
    running: Mapping[str, int | None]
    unattended: bool

    def settled(self, slug: str) -> bool:
        return slug in self.integrated or slug in self.abandoned

    def done(self, slug: str) -> bool:
        """Settled or finished: nothing is left for a runner to start."""
        return self.settled(slug) or slug in self.finished


def blocked_result(blocked_on: list[str], at: str) -> dict:
    """The ``result.json`` of a lane ``next`` marks blocked, as the storm's
    runner and reviewer read it: not ``completed``, ``blocked_on`` the first
    abandoned dependency its queue.txt line names, ``blocked_on_all`` every
    one, in line order."""
    return {"completed": False, "status": "blocked", "blocked_on": blocked_on[0], "blocked_on_all": list(blocked_on),
            "at": at, "by": "storm-queue next"}


def finished_result(token: int, holder: str, note: str | None, at: str) -> dict:
    """The ``result.json`` that ``finish --result ok`` writes: ``completed``,
    awaiting review, with the lease's ``token`` (how a finish asked again is
    known)."""
    return {"completed": True, "status": "ok", "token": token, "holder": holder, "note": note, "at": at}


def is_blocked_mark(body: object) -> bool:
    """Whether a ``result.json`` body is the blocked mark ``next`` wrote
    (by ``storm-queue next``, naming ``blocked_on``), not a lane's own result."""
    return isinstance(body, dict) and body.get("by") == "storm-queue next" and "blocked_on" in body

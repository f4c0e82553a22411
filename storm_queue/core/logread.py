"""What a read of a storm's log finds, on either store: the ``LogRead``
(the lane state it folds to, how far it reached, what it warns of), the
directory's witness, and ``Damage``, which makes the order unknown."""

from __future__ import annotations

from . import fold
from .errors import UnknownOrder
from .records import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RESET_HINT = (
    "the operator can start a new log with: storm-queue reset --reason TEXT "
    "(the old log is kept beside it), or keep the lines that verify from line 1 with: "
    "storm-queue reset --keep-intact --reason TEXT"
)
ADOPT_HINT = (
    "the operator takes it over, keeping its order, with: storm-queue adopt --reason TEXT "
    "(the old log is kept beside the new one)"
)
#: what a read says of the earlier tool's log
OLD_FORMAT = "the log was written by the earlier priority tool (its lines have no seq or prev)"


class Damage(UnknownOrder):
    """Damage that makes the order unknown: ``what`` is wrong, at ``line``
    (1-based; 0 when it is not one line's fault) starting at byte ``offset``."""

    def __init__(self, log_path: str, what: str, line: int = 0, offset: int = 0, hint: str = RESET_HINT):
        super().__init__(f"the priority order is unknown: {log_path}: {what}; {hint}")
        self.what, self.line, self.offset = what, line, offset


@dataclass(frozen=True)
class Witness:
    log: str
    length: int
    seq: int
    digest: str | None
    at: str


@dataclass
class LogRead:
    """What a read of the log found.

    ``length`` is the end of the last whole line; ``torn`` the count of bytes
    after it that no acknowledged write produced. ``fresh`` means there is
    neither a log nor a witness: a storm that has recorded nothing yet.
    ``checkpoint_seq`` is the ``seq`` of the checkpoint the fold started
    from (0: it replayed the log from its first line).
    """

    path: str
    state: fold.LaneState = fold.EMPTY
    seq: int = 0
    digest: str | None = None
    length: int = 0
    torn: int = 0
    fresh: bool = False
    log_exists: bool = False
    witness: Witness | None = None
    events: list[dict[str, Any]] | None = None
    warnings: list[str] = field(default_factory=list)
    checkpoint_seq: int = 0

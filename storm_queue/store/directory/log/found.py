"""What a read of the priority log finds: the log's witness and the
``LogRead`` (the reader makes it, the checkpoint refreshes it)."""

from __future__ import annotations

from ....core import fold
from ..fsutil import beside
from ....core.records import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def witness_path(log_path: str) -> str:
    """Where the witness of ``log_path`` lives: ``.<log name>.witness`` beside it."""
    return beside(log_path, "witness")


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

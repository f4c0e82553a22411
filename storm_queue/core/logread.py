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
#: what the exit-3 message of a database storm advises: its log is rows, never set aside nor started anew
RESTORE_HINT = (
    "storm-queue verify names the first bad line; the operator restores the database from its backup "
    "(a database storm's log is rows, never set aside or begun anew)"
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


@dataclass(frozen=True)
class Lost:
    """One line of a log a reset would not keep: its number in the file
    (``line``, from 1) and, when it can be read as an event, its ``seq``,
    ``action``, ``slug`` (the lane it names, if any; a refusal's raw text
    too) and, for a refusal, the verb it refused (``requested``); else
    ``why`` it could not be read (a torn tail, a line that is not an event)."""

    line: int
    seq: int | None = None
    action: str | None = None
    slug: str | None = None
    requested: str | None = None
    why: str | None = None
    #: the bytes after the last newline (a write never acknowledged), not a line
    torn: bool = False

    @property
    def readable(self) -> bool:
        return self.why is None

    def to_json(self) -> dict[str, Any]:
        if not self.readable:
            return {"line": self.line, "readable": False, "why": self.why}
        out: dict[str, Any] = {"line": self.line, "readable": True, "seq": self.seq, "action": self.action,
                               "slug": self.slug}
        if self.requested is not None:
            out["requested"] = self.requested
        return out


def lost(raw: bytes, line: int) -> Lost:
    """What line number ``line`` of a log a reset would not keep was:
    ``raw`` its bytes (its newline included, when it has one)."""
    from .framing import Malformed, decode

    if not raw.endswith(b"\n"):
        return Lost(line, why=f"torn: {len(raw)} bytes with no final newline (a write never acknowledged)", torn=True)
    try:
        event = decode(raw)
    except Malformed as exc:
        return Lost(line, why=f"not an event: {exc}")
    slug = event.get("slug")
    requested = event.get("requested") if event["action"] == "refused" else None
    return Lost(line, event["seq"], event["action"], slug if isinstance(slug, str) else None,
                requested if isinstance(requested, str) else None)


@dataclass(frozen=True)
class Cut:
    """What a reset of an unreadable log keeps and loses, read before it
    writes anything: ``kept``, the read of the lines the new log begins
    with (``reset --keep-intact``: the longest prefix that verifies from
    line 1; a plain reset keeps none), ``lost``, every line after them,
    and ``abandons``, the larger of the old log's bytes on disk and its
    witnessed length (what its reset line records); ``missing``, the
    lines its witness recorded past the end of the file, which cannot be
    named but by number."""

    keep_intact: bool
    kept: LogRead
    lost: tuple[Lost, ...]
    abandons: int
    #: the lines the witness recorded that are no longer in the file (first, last), none when () (a log cut short)
    missing: tuple[int, ...] = ()

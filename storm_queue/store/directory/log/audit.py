"""The full audit of a priority log, for ``storm-queue verify``.

Its core, ``check_lines``, audits a stream of lines wherever they are kept
(a file, a database table): every line's framing and schema, ``seq`` from
one without gaps, the chain from the first line and the fold, naming the
first bad line. It is ``stream.LineCheck``, the one piece of code that holds
those rules, which the reader also runs.

``audit`` is the audit of a log file: the reader run over the whole log,
ignoring the checkpoint (the same core, in blocks of the file's bytes, plus
the witness and the torn tail), reporting instead of raising; then the
checkpoint is examined as a reader would, and the fold from it is compared
with the full replay.
"""

from __future__ import annotations

import os

from ....core import fold
from ....core.errors import UnknownOrder
from ....core.records import dataclass, field
from . import checkpoint, reader, stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class Problem:
    """What is wrong, at ``line`` (0 when no one line is at fault), starting
    at byte ``offset``."""

    what: str
    line: int = 0
    offset: int = 0


@dataclass
class Audit:
    """What ``verify`` found. ``sound`` means every command can replay the
    log and the checkpoint (if readers would use it) agrees with it."""

    log: str
    lines: int = 0
    length: int = 0
    problem: Problem | None = None
    checkpoint: str = "absent"  # absent, agrees, ignored, disagrees
    checkpoint_line: int = 0
    checkpoint_why: str | None = None
    lane: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)
    #: the whole lane state the lines fold to, and the chain digest of the last line
    state: fold.LaneState = fold.EMPTY
    digest: str | None = None

    @property
    def sound(self) -> bool:
        return self.problem is None

    def to_json(self) -> dict[str, Any]:
        p = self.problem
        return {
            "log": self.log, "sound": self.sound, "lines": self.lines, "bytes": self.length,
            "problem": None if p is None else {"line": p.line, "offset": p.offset, "what": p.what},
            "checkpoint": {"state": self.checkpoint, "line": self.checkpoint_line or None, "why": self.checkpoint_why},
            "lane": list(self.lane), "named": list(self.named), "warnings": self.warnings,
        }


def check_lines(lines: Iterable[bytes], log: str = "", progress: Callable[[int], None] | None = None) -> Audit:
    """Audit a stream of log lines, oldest first: ``lines`` yields each
    line's bytes as stored, newline included (for a table, its rows ordered
    by ``seq``). Checks every line's framing and schema, ``seq`` from 1
    without gaps, the chain from the first line (``prev`` null, then the
    digest of the line before) and folds them, reading each line once and
    keeping memory flat in the number of lines. ``log`` names the stream in
    the result; ``progress`` is told the bytes checked now and then.

    Never raises for damage: the first bad line is ``problem`` (its number,
    the byte offset it would start at in a file of these lines, and what is
    wrong, in the words ``verify`` uses for a file), and nothing else is
    filled in, as ``audit`` does. A sound stream fills in ``lines``,
    ``length`` (bytes), ``lane``, ``named``, ``state`` (the whole folded
    state, to compare with a cache of it) and ``digest`` (the last line's,
    to compare with a witness of it). A line that is not one line ending in
    a newline is malformed. What a file has besides its lines (witness, torn
    tail, checkpoint) is for the caller to check."""
    out = Audit(log)
    check = stream.LineCheck(bulk=True)
    batch: list[bytes] = []
    size = 0
    try:
        for line in lines:
            if type(line) is not bytes:
                line = bytes(line)  # a bytearray or memoryview from a driver
            batch.append(line)
            size += len(line)
            if size >= stream.BLOCK:
                check.lines(batch)
                batch, size = [], 0
                if progress is not None:
                    progress(check.offset)
        check.lines(batch)
    except stream.Bad as exc:
        out.problem = Problem(exc.what, exc.line, exc.offset)
        return out
    out.lines, out.length, out.digest = check.seq, check.offset, check.digest
    out.state = check.state()
    out.lane, out.named = out.state.lane, out.state.named
    if progress is not None:
        progress(check.offset)
    return out


def audit(log_path: str, progress: Callable[[int], None] | None = None) -> Audit:
    """Audit the log at ``log_path``; ``progress`` is told the byte offset
    reached now and then. Never raises for damage: it is reported. A writer
    that appends while the audit compares the checkpoint with the replay
    makes it audit again (three times at most, then it says so)."""
    for _ in range(3):
        out, raced = _audit_once(log_path, progress)
        if not raced:
            return out
    out.warnings.append("the log kept growing during the audit, so the checkpoint was not compared "
                        "with the replay; run verify again when writers are quiet")
    return out


def _audit_once(log_path: str, progress: Callable[[int], None] | None) -> tuple[Audit, bool]:
    """One audit, and whether a writer appended between its two reads."""
    out = Audit(log_path)
    try:
        whole = reader.read(log_path, use_checkpoint=False, progress=progress, quick=True)
    except reader.Damage as exc:  # every damage the reader finds is a Damage
        out.problem = Problem(exc.what, exc.line, exc.offset)
        return out, False
    out.lines, out.length, out.warnings = whole.seq, whole.length, list(whole.warnings)
    out.lane, out.named, out.state, out.digest = whole.state.lane, whole.state.named, whole.state, whole.digest
    if whole.fresh:
        out.warnings.append("the storm has recorded nothing yet: there is no log and no witness")
        return out, False
    if not whole.log_exists:
        return out, False
    return out, _audit_checkpoint(log_path, whole, out)


def _audit_checkpoint(log_path: str, whole: reader.LogRead, out: Audit) -> bool:
    """Would a reader use the checkpoint, and does its fold agree with the
    full replay? One that readers use and that disagrees makes the log
    unsound. True when the log grew since ``whole`` was read: not compared."""
    fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        cp, why = checkpoint.examine(log_path, fd, whole.witness)  # type: ignore[arg-type]
    finally:
        os.close(fd)
    if cp is None:
        if why is not None:
            out.checkpoint, out.checkpoint_why = "ignored", why
            out.warnings.append(f"the checkpoint {checkpoint.checkpoint_path(log_path)} is ignored: {why}; "
                                "commands replay the whole log until a writer replaces it")
        return False
    out.checkpoint_line = cp.seq
    try:
        fast = reader.read(log_path)
    except UnknownOrder as exc:  # the log changed under the audit
        out.problem = Problem(f"the log cannot be read from its checkpoint: {exc}", cp.seq, cp.offset)
        return False
    if fast.seq != whole.seq:
        return True
    if fast.state != whole.state:
        out.checkpoint = "disagrees"
        out.problem = Problem(
            f"the checkpoint {checkpoint.checkpoint_path(log_path)} at line {cp.seq} folds to another lane "
            "than the whole log does, and commands trust it; delete that file (it is only a cache)",
            cp.seq, cp.offset)
        return False
    out.checkpoint = "agrees"
    return False

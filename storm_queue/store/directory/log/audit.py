"""The full audit of a priority log, for ``storm-queue verify``.

Its core, ``core.verify.check_lines``, audits a stream of lines wherever
they are kept.

``audit`` is the audit of a log file: the reader run over the whole log,
ignoring the checkpoint (the same core, in blocks of the file's bytes, plus
the witness and the torn tail), reporting instead of raising; then the
checkpoint is examined as a reader would, and the fold from it is compared
with the full replay.
"""

from __future__ import annotations

import os

from ....core import logread
from ....core.errors import UnknownOrder
from ....core.verify import Audit, Problem, changed_line
from ..fsutil import open_file
from . import checkpoint, reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


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
    except logread.Damage as exc:  # every damage the reader finds is a Damage
        out.problem = changed_line(Problem(exc.what, exc.line, exc.offset), _line_before(log_path, exc.offset))
        return out, False
    out.lines, out.length, out.warnings = whole.seq, whole.length, list(whole.warnings)
    out.lane, out.named, out.state, out.digest = whole.state.lane, whole.state.named, whole.state, whole.digest
    if whole.fresh:
        out.warnings.append("the storm has recorded nothing yet: there is no log and no witness")
        return out, False
    if not whole.log_exists:
        return out, False
    return out, _audit_checkpoint(log_path, whole, out)


def _line_before(log_path: str, offset: int | None) -> bytes:
    """The whole line of the log that ends at byte ``offset`` (b"" when there is none)."""
    if not offset:
        return b""
    try:
        with os.fdopen(open_file(log_path), "rb") as f:
            start, chunk = offset, b""
            while start > 0 and b"\n" not in chunk[:-1]:
                step = min(start, 1 << 16)
                f.seek(start - step)
                chunk, start = f.read(step) + chunk, start - step
    except OSError:
        return b""
    return chunk[chunk.rfind(b"\n", 0, len(chunk) - 1) + 1:]


def _audit_checkpoint(log_path: str, whole: logread.LogRead, out: Audit) -> bool:
    """Would a reader use the checkpoint, and does its fold agree with the
    full replay? One that readers use and that disagrees makes the log
    unsound. True when the log grew since ``whole`` was read: not compared."""
    fd = open_file(log_path)
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

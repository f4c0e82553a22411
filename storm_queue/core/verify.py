"""The audit of a stream of log lines, wherever they are kept (a file, a
database table): every line's framing and schema, ``seq`` from one without
gaps, the chain from the first line and the fold, naming the first bad
line. It runs ``stream.LineCheck``, the one piece of code that holds those
rules, which the directory's reader also runs."""

from __future__ import annotations

from . import fold, logread, stream
from .records import dataclass, field

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
    #: what a sound log agrees with, in words: a directory's log is checked against its witness; a
    #: database's lines are rows, with no witness, and its folded state is a state row, not a checkpoint
    agree: str = "framing, schema, chain, seq and witness agree"
    kept: str = "checkpoint"
    #: what the operator does about an unsound log, in the store's words: a directory's log is reset
    #: (or, the earlier tool's, adopted: ``logread.ADOPT_HINT``); a database's is restored from its backup
    remedy: str = logread.RESET_HINT

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


def changed_line(problem: Problem, before: bytes) -> Problem:
    """The first wrong line of a chain that breaks at line M (its ``prev``
    is not the digest of line M - 1): line M - 1, whose content no longer
    matches the digest that line M recorded of it. ``before`` ends where
    line M starts and holds line M - 1 whole. Any other problem is as it was."""
    m = problem.line
    if not (m and m > 1 and problem.what.startswith(f"line {m} breaks the chain")) or not before.endswith(b"\n"):
        return problem
    start = before.rfind(b"\n", 0, len(before) - 1) + 1
    return Problem(f"line {m - 1} was changed: its content no longer matches the digest line {m} chains to "
                   f"(line {m}'s prev)", m - 1, problem.offset - (len(before) - start))


def check_lines(lines: Iterable[bytes], log: str = "", progress: Callable[[int], None] | None = None) -> Audit:
    """Audit a stream of log lines, oldest first: ``lines`` yields each
    line's bytes as stored, newline included (for a table, its rows ordered
    by ``seq``). Checks every line's framing and schema, ``seq`` from 1
    without gaps, the chain from the first line (``prev`` null, then the
    digest of the line before) and folds them, reading each line once and
    keeping memory flat in the number of lines. ``log`` names the stream in
    the result; ``progress`` is told the bytes checked now and then.

    Never raises for damage: the first bad line is ``problem`` (its number,
    and for a broken chain the line whose content changed: ``changed_line``;
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
    size, first, last = 0, 1, b""  # the first line of the batch, and the line before it
    try:
        for line in lines:
            if type(line) is not bytes:
                line = bytes(line)  # a bytearray or memoryview from a driver
            batch.append(line)
            size += len(line)
            if size >= stream.BLOCK:
                check.lines(batch)
                first, last, batch, size = first + len(batch), batch[-1], [], 0
                if progress is not None:
                    progress(check.offset)
        check.lines(batch)
    except stream.Bad as exc:
        before = ([last] + batch)[exc.line - first] if exc.line and exc.line - first < len(batch) + 1 else b""
        out.problem = changed_line(Problem(exc.what, exc.line, exc.offset), before)
        return out
    out.lines, out.length, out.digest = check.seq, check.offset, check.digest
    out.state = check.state()
    out.lane, out.named = out.state.lane, out.state.named
    if progress is not None:
        progress(check.offset)
    return out

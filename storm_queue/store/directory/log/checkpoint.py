"""The checkpoint: a cache beside the log, ``.<log name>.checkpoint``, that
holds the lane state folded up to a byte offset, with the ``seq`` and chain
digest of the line that ends there, so that a command folds only the lines
written since.

A reader uses it only when it still describes this log: it is a regular
file owned by the log's owner and writable by no one else, written by this
version of storm-queue, its offset is within the witnessed length and the
log, and the one line ending exactly at that offset (read by seeking back
from the offset, never by scanning the file) has the recorded digest and
``seq``. Anything else is ignored and the log is replayed from its first
line: deleting the checkpoint changes nothing but speed. Damage to lines
before a valid checkpoint is found by ``storm-queue verify``, which always
replays the whole log.

Writers refresh it under the lock once ``EVERY`` lines have been appended
since the checkpoint their read started from, so a reader folds at most
about that many lines, and a writer pays for one more atomic replace once
in ``EVERY`` requests.
"""

from __future__ import annotations

import os
import stat

from .... import __version__
from ....core import fold
from ....core.framing import Malformed, decode, digest
from ....core.jsoncodec import COMPACT, dumps, loads
from ....core.records import dataclass
from ....core.statebody import FORMAT, Table, from_json, records, unsound
from ..fsutil import beside, replace_atomically

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ....core.logread import LogRead, Witness

#: lines appended after the checkpoint before a writer writes a new one
EVERY = 32
#: a checkpoint larger than this is not read (a lane of a million slugs fits)
MAX_BYTES = 256 << 20
#: the longest line a checkpoint may end on; a longer one is not looked for
MAX_LINE = 1 << 20


def checkpoint_path(log_path: str) -> str:
    """Where the checkpoint of ``log_path`` lives: ``.<log name>.checkpoint`` beside it."""
    return beside(log_path, "checkpoint")


@dataclass(frozen=True)
class Checkpoint:
    """The lane ``state`` folded from the log's first ``offset`` bytes, whose
    last line has ``seq`` and chain ``digest``."""

    offset: int
    seq: int
    digest: str
    state: fold.LaneState


def encode(log_path: str, cp: Checkpoint) -> bytes:
    """The checkpoint file's bytes."""
    table = Table()
    state = table.ref(cp.state)
    body = {"v": FORMAT, "storm_queue": __version__, "log": os.path.basename(log_path),
            "offset": cp.offset, "seq": cp.seq, "digest": cp.digest, "state": state, "records": table.rows}
    return (dumps(body, separators=COMPACT) + "\n").encode("ascii")


def parse(log_path: str, raw: bytes) -> Checkpoint:
    """The checkpoint in ``raw``; ``ValueError`` saying why it is not one."""
    try:
        body = loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("it is not JSON") from None
    if not isinstance(body, dict) or body.get("v") != FORMAT:
        raise ValueError("it is not a checkpoint of this format")
    if body.get("storm_queue") != __version__:
        raise ValueError(f"it was written by storm-queue {body.get('storm_queue')!r}, not {__version__}")
    if body.get("log") != os.path.basename(log_path):
        raise ValueError(f"it is for {body.get('log')!r}, not this log")
    offset, seq, dig = body.get("offset"), body.get("seq"), body.get("digest")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (offset, seq)):
        raise ValueError("its offset or seq is not a positive number")
    if not (isinstance(dig, str) and len(dig) == 64):
        raise ValueError("its digest is not a SHA-256 digest")
    try:
        state = from_json(body.get("state"), records(body.get("records")))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"its state cannot be read ({exc})") from None
    if not isinstance(state, fold.LaneState):
        raise ValueError("its state is not a lane state")
    why = unsound(state)
    if why:
        raise ValueError(f"its state {why}")
    return Checkpoint(offset, seq, dig, state)


# -- reading and checking it against the log --------------------------------


def line_ending_at(fd: int, offset: int) -> bytes | None:
    """The whole line of the file ``fd`` that ends exactly at ``offset``
    (newline included), found by reading backwards from ``offset``; None
    when no line ends there or it is longer than ``MAX_LINE``."""
    if offset <= 0 or os.pread(fd, 1, offset - 1) != b"\n":
        return None
    parts: list[bytes] = []
    end = offset - 1  # the line's own newline is not searched
    while end > 0 and offset - end <= MAX_LINE:
        start = max(0, end - 8192)
        chunk = os.pread(fd, end - start, start)
        if len(chunk) != end - start:
            return None
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            parts.append(chunk[cut + 1:])
            break
        parts.append(chunk)
        end = start
    else:
        if end > 0:
            return None  # too long
    return b"".join(reversed(parts)) + b"\n"


def load(log_path: str) -> tuple[Checkpoint | None, str | None, int]:
    """Read the checkpoint file: the checkpoint, or None and why not (None
    when there is none), and the file's owner. A reader loads it before it
    reads the witness: writers replace the witness first, so a checkpoint
    loaded earlier never lies past a witness read later."""
    path = checkpoint_path(log_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None, -1
    except OSError as exc:
        return None, f"it cannot be opened ({exc.strerror})", -1
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a regular file", -1
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None, "it is writable by others than its owner, so anyone could have written it", -1
        if st.st_size > MAX_BYTES:
            return None, f"it is larger than {MAX_BYTES} bytes", -1
        raw = b""
        while len(raw) < st.st_size:
            more = os.read(fd, st.st_size - len(raw))
            if not more:
                break
            raw += more
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror})", -1
    finally:
        os.close(fd)
    try:
        return parse(log_path, raw), None, st.st_uid
    except ValueError as exc:
        return None, str(exc), -1


def check(cp: Checkpoint, owner: int, log_fd: int, witness: Witness) -> str | None:
    """Why the loaded checkpoint ``cp`` (its file owned by ``owner``) does
    not describe the log open as ``log_fd`` with ``witness``; None when it does."""
    try:
        log_st = os.fstat(log_fd)
    except OSError as exc:
        return f"the log cannot be read ({exc.strerror})"
    if owner != log_st.st_uid:
        return "it is not owned by the log's owner, so anyone could have written it"
    if cp.offset > witness.length:
        return f"its offset {cp.offset} is past the witnessed length {witness.length}"
    if cp.offset > log_st.st_size:
        return f"its offset {cp.offset} is past the end of the log"
    if cp.offset == witness.length and (cp.seq, cp.digest) != (witness.seq, witness.digest):
        return "it ends where the witness does, on another line"
    try:
        line = line_ending_at(log_fd, cp.offset)
    except OSError as exc:
        return f"the log cannot be read at its offset ({exc.strerror})"
    if line is None:
        return f"no line of the log ends at its offset {cp.offset}"
    if digest(line) != cp.digest:
        return f"the line ending at its offset {cp.offset} has another digest"
    try:
        seq = decode(line)["seq"]
    except Malformed as exc:
        return f"the line ending at its offset {cp.offset} is malformed: {exc}"
    if seq != cp.seq:
        return f"the line ending at its offset has seq {seq}, not {cp.seq}"
    return None


def examine(log_path: str, log_fd: int, witness: Witness) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint of the log open as ``log_fd``, if it still describes
    it; else None and why not (None when there is no checkpoint)."""
    cp, why, owner = load(log_path)
    if cp is None:
        return None, why
    why = check(cp, owner, log_fd, witness)
    return (None, why) if why else (cp, None)


# -- writing it -----------------------------------------------------------


def save(log_path: str, cp: Checkpoint, owner: tuple[int, int] | None = None) -> None:
    """Replace the checkpoint atomically (temp, fsync, rename, directory fsync)."""
    replace_atomically(checkpoint_path(log_path), encode(log_path, cp), owner)


def refresh(log: LogRead, events: list[dict[str, Any]], length: int, last_digest: str,
            owner: tuple[int, int] | None = None) -> bool:
    """After an append of ``events`` to what ``log`` read (under the lock,
    once the witness is replaced), write a new checkpoint at ``length`` when
    ``EVERY`` lines have been appended since the checkpoint the read started
    from. A failure to write it is no failure of the append: it is a cache,
    and the next writer tries again. Returns whether it was written."""
    seq = events[-1]["seq"]
    if seq - log.checkpoint_seq < EVERY:
        return False
    try:
        save(log.path, Checkpoint(length, seq, last_digest, fold.replay(events, log.state)), owner)
    except OSError:
        return False
    return True

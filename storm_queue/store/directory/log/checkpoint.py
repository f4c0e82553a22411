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
from ..fsutil import beside, replace_atomically
from ....core.jsoncodec import COMPACT, dumps, loads
from ....core.records import dataclass, fields, is_record
from ....core.framing import Malformed, decode, digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .found import LogRead, Witness

FORMAT = 4  # 3: the lane state gained waivers and touched; 4: halt and Run.unparked (issue 12)
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


# -- the state as JSON, generically from the record fields ------------------
#
# Every record (the lane state, its marks, any record a later fold adds) is
# kept once in a table, in the order they were met (so a record refers only
# to earlier ones), and referred to as {"@ref": i}: the many slugs one
# request moved share one mark, and a lane of 100,000 slugs stays small.


class _Table:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.seen: dict[Any, int] = {}
        self.by_id: dict[int, int] = {}  # a record met before, by identity: no need to hash it again
        self.kept: list[Any] = []  # the records by_id names, kept alive so that no id is reused

    def ref(self, record: Any) -> dict[str, int]:
        index = self.by_id.get(id(record))
        if index is None:
            try:
                key: Any = (type(record), record)
                hash(key)
            except TypeError:  # a record holding a mapping is kept by identity
                key = id(record)
            index = self.seen.get(key)
            if index is None:
                if getattr(fold, type(record).__name__, None) is not type(record):
                    raise TypeError(f"{type(record).__name__} is not a record of the fold")
                value = self.value
                row = {"@": type(record).__name__, **{name: value(getattr(record, name)) for name in fields(record)}}
                self.rows.append(row)
                index = self.seen[key] = len(self.rows) - 1
            self.by_id[id(record)] = index
            self.kept.append(record)
        return {"@ref": index}

    def value(self, value: Any) -> Any:
        if value is None or type(value) in _PLAIN:
            return value
        if is_record(value):
            return self.ref(value)
        if isinstance(value, (tuple, list)):
            return [self.value(v) for v in value]
        if isinstance(value, (set, frozenset)):
            return {"@set": sorted(self.value(v) for v in value)}
        if hasattr(value, "items"):
            return {"@map": {str(k): self.value(v) for k, v in value.items()}}
        if isinstance(value, (str, int, bool)):
            return value
        raise TypeError(f"cannot keep a {type(value).__name__} in a checkpoint")


_PLAIN = frozenset((str, int, bool))


def _from_json(value: Any, made: list[Any]) -> Any:
    if isinstance(value, list):
        return tuple(_from_json(v, made) for v in value)
    if isinstance(value, dict):
        if set(value) == {"@ref"} and isinstance(value["@ref"], int) and 0 <= value["@ref"] < len(made):
            return made[value["@ref"]]
        if set(value) == {"@map"} and isinstance(value["@map"], dict):
            return {k: _from_json(v, made) for k, v in value["@map"].items()}
        if set(value) == {"@set"} and isinstance(value["@set"], list):
            return frozenset(_from_json(v, made) for v in value["@set"])
        raise ValueError("a value is neither a reference, a mapping nor a set")
    return value


def _records(rows: Any) -> list[Any]:
    """The records of the table, each made from its fields."""
    if not isinstance(rows, list):
        raise ValueError("there is no table of records")
    made: list[Any] = []
    for row in rows:
        cls = getattr(fold, str(row.get("@")), None) if isinstance(row, dict) else None
        if not (isinstance(cls, type) and hasattr(cls, "__record_fields__")):
            raise ValueError(f"unknown record {row.get('@') if isinstance(row, dict) else row!r}")
        names = fields(cls)
        if set(row) != {"@", *names}:
            raise ValueError(f"the fields of {cls.__name__} differ")
        made.append(cls(**{name: _from_json(row[name], made) for name in names}))
    return made


def dump_state(state: fold.LaneState) -> str:
    """A lane state as the JSON text a database storm keeps in its state row."""
    table = _Table()
    ref = table.ref(state)
    return dumps({"v": FORMAT, "state": ref, "records": table.rows}, separators=COMPACT)


def load_state(raw: str) -> fold.LaneState:
    """The lane state ``dump_state`` made; ``ValueError`` saying why not."""
    try:
        body = loads(raw)
        if not isinstance(body, dict) or body.get("v") != FORMAT:
            raise ValueError("it is not a state of this format")
        state = _from_json(body.get("state"), _records(body.get("records")))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"the state cannot be read ({exc})") from None
    why = "is not a lane state" if not isinstance(state, fold.LaneState) else _unsound(state)
    if why:
        raise ValueError(f"the state {why}")
    return state


def encode(log_path: str, cp: Checkpoint) -> bytes:
    """The checkpoint file's bytes."""
    table = _Table()
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
        state = _from_json(body.get("state"), _records(body.get("records")))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"its state cannot be read ({exc})") from None
    if not isinstance(state, fold.LaneState):
        raise ValueError("its state is not a lane state")
    why = _unsound(state)
    if why:
        raise ValueError(f"its state {why}")
    return Checkpoint(offset, seq, dig, state)


def _unsound(state: fold.LaneState) -> str:
    """What makes a parsed lane state one the fold could not have made
    (names enter the lane only as names, as they do from the log), or ''."""
    from ....core.names import is_name

    if not (isinstance(state.lane, tuple) and isinstance(state.named, tuple) and isinstance(state.marks, dict)):
        return "has the wrong shape"
    if not all(isinstance(s, str) and is_name(s) for s in state.lane + state.named + tuple(state.marks)):
        return "holds a slug that is not a name"
    for mark in state.marks.values():
        if not (isinstance(mark, fold.Mark) and type(mark.seq) is int and isinstance(mark.slug, str)
                and is_name(mark.slug) and all(isinstance(v, str) for v in (mark.at, mark.by, mark.action))
                and (mark.reason is None or isinstance(mark.reason, str))):
            return "holds a mark the fold could not have made"
    if not (isinstance(state.runs, dict) and isinstance(state.keys, dict) and isinstance(state.keys_day, str)
            and type(state.token_floor) is int and isinstance(state.moved_to, str) and _sound_act(state.halt)):
        return "has the wrong shape"
    for slug, run in state.runs.items():
        if not (is_name(slug) and _sound_run(run)):
            return "holds a run the fold could not have made"
    if not (isinstance(state.waivers, dict) and isinstance(state.touched, dict)):
        return "has the wrong shape"
    for slug, deps in state.waivers.items():
        if not (is_name(slug) and isinstance(deps, dict) and all(
                is_name(dep) and isinstance(w, fold.Waiver) and type(w.seq) is int and isinstance(w.at, str)
                and isinstance(w.by, str) and (w.reason is None or isinstance(w.reason, str)) for dep, w in deps.items())):
            return "holds a waiver the fold could not have made"
    if not all(is_name(slug) and isinstance(at, str) for slug, at in state.touched.items()):
        return "holds a time the fold could not have made"
    for by, keys in state.keys.items():
        if not (isinstance(keys, dict) and all(
                isinstance(k, fold.Keyed) and type(k.seq) is int and isinstance(k.fingerprint, str)
                and isinstance(k.event, dict) and isinstance(name, str) for name, k in keys.items())):
            return "holds a key the fold could not have made"
    return ""


def _sound_act(act: object) -> bool:
    """True when ``act`` is None or has the types the fold gives an ``Act``."""
    return act is None or (isinstance(act, fold.Act) and type(act.seq) is int and isinstance(act.at, str)
                           and isinstance(act.by, str) and (act.reason is None or isinstance(act.reason, str)))


def _sound_run(run: object) -> bool:
    """True when ``run`` has the types the fold gives a ``Run``."""
    def text(*values: object, empty: bool = False) -> bool:
        return all(isinstance(v, str) or (empty and v is None) for v in values)

    if not (isinstance(run, fold.Run) and type(run.token) is int and type(run.attempts) is int
            and text(run.quarantined, run.not_before, empty=True) and isinstance(run.history, tuple)
            and _sound_act(run.unparked)):
        return False
    lease = run.lease
    if lease is not None and not (isinstance(lease, fold.Lease) and type(lease.token) is int and type(lease.ttl) is int
                                  and text(lease.holder, lease.by, lease.claimed, lease.expires)):
        return False
    return all(isinstance(a, fold.Attempt) and type(a.token) is int and text(a.holder, a.at)
               and text(a.end, a.ended, a.note, empty=True) for a in run.history)


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

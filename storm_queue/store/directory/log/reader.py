"""Reading the priority log: the chain checked line by line, the witness
compared, a torn tail told apart from damage, the lane folded on the way.

Damage raises ``UnknownOrder``: the order is then unknown, never guessed.
"""

from __future__ import annotations

import os

from ....core import fold
from ....core.framing import decode, digest  # noqa: F401 -- the rules of one line, where callers look for them
from ....core.jsoncodec import loads
from ....core.logread import ADOPT_HINT, OLD_FORMAT, Damage, LogRead, Witness
from ....core.stream import BLOCK, Bad, LineCheck
from . import checkpoint
from ..fsutil import open_file
from .found import witness_path  # noqa: F401 -- where callers look for it

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


#: the most bytes an adopt's one line is read to (its lane: some 150 bytes a lane)
ONE_LINE = 64 << 20

#: ``progress`` is told the offset reached at most once per this many bytes read
TELL = 1 << 20
#: a read of more bytes than this takes the quick path (see ``stream``) ...
QUICK = 64 << 10
#: ... and, of more than this, the SHA-256 fastest for many lines
BULK = 4 << 20


def _damage(log_path: str, what: str, line: int = 0, offset: int = 0) -> Damage:
    return Damage(log_path, what, line, offset)


def _open_nofollow(path: str):
    return os.fdopen(open_file(path), "rb")


def _walk(f: Any, lines: LineCheck, witness: Witness, progress: Callable[[int], None] | None) -> bytes:
    """Give ``lines`` the whole lines of ``f`` from where it stands, in blocks,
    comparing the line that ends at the witnessed length (or holds it) with
    the witness once its own checks pass; return the bytes after the last
    whole line (a torn tail, or nothing)."""
    length = witness.length
    met = length <= lines.offset
    rest: list[bytes] = []  # the bytes read after the last newline, in the pieces read (a long line is joined once)
    told = lines.offset
    while True:
        block = f.read(BLOCK)
        if not block:
            return b"".join(rest)
        cut = block.rfind(b"\n") + 1
        if not cut:
            rest.append(block)
            continue
        whole = block[:cut] if cut < len(block) else block
        if rest:
            rest.append(whole)
            whole = b"".join(rest)
        rest = [block[cut:]] if cut < len(block) else []
        cut = len(whole)
        if not met and lines.offset + cut >= length:  # the witnessed length ends or falls inside a line here
            at = length - lines.offset
            start = whole.rfind(b"\n", 0, at - 1) + 1
            end = whole.index(b"\n", at - 1) + 1
            lines.block(whole[:start])
            line = whole[start:end]
            event = lines.line(line)
            number, begins = lines.seq, lines.offset - len(line)
            if end != at:
                raise Bad(f"the witnessed length {length} falls inside line {number}", number, begins)
            if (lines.seq, lines.digest) != (witness.seq, witness.digest):
                raise Bad(f"line {number} is not the line its witness recorded", number, begins)
            met = True
            lines.tell(line, event)
            whole = whole[end:]
        lines.block(whole)
        if progress is not None and lines.offset >= told + TELL:
            told = lines.offset
            progress(told)


def chain(f: Any, lines: LineCheck) -> bytes:
    """Give ``lines`` the whole lines of ``f`` from where it stands, as a read
    does but with no witness to compare (``Bad`` at the first line that
    fails); return the bytes after the last whole line."""
    return _walk(f, lines, Witness("", 0, 0, None, ""), None)


def open_log(path: str) -> Any:
    """``path`` opened to read bytes, never through a link."""
    return _open_nofollow(path)


def read_witness(log_path: str) -> Witness | None:
    """The witness, ``None`` when it does not exist; ``UnknownOrder`` when it
    cannot be read or is not a witness."""
    path = witness_path(log_path)
    try:
        with _open_nofollow(path) as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _damage(log_path, f"the witness {path} cannot be read ({exc.strerror})") from None
    try:
        data = loads(raw)
        w = Witness(data["log"], data["length"], data["seq"], data["digest"], data["at"])
        ok = (
            isinstance(w.log, str)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (w.length, w.seq))
            and (w.digest is None or isinstance(w.digest, str))
            and isinstance(w.at, str)
        )
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise _damage(log_path, f"the witness {path} is not a witness")
    return w


def read(log_path: str, keep_events: bool = False, use_checkpoint: bool = True,
         progress: Callable[[int], None] | None = None,
         each: Callable[[bytes, dict[str, Any]], None] | None = None, quick: bool = False) -> LogRead:
    """Read, check and fold the log at ``log_path``: from its checkpoint when
    one still describes the log (``use_checkpoint``), else from the first
    line. A read that meets a write in progress (a line not yet whole, not
    yet witnessed, or a repair cutting a torn tail) looks again once, so that
    readers racing a writer neither warn nor fail for nothing. ``progress`` is told the byte offset now and then.
    Raises ``Damage`` (an ``UnknownOrder``) naming the first bad line.

    ``each``, when given, is called with every checked line that the read
    folds (its bytes as stored) and its event, in order, as the read goes
    (pass ``use_checkpoint=False`` to see them all): a line reaches it only
    once it has passed every check, so on damage it has seen exactly the
    lines before it. A read with ``each`` does not look again.

    ``quick`` takes the quick path of ``stream.LineCheck`` whatever the
    length to read (a read of more than ``QUICK`` bytes always does); the
    answer is the same either way."""
    try:
        if each is not None:
            return _read_once(log_path, keep_events, use_checkpoint, progress, each, quick)
        try:
            out = _read_once(log_path, keep_events, use_checkpoint, progress, None, quick)
        except Damage:  # a writer may have cut a torn tail or made the first line under us
            return _read_once(log_path, keep_events, use_checkpoint, progress, None, quick)
        if out.torn or out.seq != (out.witness.seq if out.witness else 0):
            out = _read_once(log_path, keep_events, use_checkpoint, progress, None, quick)
        return out
    except Damage as damage:
        return _adopting(log_path, damage, keep_events, each)


def _adopting(log_path: str, damage: Damage, keep_events: bool,
              each: Callable[[bytes, dict[str, Any]], None] | None) -> LogRead:
    """What a read that met ``damage`` finds when an adoption explains it.
    The earlier tool's log: ``damage`` again, naming ``storm-queue adopt``
    as the way on. An adopt stopped between its commit and its witness (see
    ``ops.adopt``): the log, which is then exactly one ``adopt`` line whose
    kept file has the sha256 and length it records, with a warning; the next
    writer witnesses it. Anything else: ``damage`` itself."""
    from .adopted import HEAD, looks_old, unwitnessed

    try:
        with _open_nofollow(log_path) as f:
            data = f.read(HEAD)
            whole = data + f.read(ONE_LINE) if data.count(b"\n") <= 1 else None
    except OSError:
        data, whole = b"", None
    try:
        with _open_nofollow(witness_path(log_path)) as f:
            witness = f.read(HEAD)
    except OSError:
        witness = None
    if looks_old(data, witness):
        raise Damage(log_path, OLD_FORMAT, 1, 0, ADOPT_HINT) from None
    found = unwitnessed(whole, witness, lambda name: _kept(log_path, name)) if whole else None
    if found is None:
        raise damage
    if each is not None:
        each(whole, found)
    out = LogRead(log_path, fold.replay([found]), 1, digest(whole), len(whole),
                  log_exists=True, events=[found] if keep_events else None)
    out.warnings.append("the log was adopted but its witness was not yet written (an adopt was stopped); "
                        "the next request writes it")
    return out


def _kept(log_path: str, name: str) -> bytes | None:
    """The bytes of the file ``name`` beside the log (None: it cannot be read)."""
    try:
        with _open_nofollow(os.path.join(os.path.dirname(log_path) or ".", name)) as f:
            return f.read()
    except OSError:
        return None


def _read_once(log_path: str, keep_events: bool, use_checkpoint: bool,
               progress: Callable[[int], None] | None,
               each: Callable[[bytes, dict[str, Any]], None] | None, quick: bool = False) -> LogRead:
    out = LogRead(log_path, events=[] if keep_events else None)
    loaded = checkpoint.load(log_path) if use_checkpoint else (None, None, -1)  # before the witness: see load
    witness = read_witness(log_path)
    out.witness = witness
    try:
        f = _open_nofollow(log_path)
    except FileNotFoundError:
        if witness is None:
            out.fresh = True
            return out
        if witness.length:
            raise _damage(log_path, f"the log is missing, but its witness says it held {witness.length} bytes")
        return out
    except OSError as exc:
        raise _damage(log_path, f"the log cannot be read ({exc.strerror})") from None
    out.log_exists = True
    if witness is None:
        f.close()
        raise _damage(log_path, f"the witness {witness_path(log_path)} is missing, so the log cannot be checked")
    if witness.log != os.path.basename(log_path):
        f.close()
        raise _damage(log_path, f"the witness is for {witness.log!r}, not this log")
    state = fold.EMPTY
    offset, seq, prev = 0, 0, None
    with f:
        start = loaded[0]
        if start is not None and checkpoint.check(start, loaded[2], f.fileno(), witness) is not None:
            start = None
        if start is not None:
            state, offset, seq, prev = start.state, start.offset, start.seq, start.digest
            out.checkpoint_seq = seq
            f.seek(offset)
        try:
            left = os.fstat(f.fileno()).st_size - offset
        except OSError:
            left = 0
        lines = LineCheck(state, seq, prev, offset, keep_events=keep_events, each=each,
                          quick=quick or left > QUICK, bulk=left > BULK)
        try:
            tail = _walk(f, lines, witness, progress)
        except Bad as exc:
            raise _damage(log_path, exc.what, exc.line, exc.offset) from None
        offset, seq, prev = lines.offset, lines.seq, lines.digest
        if tail and offset >= witness.length:
            out.torn = len(tail)
            out.warnings.append(
                f"the log ends in a torn write of {len(tail)} bytes after line {seq} "
                "(never acknowledged); it is ignored, and the next request keeps it "
                "in a side file and records a repair"
            )
        met_witness = witness.length <= offset
        if lines.events is not None:
            out.events = lines.events
    if offset + out.torn < witness.length:
        held = offset + len(tail or b"")
        whole = f" ({offset} of them in whole lines)" if held > offset else ""
        raise _damage(log_path, f"the log holds {held} bytes{whole}, shorter than the {witness.length} its witness "
                      "recorded", seq + 1, offset)
    if not met_witness:
        raise _damage(log_path, f"the witnessed length {witness.length} is not at the end of a line", seq + 1, offset)
    if offset > witness.length:
        out.warnings.append(
            f"the log has {seq - witness.seq} whole line(s) after its witness (a write "
            "stopped before it was acknowledged); they chain correctly and count, "
            "and the next request re-witnesses them"
        )
    out.state, out.seq, out.digest, out.length = lines.state(), seq, prev, offset
    if progress is not None:
        progress(offset)
    return out

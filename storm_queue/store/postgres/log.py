"""Reading a database storm's whole log: every line by seq from one
snapshot, checked as a directory log's reader checks it (``history``,
``verify``), for ``store.Database`` (``session.Session``)."""

from __future__ import annotations

from ...core import fold, logread
from ...core.framing import Malformed, decode, digest
from ...core.statebody import load_state
from .connect import _Known
from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

    from .session import Session


def _lines(store: Session, head: list | None = None) -> Iterator[tuple[int, bytes]]:
    """Every log line, by seq, streamed from one snapshot (and the log's
    head in it, the state row's seq and digest, appended to ``head``)."""
    with store._errors(), store.conn.transaction():
        store.conn.execute(q("read_only_snapshot"))
        if head is not None:
            head.append(store.conn.execute(q("read_head")).fetchone()[:2])
        for seq, line in store.conn.rows(q("all_lines")):  # (binary: seq an int8's bytes)
            yield int.from_bytes(seq, "big", signed=True), line


def history(store: Session, each: Callable[[bytes, dict[str, Any]], None]) -> logread.LogRead:
    """Every line, oldest first, checked as a directory log's reader checks it."""
    out = logread.LogRead(store.root, log_exists=True)
    folder = fold.Fold()
    for line, event in _checked(store):
        folder.step(event)
        out.seq, out.digest, out.length = event["seq"], digest(line), out.length + len(line)
        each(line, event)
    out.state = folder.state()
    return out


def _checked(store: Session) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """The lines and their events; ``reader.Damage`` at the first that breaks framing, seq or chain."""
    prev, offset, expected = None, 0, 1
    for seq, line in _lines(store):
        try:
            event = decode(line)
        except Malformed as exc:
            raise logread.Damage(store.root, f"line {expected} is malformed: {exc}", expected, offset,
                                 logread.RESTORE_HINT) from None
        if seq != expected or event["seq"] != expected:
            raise logread.Damage(store.root, f"line {expected} has seq {event['seq']}, expected {expected}", expected,
                                 offset, logread.RESTORE_HINT)
        if event["prev"] != prev:
            raise logread.Damage(store.root, f"line {expected} breaks the chain: its prev does not match line "
                                f"{expected - 1}", expected, offset, logread.RESTORE_HINT)
        yield line, event
        prev, offset, expected = digest(line), offset + len(line), expected + 1


def older_format(body: str) -> bool:
    """Whether a state row's body is a state of an earlier format (which an
    upgrade leaves behind), rather than a damaged one."""
    from ...core.jsoncodec import loads
    from ...core.statebody import FORMAT

    try:
        v = loads(body).get("v")
    except (ValueError, AttributeError):
        return False
    return type(v) is int and 1 <= v < FORMAT


def verify(store: Session, progress: Callable[[int], None] | None = None):
    """Check every line from the first (``verify.check_lines``, the rules
    a directory log is checked by), that the log's last line is the one
    its head (the state row) records, that the state row's body with the
    lines after it folds to what the full replay does, and so do the
    tables the server folded (``storm_queue.run`` and the rest, from schema
    version 5), which a hand edit may have withdrawn from its decisions
    (from schema version 9). The head is read in the lines' snapshot: a
    last line deleted or edited, or one past the head, is named by its
    line number."""
    from ...core.verify import Problem, check_lines

    head: list = []
    out = check_lines((line for _, line in _lines(store, head)), store.root, progress)
    out.agree = ("framing, schema, chain and seq agree (its lines are rows of storm_queue.event, which keeps no "
                 "witness: the chain and the state row are checked instead)")
    out.kept = "state row"
    out.remedy = logread.RESTORE_HINT
    if out.problem is not None:
        return out
    seq, last = head[0]  # the head in the snapshot the lines were read from
    if out.lines < seq:
        out.problem = Problem(f"line {out.lines + 1} is missing: the log's head (the state row) records line {seq} "
                              "as its last, and the lines after it were deleted", out.lines + 1, out.length)
        return out
    if out.lines > seq:
        out.problem = Problem(f"line {seq + 1} is past the log's head (the state row records line {seq} as its "
                              "last): it was inserted other than by a request", seq + 1, out.length)
        return out
    if last != out.digest:
        out.problem = Problem(f"line {seq} is not the line the log's head (the state row) records as its last: "
                              "its digest differs, so it was edited", seq, out.length)
        return out
    with store._errors(), store.conn.transaction():
        store.conn.execute(q("read_only_snapshot"))
        seq, last, body, body_seq, body_digest = store.conn.execute(q("read_state")).fetchone()
        if seq != out.lines:  # a writer appended since the lines were read: its state row is newer
            out.warnings.append(f"the log grew to line {seq} during the audit; the state row was not compared")
            return out
        try:
            folded = fold_on(store.conn, _Known(body_seq, body_digest, load_state(body)), seq, last)
        except ValueError:
            if older_format(body):  # an earlier storm-queue's row: read past, as the readers do, until rewritten
                out.checkpoint, out.checkpoint_why = "ignored", ("the state row is of an earlier storm-queue's format; "
                                                                  "the next request rewrites it")
                return out
            folded = None
        runs, withdrawn = _runs_agree(store, out.state)
    out.checkpoint_line = body_seq
    agrees = folded == out.state
    out.checkpoint = "agrees" if agrees else "disagrees"
    if not agrees:
        out.problem = Problem(f"the state row (its body at line {body_seq}, with the lines after it) is not what "
                              "the whole log folds to; commands trust it, so the order they give is not the log's",
                              body_seq, out.length)
    elif withdrawn is not None:
        out.problem = Problem(f"the server no longer decides runner requests by what it folded of the log "
                              f"({withdrawn}): every runner request is answered that the order is unknown; the "
                              "operator's storm-queue upgrade URL folds it again from the log", seq, out.length)
    elif not runs:
        out.problem = Problem("the runs the server folded (storm_queue.run) are not what the whole log folds to; "
                              "the server decides renew and finish by them", body_seq, out.length)
    return out


def _runs_agree(store: Session, state: fold.LaneState) -> tuple[bool, str | None]:
    """Whether the runs the server folded are the log's, its marks of the
    lanes a claim passes over hold (the priority lane's, and held lanes
    passed, from schema version 17), (from schema version 6) the run rows
    a claim looks at are those of ``storm_queue.watch``, and (from schema
    version 9) its idempotency keys are the log's; and why the server no
    longer decides by them, if a hand edit withdrew them (true, None
    where this role may not read a table it needs: doctor says so)."""
    from .folded import folded_runs, folded_keys, read_keys, read_runs
    from .driver import errors
    from .version import BOUNDARY
    from .version import read as read_version

    version = read_version(store)
    if version < 5:
        return True, None
    try:
        with store.conn.transaction():  # a savepoint: a table this role may not read leaves the audit whole
            conn = store.conn
            marks = q("open_mark_sound") if version < 17 else q("marks_sound_17") if version == 17 else q("marks_sound")
            agree = (read_runs(conn) == folded_runs(state) and conn.execute(marks).fetchone()[0]
                     and (version < 6 or conn.execute(q("watch_sound")).fetchone()[0])
                     and (version < BOUNDARY or read_keys(conn) == folded_keys(state)))
            withdrawn = conn.execute(q("read_withdrawn")).fetchone()[0] if version >= BOUNDARY else None
            return agree, withdrawn
    except errors.InsufficientPrivilege:
        return True, None


def fold_on(conn: Any, known: _Known, seq: int, last: str | None, rows: list | None = None) -> fold.LaneState | None:
    """``known``'s state with the lines after it up to line ``seq``
    (``rows`` when given, else read now) folded on; None unless those
    lines are its chain's next, one by one, and the last of them has the
    digest ``last``."""
    if known.seq == seq:
        return known.state if known.last == last else None
    if rows is None:
        rows = conn.execute(q("lines_between"), (known.seq, seq)).fetchall()
    prev, events = known.last, []
    for n, (line_seq, line) in enumerate(rows, known.seq + 1):
        line = bytes(line)
        try:
            event = decode(line)
        except Malformed:
            return None
        if line_seq != n or event["seq"] != n or event["prev"] != prev:
            return None
        events.append(event)
        prev = digest(line)
    if len(events) != seq - known.seq or prev != last:
        return None
    return fold.replay(events, known.state)

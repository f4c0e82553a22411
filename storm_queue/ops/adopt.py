"""``storm-queue adopt``: take over a priority log that the earlier priority
tool wrote, keeping its order (the format and its replay: ``log.adopted``).

What is on disk when an adopt is killed at any point is one of two states:

- *not adopted*: the old log is where it was, byte for byte, and no log
  of this tool's format exists. Leftovers may lie beside it (a temporary
  ``.<log>.adopting``, and second names ``<log>.adopted-<stamp>`` for the
  very same old file); every reader ignores them and the next ``adopt``
  removes them before it starts again (the roll back).
- *adopted*: the new log, whose one line is the ``adopt`` event, has taken
  the old log's place by one rename, and the old bytes are kept under
  ``<log>.adopted-<stamp>``. Its witness is written next; until it is, a
  reader accepts that one state (a one-line log whose ``adopt`` names a
  kept file of the sha256 and length it records: ``reader.read``) and the
  next request writes the witness (the roll forward).

The steps, under the writers' lock: write the new log under a temporary
name and fsync it; give the old log (and its witness) a second name,
``.adopted-<stamp>``, and fsync the directory; rename the new log over the
old one (the commit) and fsync the directory; replace the witness.
"""

from __future__ import annotations

import os

from ..core import logread
from ..core.errors import RecordFailed, UnknownOrder
from ..core.framing import digest
from ..core.lane import Refusal, Snapshot
from ..core.outcome import Outcome, Request, Step
from ..core.shapes import optional_text, shape_names
from ..service.passage import _progress_words
from ..store.directory import ledger
from ..store.directory.fsutil import fsync_dir, open_file, replace_atomically, write_all
from ..store.directory.log import reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..service.storm import Storm
    from ..store.directory.log import adopted
    from ..store.directory.store import Directory
    from ..store.interface import Effects



#: the no-op's words when the log is already this tool's
NOTHING_TO_ADOPT = "nothing to adopt: the priority log is already storm-queue's (or there is none yet)"
#: and on a database storm, which never holds the earlier tool's log
NOTHING_TO_ADOPT_IN_ROWS = "nothing to adopt: a database storm keeps its log in rows, never in the earlier tool's format"


def adopt(storm: Storm, reason: str | None, source: str | None = None, key: str | None = None,
          dry_run: bool = False) -> Outcome:
    """Take over the earlier tool's priority log (operator only): keep
    it beside the new log and start the new log with an ``adopt`` event
    that carries the lane it replays to. A log already in this tool's
    format (or none, or a database storm's) makes a recorded no-op; an old
    log that breaks its format raises ``UnknownOrder`` (exit 3) and changes
    nothing. With ``dry_run``, answer as the request would (the lane it
    would adopt, and the run order after it) and write nothing."""
    req = Request("adopt", None, optional_text(reason), optional_text(source), optional_text(key))
    refusal = shape_names(None, (), req.source)
    if refusal is None and not (req.reason or "").strip():
        refusal = Refusal("blank_reason", "adopt needs --reason TEXT saying why the storm moves to storm-queue")
    store = storm.store
    decl = store.declaration()
    log_file = store.upkeep.log_file(decl)  # a log in a file may be set aside; rows hold no earlier tool's log
    noop = NOTHING_TO_ADOPT if log_file is not None or decl.log_error else NOTHING_TO_ADOPT_IN_ROWS

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step:
        body = {"action": "adopt", "name": None, "kept": None, "sha256": None, "bytes": None, "lines": None,
                "lane": [], "noop": noop}
        return Step(Outcome("noop", "adopt", None, by, message=noop), [body])

    if log_file is None:  # nothing to set aside: an unknown order stays exit 3
        return storm.request(req, refusal, plan, dry_run, decl=decl)
    if refusal is None and store.judge(req, decl, True).verdict.admitted:
        _check_first(log_file)  # before the lock, so a bad old log leaves not even a lock file
    return storm.request(req, refusal, plan, dry_run, decl=decl,
                         on_unknown=lambda req, by, decl, at, damage: _adopt_old(
                             store, req, by, log_file, at, damage, dry_run))


def _adopt_old(store: Directory, req: Request, by: str, log_path: str, at: str, damage: UnknownOrder,
               dry_run: bool = False) -> Outcome:
    """Under the lock (a dry run takes none), with the log unreadable as
    this tool's: adopt it when the earlier tool wrote it, else answer the
    damage (exit 3). A dry run answers what the adopt would do."""
    from ..store.directory.log import adopted

    data, witness = _old_files(log_path)
    if not adopted.looks_old((data or b"")[:adopted.HEAD], witness):
        raise damage
    name = os.path.basename(log_path)
    old = _replayed(log_path, data, witness)
    if dry_run:
        return _rehearse_adopt(store, by, log_path, old, at)
    roll_back(log_path)
    stamp = at.replace(":", "")
    kept = _free(log_path, f"{name}.adopted-{stamp}")
    body: dict[str, Any] = {"action": "adopt", "name": name, "kept": kept, "sha256": old.sha256,
                            "bytes": old.length, "lines": old.lines, "lane": old.rows(), "reason": req.reason}
    if req.key is not None:
        body.update(key=req.key, fingerprint=req.fingerprint())
    event = _commit(log_path, body, at, by, witness is not None, stamp)
    out = Outcome("done", "adopt", None, by, recorded=True, event=event,
                  message=f"adopted the earlier tool's log ({old.lines} lines, kept beside the new log as {kept}): "
                          f"the priority lane is {_lane_words(old)}")
    out.adopted = {k: body[k] for k in ("name", "kept", "sha256", "bytes", "lines", "lane")}
    ledger.say(store.root, at, _progress_words(out, req), None)
    return out


def _rehearse_adopt(store: Directory, by: str, log_path: str, old: adopted.Replayed, at: str) -> Outcome:
    """What adopting ``old`` would answer, and the run order after it."""
    from ..core import fold
    from ..core.resolver import resolve
    from ..service.passage import DRY_RUN

    rows = old.rows()
    event = {"seq": 1, "action": "adopt", "at": at, "by": by, "lane": rows}
    snap = store.snapshot(logread.LogRead(log_path, fold.replay([event])), at)
    out = Outcome("done", "adopt", None, by, dry_run=True, order=[row.slug for row in resolve(snap).rows],
                  message=f"would adopt the earlier tool's log ({old.lines} lines): the priority lane would be "
                          f"{_lane_words(old)} ({DRY_RUN})")
    out.adopted = {"name": os.path.basename(log_path), "kept": None, "sha256": old.sha256, "bytes": old.length,
                   "lines": old.lines, "lane": rows}
    return out


def _lane_words(old: adopted.Replayed) -> str:
    """The adopted lane in words: its slugs in order, and how many are named."""
    lane = " ".join(e.slug for e in old.lane) or "(empty)"
    return f"{lane} ({sum(1 for e in old.lane if e.named)} of {len(old.lane)} named)"


def _check_first(log_path: str) -> None:
    """Raise what adopting would (exit 3, naming the line) when the log is
    the earlier tool's and breaks its format. No writer appends to such a
    log, so this read needs no lock; the adopt checks again under it."""
    try:
        data, witness = _old_files(log_path)
    except UnknownOrder:
        return  # the request under the lock says so
    from ..store.directory.log import adopted

    if adopted.looks_old((data or b"")[:adopted.HEAD], witness):
        _replayed(log_path, data, witness)


def _replayed(log_path: str, data: bytes | None, witness: bytes | None) -> adopted.Replayed:
    """The old log replayed, or ``UnknownOrder`` naming the line and rule it breaks."""
    from ..store.directory.log import adopted

    try:
        return adopted.replay(data, witness, os.path.basename(log_path))
    except adopted.OldDamage as exc:
        raise UnknownOrder(f"the priority order is unknown: {log_path} was written by the earlier priority tool "
                           f"but cannot be adopted: {exc}; nothing was changed") from None


def _read_nofollow(path: str) -> bytes | None:
    """The bytes of ``path``, None when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _old_files(log_path: str) -> tuple[bytes | None, bytes | None]:
    """The log's and its witness's bytes (None: absent); an unreadable one
    is the damage it already was."""
    try:
        return _read_nofollow(log_path), _read_nofollow(reader.witness_path(log_path))
    except OSError as exc:
        raise UnknownOrder(f"the priority order is unknown: {log_path} cannot be read ({exc.strerror})") from None


def _free(log_path: str, name: str) -> str:
    """``name``, or ``name.N`` with the smallest N free, beside the log."""
    directory = os.path.dirname(log_path) or "."
    out, n = name, 0
    while os.path.lexists(os.path.join(directory, out)):
        n += 1
        out = f"{name}.{n}"
    return out


def temporary(log_path: str) -> str:
    """Where an adopt writes the new log before it takes the old one's place."""
    head, name = os.path.split(log_path)
    return os.path.join(head, f".{name}.adopting")


def roll_back(log_path: str) -> None:
    """Remove what an adopt killed before its commit left: the temporary new
    log, and the second names it gave the old log and witness (only names of
    the very files still in place are removed)."""
    directory = os.path.dirname(log_path) or "."
    removed = False
    try:
        os.unlink(temporary(log_path))
        removed = True
    except FileNotFoundError:
        pass
    name = os.path.basename(log_path)
    for live, prefix in ((log_path, f"{name}.adopted-"), (reader.witness_path(log_path), f".{name}.witness.adopted-")):
        try:
            st = os.stat(live, follow_symlinks=False)
        except FileNotFoundError:
            continue
        for entry in os.listdir(directory):
            if entry.startswith(prefix):
                path = os.path.join(directory, entry)
                other = os.stat(path, follow_symlinks=False)
                if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                    os.unlink(path)
                    removed = True
    if removed:
        fsync_dir(directory)


def _commit(log_path: str, body: dict[str, Any], at: str, by: str, has_witness: bool, stamp: str) -> dict[str, Any]:
    """Write the new log and put it in the old one's place, in the order
    the module's docstring gives; return the ``adopt`` event as written."""
    from ..core import framing
    from ..store.directory.log import writer

    directory = os.path.dirname(log_path) or "."
    wpath = reader.witness_path(log_path)
    (event, line), = framing.frame([body], 0, None, at, by)
    tmp = temporary(log_path)
    kept = os.path.join(directory, body["kept"])
    made: list[str] = []
    try:
        writer.check_writable(log_path)
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        made.append(tmp)
        try:
            write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(directory)
        os.link(log_path, kept, follow_symlinks=False)
        made.append(kept)
        if has_witness:
            os.link(wpath, f"{wpath}.adopted-{stamp}", follow_symlinks=False)
            made.append(f"{wpath}.adopted-{stamp}")
        fsync_dir(directory)
        os.rename(tmp, log_path)  # the commit
    except OSError as exc:
        for path in reversed(made):
            try:
                os.unlink(path)
            except OSError:
                pass
        raise RecordFailed(f"the adopt could not be made ({exc.strerror or exc}); nothing was changed: the old log "
                           "is where it was; fix the cause and ask again", recorded=False) from None
    writer.appended.append(event)
    try:
        fsync_dir(directory)
        replace_atomically(wpath, writer.witness_bytes(log_path, len(line), 1, digest(line), at))
    except OSError as exc:
        raise RecordFailed(f"the log was adopted (its first line records it, and the old log is kept as "
                           f"{body['kept']}), but its witness could not be written ({exc.strerror or exc}); any next "
                           "request (another adopt too) writes it", recorded=True) from None
    return event

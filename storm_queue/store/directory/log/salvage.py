"""What ``reset --keep-intact`` keeps of a log that cannot be replayed: the
longest prefix that verifies from line 1 (``intact``), the lines after it,
each named (``lost``), and the new log that starts with the kept lines,
byte for byte (``begin``).

A line of the prefix passed every check the reader makes of it (framing,
``seq``, the chain to the line before it) and nothing later says it was
changed: a line the next line no longer chains to is not kept (the chain
cannot tell which of the two changed), and neither is the line at the
witnessed length when it is not the line the witness recorded, nor any
line after it. A log shorter than its witness keeps every whole line; a
witness that is missing or unreadable checks nothing, and the chain alone
decides."""

from __future__ import annotations

import os

from ....core import fold, logread
from ....core.errors import UnknownOrder
from ....core.framing import digest
from ....core.logread import LogRead, Lost
from ....core.stream import Bad, LineCheck
from ..fsutil import fsync_dir, open_file, replace_atomically, write_all
from . import reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ....core.logread import Witness

#: the bytes copied at a time into the new log
COPY = 1 << 20


class _Stop(Exception):
    """The walk met the line the witness contradicts: nothing from it on is kept."""


class _Prefix:
    """The lines kept so far. The last line that passed is held back
    (``pending``) until a later line or the end vouches for it, so that it
    can be let go without undoing the fold."""

    def __init__(self, witness: Witness | None):
        self.witness = witness
        self.folder = fold.Fold()
        self.lines, self.length, self.last = 0, 0, b""  # the lines kept, their bytes, the last of them
        self.pending: tuple[bytes, dict[str, Any]] | None = None
        self.reached = 0  # the bytes walked so far: where the next line starts

    def each(self, line: bytes, event: dict[str, Any]) -> None:
        end = self.reached + len(line)
        w = self.witness
        if w is not None and self.reached < w.length <= end and (
                end != w.length or (event["seq"], digest(line)) != (w.seq, w.digest)):
            raise _Stop
        self.keep()
        self.pending, self.reached = (line, event), end

    def keep(self) -> None:
        """Fold in the line held back."""
        if self.pending is not None:
            line, event = self.pending
            self.folder.step(event)
            self.lines, self.length, self.last = event["seq"], self.length + len(line), line
            self.pending = None


def intact(log_path: str) -> LogRead:
    """The longest prefix of the log at ``log_path`` that verifies from
    line 1, as a read of a log holding just those lines: its state,
    ``seq`` (the lines kept), ``digest`` (the last kept line's) and
    ``length`` (their bytes). Nothing is kept of a log that cannot be
    opened. Never raises for damage."""
    try:
        witness = reader.read_witness(log_path)
    except UnknownOrder:
        witness = None
    if witness is not None and witness.log != os.path.basename(log_path):
        witness = None
    prefix = _Prefix(witness)
    try:
        f = reader.open_log(log_path)
    except OSError:
        return LogRead(log_path)
    with f:
        try:
            reader.chain(f, LineCheck(each=prefix.each, bulk=True))
            prefix.keep()
        except Bad as bad:
            if not bad.what.startswith(f"line {bad.line} breaks the chain"):
                prefix.keep()
        except _Stop:  # the line held back is the one the contradicted line chains to
            prefix.keep()
        except OSError:  # a read that fails part way keeps what was read before it
            prefix.keep()
    return LogRead(log_path, prefix.folder.state(), prefix.lines, digest(prefix.last) if prefix.lines else None,
                   prefix.length)


def lost(log_path: str, start: int, before: int) -> tuple[Lost, ...]:
    """Every line of the log at ``log_path`` from byte ``start`` on, each
    named as a reset that keeps the ``before`` lines ahead of it would lose
    it (``logread.lost``: its number, and its seq, action and lane when it
    can be read). Nothing of a log that cannot be opened; a read that fails
    part way names what was read before it."""
    out: list[Lost] = []
    try:
        f = reader.open_log(log_path)
    except OSError:
        return ()
    with f:
        try:
            f.seek(start)
            for number, raw in enumerate(iter(f.readline, b""), start=before + 1):
                out.append(logread.lost(raw, number))
        except OSError:
            pass
    return tuple(out)


def begin(log_path: str, kept: LogRead, source: str, at: str) -> LogRead:
    """Start the log at ``log_path`` (which must not exist) with the first
    ``kept.length`` bytes of the file ``source``, durably: the witness of an
    empty log first (as a new log's first append writes it), then the
    lines, fsynced. Returns the read of the new log for the append that
    follows, which witnesses it. A crash before that append leaves a log
    whose lines follow its witness, which every reader accepts. An I/O
    error raises ``OSError`` once the new log is taken away again (a line
    whose fsync failed is never left to be witnessed later): what is left
    is the empty log's witness, a storm with nothing prioritised."""
    from .writer import witness_bytes

    directory = os.path.dirname(log_path) or "."
    replace_atomically(reader.witness_path(log_path), witness_bytes(log_path, 0, 0, None, at))
    fd = open_file(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
    try:
        with reader.open_log(source) as f:
            left = kept.length
            while left:
                block = f.read(min(COPY, left))
                if not block:
                    raise OSError(f"{source} ended before its {kept.length} intact bytes were copied")
                write_all(fd, block)
                left -= len(block)
        os.fsync(fd)
        fsync_dir(directory)
    except OSError:
        try:
            os.unlink(log_path)
            fsync_dir(directory)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)
    return LogRead(log_path, kept.state, kept.seq, kept.digest, kept.length, log_exists=True)

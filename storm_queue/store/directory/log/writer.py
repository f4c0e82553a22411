"""Appending to the priority log: whole lines, chained, fsynced, witnessed.

The order of durable steps is the promise: the line (and a new log's
directory entry) is on disk before the witness is replaced, and the witness
is on disk before the caller hears of success. The checkpoint, a cache, is
refreshed after the witness, now and then (see ``checkpoint.EVERY``).
"""

from __future__ import annotations

import errno
import os

from ....core.errors import AppendFailed, WriteFailed
from ....core.framing import digest, frame
from ....core.jsoncodec import dumps
from ....core.logread import LogRead
from ..fsutil import fsync_dir, give_to, open_file, replace_atomically, write_all
from . import checkpoint
from .reader import witness_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _witness_bytes(log_path: str, length: int, seq: int, last: str | None, at: str) -> bytes:
    body = {"log": os.path.basename(log_path), "length": length, "seq": seq, "digest": last, "at": at}
    return (dumps(body) + "\n").encode()


#: the witness's bytes, for a writer that starts a log other than by ``append`` (``ops.adopt``)
witness_bytes = _witness_bytes



def _keep_torn(log: LogRead, fd: int, at: str, owner: tuple[int, int] | None) -> dict[str, Any]:
    """Copy the torn tail to a side file, cut it from the log, and return the
    ``repair`` body that records it."""
    torn = os.pread(fd, log.torn, log.length)
    side, sfd = _new_side_file(f"{log.path}.torn-{log.seq}-{at.replace(':', '')}")
    try:
        give_to(sfd, owner)
        write_all(sfd, torn)
        os.fsync(sfd)
    finally:
        os.close(sfd)
    fsync_dir(os.path.dirname(log.path) or ".")
    os.ftruncate(fd, log.length)
    os.fsync(fd)
    return {"action": "repair", "torn": len(torn), "side": os.path.basename(side)}


def _new_side_file(name: str) -> tuple[str, int]:
    """Create a side file named ``name``, or ``name.N`` with the smallest N
    free: a writer killed after making its side file, or a clock that
    repeats a time, must not stop the next repair."""
    path, n = name, 0
    while True:
        try:
            return path, open_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            n += 1
            path = f"{name}.{n}"


def check_writable(log_path: str) -> None:
    """Raise ``PermissionError`` unless this process may write the log and
    create files beside it (the witness is replaced by a new file there):
    checked before anything is written, so that neither ``queue.txt`` nor
    a line outruns what could not follow it."""
    directory = os.path.dirname(log_path) or "."
    for path in (directory, log_path):
        if os.path.lexists(path) and not os.access(path, os.W_OK, effective_ids=True, follow_symlinks=False):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)


#: every event this process appended, oldest first: what an interrupt
#: reports as recorded (``answer.interrupted``)
appended: list[dict[str, Any]] = []


def append(log: LogRead, bodies: list[dict[str, Any]], at: str, by: str,
           owner: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Append ``bodies`` as events after what ``log`` read (the caller holds
    the lock), repairing a torn tail first; return the events as written.
    ``owner`` is the storm's owner when the caller is another account.

    Raises ``AppendFailed`` on an I/O error. A failed fsync of the log is
    never retried: the lines are cut back off and the append fails, so that
    no line whose durability the disk denied is ever witnessed by this
    writer; the next writer reads the log afresh."""
    directory = os.path.dirname(log.path) or "."
    try:
        check_writable(log.path)
        if log.fresh:  # the witness comes first, so that a log without one is damage
            replace_atomically(witness_path(log.path), _witness_bytes(log.path, 0, 0, None, at), owner)
        if not log.log_exists:
            fd = open_file(log.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        else:
            fd = open_file(log.path, os.O_RDWR | os.O_APPEND)
    except OSError as exc:
        raise AppendFailed.of(exc) from exc
    try:
        if not log.log_exists:
            give_to(fd, owner)
            fsync_dir(directory)
        if log.torn:
            bodies = [_keep_torn(log, fd, at, owner)] + bodies
        framed = frame(bodies, log.seq, log.digest, at, by)
        data = b"".join(line for _, line in framed)
        try:
            write_all(fd, data)
        except OSError as exc:
            _cut_back(fd, log.length)  # a part of a line left behind is a torn tail: never counted
            raise AppendFailed.of(exc) from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            if _cut_back(fd, log.length):
                raise AppendFailed.of(exc) from exc
            raise AppendFailed.of(exc, state="uncertain", words=(
                f"the disk could not make it durable ({WriteFailed.of(exc)}) and its line could not be cut back "
                "off; the storm's disk is failing")) from exc
    except OSError as exc:
        raise AppendFailed.of(exc) from exc
    finally:
        os.close(fd)
    events = [event for event, _ in framed]
    appended.extend(events)  # durable and counted from here on, witnessed or not
    last_event, last_line = framed[-1]
    length = log.length + len(data)
    try:
        replace_atomically(
            witness_path(log.path),
            _witness_bytes(log.path, length, last_event["seq"], digest(last_line), at),
            owner,
        )
    except OSError as exc:
        raise AppendFailed.of(exc, state="unwitnessed", events=events, words=(
            f"the log's witness could not be replaced ({WriteFailed.of(exc)}); the next request re-witnesses it")) from exc
    checkpoint.refresh(log, events, length, digest(last_line), owner)
    return events


def _cut_back(fd: int, length: int) -> bool:
    """Cut the log back to ``length`` and make that durable; whether it worked."""
    try:
        os.ftruncate(fd, length)
        os.fsync(fd)
    except OSError:
        return False
    return True

"""A directory storm's ``queue.txt``: read (and parsed by
``core.queuetext``), and a whole line appended durably."""

from __future__ import annotations

import os

from ...core.errors import WriteFailed, unreadable
from ...core.queuetext import QueueFile, parse
from .fsutil import fsync_dir, open_file, write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def read(path: str) -> QueueFile:
    """Read and parse ``queue.txt``; a missing file is an empty queue."""
    try:
        with os.fdopen(open_file(path), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return QueueFile((), (), exists=False)
    except OSError as exc:
        raise unreadable(path, exc) from None
    return parse(raw.decode("utf-8", "replace"))


def missing(root: str) -> str:
    """Why a storm whose queue.txt is gone cannot be read, and what to do."""
    return (f"{os.path.join(root, 'queue.txt')} does not exist, so the storm's lanes are unknown (an empty storm has "
            "an empty queue.txt): restore it from a backup or version control, or, for a storm with no lanes, "
            "create it empty (touch queue.txt)")


def append_line(path: str, line: str) -> Callable[[], None]:
    """Append one whole line, or several (each ended by a newline), to
    ``queue.txt`` in one write (starting a new line when the file has no
    final newline), each ended as the file's first line is (CRLF stays
    CRLF), and make them durable before returning. Returns what takes
    them back off, unless the file has changed since. On an I/O error,
    what was written is cut back off (a part of a line could read as a
    lane of another issue; a file it created is removed), and the error
    raised: ``WriteFailed`` with ``kept`` when that could not be done either.
    A file replaced at ``path`` while the lines were written (an editor's
    save renames a new file over it) is ``WriteFailed`` too, the lines cut
    back off the file they went to."""
    created = False
    try:
        fd = open_file(path, os.O_RDWR | os.O_APPEND)
    except FileNotFoundError:
        fd = open_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        created = True
    try:
        at = os.fstat(fd)
        size, ident = at.st_size, (at.st_dev, at.st_ino)
        first = os.pread(fd, min(size, 1 << 16), 0).partition(b"\n")  # the first line's ending is the file's
        newline = b"\r\n" if first[1] and first[0].endswith(b"\r") else b"\n"
        data = b"".join(one.encode("utf-8") + newline for one in line.rstrip("\n").split("\n"))  # CRLF stays CRLF
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = newline + data
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            if not _cut_back(fd, size, size + len(data)):
                raise WriteFailed.of(exc, path, kept=True) from exc
            raise
        if not _still_at(path, ident):  # an editor saved it (a new file renamed over it) while we appended
            kept = not _cut_back(fd, size, size + len(data))  # (off the old file: it may live on as a backup)
            raise WriteFailed("replaced by another file while this request appended to it (an editor's save?)", path,
                              kept=kept)
    finally:
        os.close(fd)
    if created:  # the new file is durable only once its directory is
        try:
            fsync_dir(os.path.dirname(path) or ".")
        except OSError as exc:
            try:
                os.unlink(path)
            except OSError:
                raise WriteFailed.of(exc, path, kept=True) from exc
            raise
    return lambda: _take_back(path, ident, size, size + len(data))


def _still_at(path: str, ident: tuple[int, int]) -> bool:
    """Whether ``path`` still names the file ``ident`` (device, inode)."""
    try:
        at = os.stat(path)
    except FileNotFoundError:
        return False
    return (at.st_dev, at.st_ino) == ident


def _take_back(path: str, ident: tuple[int, int], size: int, end: int) -> None:
    """Cut ``queue.txt`` back to ``size`` when it is still the file
    ``ident`` (device, inode) appended to and ``end`` bytes long (what was
    appended, and nothing since: an editor's save is never cut)."""
    fd = open_file(path, os.O_RDWR)
    try:
        at = os.fstat(fd)
        if (at.st_dev, at.st_ino) == ident and at.st_size == end:
            os.ftruncate(fd, size)
            os.fsync(fd)
    finally:
        os.close(fd)


def _cut_back(fd: int, size: int, most: int) -> bool:
    """Cut ``queue.txt`` back to ``size`` unless something other than our
    write made it longer than ``most`` (a hand edit is never cut); whether
    it no longer carries our write."""
    try:
        if os.fstat(fd).st_size > most:
            return False
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        return False
    return True

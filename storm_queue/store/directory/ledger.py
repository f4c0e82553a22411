"""What the reviewer and the runner leave in the storm: the settled ledgers,
finished and running markers, ``UNATTENDED``; and ``progress.log`` writing."""

from __future__ import annotations

import os

from ...core.errors import unreadable
from ...core.jsoncodec import dumps, loads
from ...core.ledgers import Ledgers, blocked_result, is_blocked_mark
from ...core.names import is_name, printable
from ...core.queuetext import BOM
from .fsutil import beside, make_dir, open_file, replace_atomically, write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from ...core.fold import LaneState

INTEGRATED = "integrated.txt"
ABANDONED = "abandoned.txt"
UNATTENDED = "UNATTENDED"
PROGRESS = "progress.log"
LANES = "lanes"
MARKS = ".qwenstorm"
RESULT = "result.json"
RUNNING = "running"


def _read_slugs(path: str) -> frozenset[str]:
    try:
        with os.fdopen(open_file(path), "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return frozenset()
    except OSError as exc:
        raise unreadable(path, exc) from None
    return frozenset(
        s for s in (line.strip() for line in text.removeprefix(BOM).split("\n")) if s and not s.startswith("#")
        and is_name(s)
    )


def _marked(root: str) -> tuple[frozenset[str], dict[str, int | None]]:
    """Slugs with a ``result.json``, and slugs with a running marker with
    the token each marker carries."""
    finished, running = set(), {}
    try:
        entries = os.scandir(os.path.join(root, LANES))
    except (FileNotFoundError, NotADirectoryError):
        return frozenset(), {}
    with entries:
        for entry in entries:
            if not is_name(entry.name):
                continue
            marks = os.path.join(entry.path, MARKS)
            if has_result(root, entry.name):
                finished.add(entry.name)
            marker = os.path.join(marks, RUNNING)
            if os.path.exists(marker):
                running[entry.name] = marker_token(marker)
    return frozenset(finished), running


def marker_token(path: str) -> int | None:
    """The fencing token a running marker carries, if it carries one."""
    try:
        with os.fdopen(open_file(path), "rb") as f:
            return _token_in(f.read(4096))
    except OSError:
        return None


def read(root: str) -> Ledgers:
    """Read every ledger and marker of the storm at ``root``."""
    finished, running = _marked(root)
    return Ledgers(
        _read_slugs(os.path.join(root, INTEGRATED)),
        _read_slugs(os.path.join(root, ABANDONED)),
        finished,
        running,
        os.path.exists(os.path.join(root, UNATTENDED)),
    )


def has_result(root: str, slug: str) -> bool:
    """Whether the lane has written (or been given) its ``result.json``."""
    return os.path.exists(os.path.join(root, LANES, slug, MARKS, RESULT))




def mark_blocked(root: str, slug: str, blocked_on: list[str], at: str, owner: tuple[int, int] | None) -> None:
    """Write ``result.json`` saying the lane is blocked on abandoned lanes
    (``blocked_result``)."""
    body = blocked_result(blocked_on, at)
    with _marks(root, slug) as fd:
        replace_atomically(RESULT, (dumps(body) + "\n").encode(), owner, dir_fd=fd)



def _read_result(fd: int) -> bytes | None:
    try:
        with os.fdopen(open_file(RESULT, dir_fd=fd), "rb") as f:
            return f.read(1 << 20)
    except FileNotFoundError:
        return None


def blocked_mark(root: str, slug: str) -> bool:
    """Whether the lane's ``result.json`` is ``next``'s blocked mark."""
    try:
        with _marks(root, slug, create=False) as fd:
            raw = _read_result(fd)
        return raw is not None and is_blocked_mark(loads(raw))
    except (OSError, ValueError):
        return False


def unmark_blocked(root: str, slug: str, owner: tuple[int, int] | None) -> Callable[[], None] | None:
    """Remove the lane's ``result.json`` when it is ``next``'s blocked mark
    (a waiver lifted the block); returns what puts it back (None when
    nothing was removed)."""
    with _marks(root, slug, create=False) as fd:
        raw = _read_result(fd)
        try:
            if raw is None or not is_blocked_mark(loads(raw)):
                return None
        except ValueError:
            return None
        os.unlink(RESULT, dir_fd=fd)
        os.fsync(fd)

    def undo() -> None:
        with _marks(root, slug, create=False) as inner:
            replace_atomically(RESULT, raw, owner, dir_fd=inner)

    return undo


def mark_running(root: str, slug: str, body: dict, owner: tuple[int, int] | None) -> None:
    """Write the lane's running marker (``body``: holder, token, expiry):
    the cache of its lease that a runner and a person can read."""
    with _marks(root, slug) as fd:
        replace_atomically(RUNNING, (dumps(body) + "\n").encode(), owner, dir_fd=fd)


def mark_finished(root: str, slug: str, body: dict, owner: tuple[int, int] | None) -> Callable[[], None] | None:
    """Write ``result.json`` (``body`` carries the lease's ``token``)
    unless it already carries that token (a finish asked again after a
    crash); a result.json written by anyone else is replaced, so a lane
    that lost its lease never has the last word. Returns what undoes the
    write (None when nothing was written)."""
    with _marks(root, slug) as fd:
        try:
            with os.fdopen(open_file(RESULT, dir_fd=fd), "rb") as f:
                before: bytes | None = f.read()
        except FileNotFoundError:
            before = None
        if before is not None and _token_in(before) == body["token"]:
            return None
        replace_atomically(RESULT, (dumps(body) + "\n").encode(), owner, dir_fd=fd)

    def undo() -> None:
        with _marks(root, slug, create=False) as inner:
            if before is None:
                os.unlink(RESULT, dir_fd=inner)
                os.fsync(inner)
            else:
                replace_atomically(RESULT, before, owner, dir_fd=inner)

    return undo


def result_tokens(root: str, slugs: Iterable[str]) -> dict[str, int | None]:
    """The fencing token each lane's ``result.json`` carries (None: none,
    or no result.json), for ``slugs``."""
    out = {}
    for slug in slugs:
        try:
            with os.fdopen(open_file(os.path.join(root, LANES, slug, MARKS, RESULT)), "rb") as f:
                out[slug] = _token_in(f.read(65536))
        except OSError:
            out[slug] = None
    return out


def _token_in(raw: bytes) -> int | None:
    try:
        body = loads(raw)
    except ValueError:
        return None
    token = body.get("token") if isinstance(body, dict) else None
    return token if type(token) is int and token > 0 else None


def unmark_running(root: str, slug: str, token: int | None) -> bool:
    """Remove the lane's running marker when it carries ``token`` (any
    marker when ``token`` is None); True when one was removed."""
    path = os.path.join(root, LANES, slug, MARKS, RUNNING)
    if not os.path.lexists(path) or (token is not None and marker_token(path) != token):
        return False
    with _marks(root, slug, create=False) as fd:
        try:
            os.unlink(RUNNING, dir_fd=fd)
        except FileNotFoundError:
            return False
        os.fsync(fd)
    return True


def _open_marks(root: str, slug: str, create: bool) -> int:
    """A descriptor of ``lanes/SLUG/.qwenstorm``: each level is created
    (with ``create``) and entered without following a symbolic link (a lane
    may have planted one); an ``OSError`` names the one that is not a
    directory. The caller closes it."""
    import errno

    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        path = root
        for name in (LANES, slug, MARKS):
            path = os.path.join(path, name)
            if create:
                make_dir(name, fd)
            try:
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise OSError(exc.errno, f"{path} is not a directory (a symbolic link?); nothing is written through it") from None
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


class _marks:  # noqa: N801 -- used as the function it was: ``with _marks(root, slug) as fd:``
    """``with _marks(root, slug, create) as fd``: the descriptor of
    ``lanes/SLUG/.qwenstorm`` (see ``_open_marks``), closed after the block."""

    def __init__(self, root: str, slug: str, create: bool = True):
        self.fd = _open_marks(root, slug, create)

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def say(root: str, at: str, words: str, owner: tuple[int, int] | None) -> bool:
    """Append one stamped line to ``progress.log``; outside text in ``words``
    must already be quoted. ``owner`` is the storm's owner when the caller is
    another account, which never creates the file. Returns whether the line
    was written."""
    words = printable(words)
    path = os.path.join(root, PROGRESS)
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
    try:
        if owner is None:
            fd = open_file(path, flags | os.O_CREAT)
        else:
            fd = open_file(path, flags)
    except OSError:
        return False
    try:
        write_all(fd, f"{at} storm-queue: {words}\n".encode("utf-8"))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


class SaidOnce:
    """The keys of what ``next`` has already said in ``progress.log``,
    kept beside the log as ``.<log name>.said``."""

    def __init__(self, log_path: str):
        self.path = beside(log_path, "said")
        self._keys: set[str] | None = None

    def keys(self, reload: bool = False) -> set[str]:
        """The keys said so far; ``reload`` reads them again (under the lock)."""
        if self._keys is None or reload:
            try:
                with os.fdopen(open_file(self.path), encoding="utf-8", errors="replace") as f:
                    self._keys = {line.rstrip("\n") for line in f}
            except FileNotFoundError:
                self._keys = set()
            except OSError as exc:
                raise unreadable(self.path, exc) from None
        return self._keys

    def add(self, keys: list[str]) -> None:
        if not keys:
            return
        fd = open_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, "".join(k + "\n" for k in keys).encode())
        finally:
            os.close(fd)
        self.keys().update(keys)


def changed(path: str) -> str:
    """The stamp of the file's last change ('' when it cannot be looked at)."""
    from ...core.clock import stamp

    try:
        return stamp(os.stat(path).st_mtime)
    except OSError:
        return ""


def leased_results(root: str, led: Ledgers, state: LaneState) -> dict[str, int | None]:
    """The tokens of the ``result.json`` files of lanes that hold a lease:
    the only results whose author matters (see ``resolver``)."""
    return result_tokens(root, [s for s, r in state.runs.items() if r.lease is not None and s in led.finished])

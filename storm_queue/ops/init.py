"""``storm-queue init``: create a storm that works at once, owned by the
caller, durable, and never over anything that exists."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..core.errors import InitRefused, StormError
from ..core.names import quote
from ..store.directory import ledger
from ..store.directory.accounts import account_name
from ..store.directory.fsutil import fsync_dir, write_all

QUEUE = "queue.txt"
DECLARATION = "storm.toml"
FILE_MODE = 0o644
DIR_MODE = 0o755


@dataclass(frozen=True)
class Created:
    """What ``init`` made: the absolute root and the files, in creation order."""

    root: str
    files: tuple[str, ...]
    made_root: bool


def example_declaration() -> str:
    """The text of ``storm.toml.example``, shipped inside the package (the
    wheel force-includes it), else read from the repository's root."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package: ops/ is in it
    for path in (os.path.join(here, "storm.toml.example"), os.path.join(os.path.dirname(here), "storm.toml.example")):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            continue
    raise StormError("the bundled storm.toml.example is missing; reinstall storm-queue")


_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\s*=")


def declaration_text(example: str) -> str:
    """A new storm's ``storm.toml``: the example with every setting commented
    out, so a new storm declares no source and keeps every default until the
    operator says otherwise."""
    return "".join("# " + line if _SETTING.match(line) else line for line in example.splitlines(keepends=True))


def contents() -> dict[str, bytes]:
    """Each file a new storm gets, by name, in creation order."""
    return {
        QUEUE: b"",
        ledger.INTEGRATED: b"",
        ledger.ABANDONED: b"",
        DECLARATION: declaration_text(example_declaration()).encode("utf-8"),
    }


def create(directory: str) -> Created:
    """Create a storm in ``directory`` (made 0755 when missing): its files
    0644 and the directory 0755 whatever the umask, each file and the
    directory fsynced. Raises ``InitRefused`` naming every file that exists
    (or why the directory cannot be a storm) before writing anything."""
    from ..roots import absolute

    if directory == "":
        raise InitRefused("the directory given is empty (an unset shell variable?): name the directory, or give "
                          "none to make the storm in the working directory")
    root = absolute(directory, InitRefused, "cd elsewhere, or name the directory by an absolute path")
    files = contents()
    made_root = False
    try:
        st = os.stat(root)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InitRefused(f"{quote(root)} cannot be used ({exc.strerror})") from None
    if st is not None:
        import stat

        if not stat.S_ISDIR(st.st_mode):
            raise InitRefused(f"{quote(root)} exists and is not a directory; name a directory for the storm")
        if st.st_uid != os.geteuid():
            raise InitRefused(f"{quote(root)} is owned by {account_name(st.st_uid)}, not by you "
                              f"({account_name(os.geteuid())}); a storm's root must be its operator's")
        existing = [name for name in files if os.path.lexists(os.path.join(root, name))]
        if existing:
            raise InitRefused(f"{quote(root)} already holds {', '.join(existing)}; init never overwrites "
                              "a file, so nothing was written (move them away, or use the storm that is there)")
    else:
        try:
            os.mkdir(root, DIR_MODE)
        except FileNotFoundError:
            raise InitRefused(f"the parent of {quote(root)} does not exist; create it first") from None
        except OSError as exc:
            raise InitRefused(f"{quote(root)} cannot be created ({exc.strerror})") from None
        made_root = True
    try:
        os.chmod(root, DIR_MODE)
    except OSError as exc:
        if made_root:
            os.rmdir(root)
        raise InitRefused(f"{quote(root)} cannot be made a storm's root ({exc.strerror}); nothing was written") from None
    written: list[str] = []
    try:
        for name, data in files.items():
            _write_new(os.path.join(root, name), data)
            written.append(name)
    except OSError as exc:
        for name in written:
            os.unlink(os.path.join(root, name))
        if made_root:
            os.rmdir(root)
        raise InitRefused(f"could not create {quote(os.path.join(root, name))} ({exc.strerror}); nothing was kept") from None
    fsync_dir(root)
    if made_root:
        fsync_dir(os.path.dirname(root))
    return Created(root, tuple(written), made_root)


def _write_new(path: str, data: bytes) -> None:
    """Create ``path`` (never over an existing file or link), mode 0644 whatever
    the umask, with ``data``, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)

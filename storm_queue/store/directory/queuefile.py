"""The ``queue.txt`` grammar: one lane a line, ``<slug> <issue> [deps]``,
where ``-`` is no issue, and, as the whole dependency list, no dependency.

Parsing never drops a line silently: every line that is not a lane, a blank
or a comment comes back as ``Skipped`` with the reason in words.
"""

from __future__ import annotations

import os

from ...core.errors import unreadable
from .fsutil import fsync_dir, write_all
from ...core.names import is_issue, is_name, quote, why_not_name
from ...core.records import dataclass


@dataclass(frozen=True)
class Lane:
    slug: str
    issue: str
    deps: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Skipped:
    line: int
    text: str
    why: str


@dataclass(frozen=True)
class QueueFile:
    lanes: tuple[Lane, ...]
    skipped: tuple[Skipped, ...]
    exists: bool = True
    ends_with_newline: bool = True


#: a dependency list of this one word is none, as ``-`` is no issue
NO_DEPS = "-"


def split_deps(text: str) -> tuple[str, ...]:
    """Split a dependency list written with commas and/or whitespace; ``-``
    alone is no dependency."""
    deps = tuple(text.replace(",", " ").split())  # runs of commas and whitespace (str.isspace's) split
    return () if deps == (NO_DEPS,) else deps


def _lane(fields: list[str], number: int) -> Lane | str:
    """A lane from a line's fields, or why the line is not one."""
    slug = fields[0]
    if not is_name(slug):
        return f"slug {quote(slug)} is not a name: {why_not_name(slug)}"
    if len(fields) < 2:
        return f"lane {slug} has no issue (write '-' for none)"
    issue = fields[1]
    if not is_issue(issue):
        return f"issue {quote(issue)} is not ASCII digits or '-'"
    deps = split_deps(" ".join(fields[2:]))
    for dep in deps:
        if dep == NO_DEPS:
            return f"'{NO_DEPS}' means no dependencies, so it cannot stand among them"
        if not is_name(dep):
            return f"dependency {quote(dep)} is not a name: {why_not_name(dep)}"
    return Lane(slug, issue, tuple(dict.fromkeys(deps)), number)


def parse(text: str) -> QueueFile:
    """Parse ``queue.txt`` text into lanes in file order and skipped lines."""
    lanes: list[Lane] = []
    skipped: list[Skipped] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lane = _lane(line.split(), number)
        if isinstance(lane, str):
            skipped.append(Skipped(number, raw, lane))
        elif lane.slug in seen:
            skipped.append(Skipped(number, raw, f"duplicate of line {seen[lane.slug]}: the first line is kept"))
        else:
            seen[lane.slug] = number
            lanes.append(lane)
    return QueueFile(tuple(lanes), tuple(skipped), True, text == "" or text.endswith("\n"))


def read(path: str) -> QueueFile:
    """Read and parse ``queue.txt``; a missing file is an empty queue."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return QueueFile((), (), exists=False)
    except OSError as exc:
        raise unreadable(path, exc) from None
    return parse(raw.decode("utf-8", "replace"))


def format_line(slug: str, issue: str, deps: tuple[str, ...]) -> str:
    """The ``queue.txt`` line for a lane, newline included."""
    return " ".join([slug, issue] + ([",".join(deps)] if deps else [])) + "\n"


def append_line(path: str, line: str) -> None:
    """Append one whole line to ``queue.txt`` (starting a new line when the
    file has no final newline), and make it durable before returning. On an
    I/O error, what was written of the line is cut back off (a part of a line
    could read as a lane of another issue), and the error raised."""
    created = False
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        created = True
    try:
        size = os.fstat(fd).st_size
        data = line.encode("utf-8")
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError:
            _cut_back(fd, size, size + len(data))
            raise
    finally:
        os.close(fd)
    if created:
        fsync_dir(os.path.dirname(path) or ".")


def _cut_back(fd: int, size: int, most: int) -> None:
    """Cut ``queue.txt`` back to ``size`` unless something other than our
    write made it longer than ``most`` (a hand edit is never cut)."""
    try:
        if os.fstat(fd).st_size <= most:
            os.ftruncate(fd, size)
            os.fsync(fd)
    except OSError:
        pass

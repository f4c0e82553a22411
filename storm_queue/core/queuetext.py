"""The ``queue.txt`` grammar: one lane a line, ``<slug> <issue> [deps]``,
where ``-`` is no issue, and, as the whole dependency list, no dependency.

Parsing never drops a line silently: every line that is not a lane, a blank
or a comment comes back as ``Skipped`` with the reason in words. Pure: the
text comes in; the directory store reads and appends the file
(``store.directory.queuefile``).
"""

from __future__ import annotations

from .names import clipped, is_issue, is_name, quote, why_not_issue, why_not_name
from .records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator


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


def lane(fields: list[str], number: int) -> Lane | tuple[str, str]:
    """A lane from a line's fields (``number`` is its line), or why the line
    is not one: ``(code, words)``, the code a request refuses such a line with."""
    slug = fields[0]
    if not is_name(slug):
        return "invalid_slug", f"slug {quote(clipped(slug))} is not a name: {why_not_name(slug)}"
    if len(fields) < 2:
        return "invalid_issue", f"lane {slug} has no issue (write '-' for none)"
    issue = fields[1]
    if not is_issue(issue):
        return "invalid_issue", f"issue {quote(clipped(issue))} {why_not_issue(issue)}"
    deps = split_deps(" ".join(fields[2:]))
    for dep in deps:
        if dep == NO_DEPS:
            return "invalid_dependency", f"'{NO_DEPS}' means no dependencies, so it cannot stand among them"
        if not is_name(dep):
            return "invalid_dependency", f"dependency {quote(clipped(dep))} is not a name: {why_not_name(dep)}"
    return Lane(slug, issue, tuple(dict.fromkeys(deps)), number)


#: the byte order mark, as a character: ignored at the start of a storm's text files
BOM = "\ufeff"


def lines(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """Each line of ``text`` that is not blank nor a comment: its number,
    its text as written and its fields. A UTF-8 byte order mark before the
    first line (which Windows editors write) is not part of it, and a line
    may end in CRLF."""
    for number, raw in enumerate(text.removeprefix(BOM).split("\n"), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, raw, line.split()


def parse(text: str) -> QueueFile:
    """Parse ``queue.txt`` text into lanes in file order and skipped lines."""
    lanes: list[Lane] = []
    skipped: list[Skipped] = []
    seen: dict[str, int] = {}
    for number, raw, fields in lines(text):
        found = lane(fields, number)
        if isinstance(found, tuple):
            skipped.append(Skipped(number, clipped(raw), found[1]))
        elif found.slug in seen:
            skipped.append(Skipped(number, clipped(raw), f"duplicate of line {seen[found.slug]}: the first line is kept"))
        else:
            seen[found.slug] = number
            lanes.append(found)
    text = text.removeprefix(BOM)
    return QueueFile(tuple(lanes), tuple(skipped), True, text == "" or text.endswith("\n"))


def format_line(slug: str, issue: str, deps: tuple[str, ...]) -> str:
    """The ``queue.txt`` line for a lane, newline included."""
    return " ".join([slug, issue] + ([",".join(deps)] if deps else [])) + "\n"

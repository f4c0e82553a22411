"""The log view: which recorded events a reader asked for (``Filter``), and
the walk that streams them oldest first without holding the log. The lines
come from ``log.reader`` with every check it makes; nothing here parses."""

from __future__ import annotations

import re
import sys
from collections import deque
from datetime import datetime, timezone

from ..core.errors import UnknownOrder
from ..core.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)

SINCE_FORMS = "a date (2026-11-30, midnight UTC) or an RFC 3339 time with its offset (2026-11-30T14:05:00Z, 2026-11-30T15:05:00+01:00)"


def parse_since(text: str) -> datetime:
    """The moment ``text`` names: ``YYYY-MM-DD`` (midnight UTC) or an RFC 3339
    time with seconds and a ``Z`` or ``+HH:MM`` offset. Raise ``ValueError``
    saying which forms are accepted for anything else."""
    try:
        if _DATE.fullmatch(text):
            return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        if _RFC3339.fullmatch(text):
            return datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "Zz" else text)
    except ValueError:
        pass
    raise ValueError(f"{text!r} is not a time; give {SINCE_FORMS}")


def event_time(event: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(event["at"].replace("Z", "+00:00"))
    except ValueError:
        return None


def names(event: dict[str, Any]) -> set[str]:
    """Every lane an event names: its slug, and what it moved or removed."""
    out = set(event.get("moved", ())) | set(event.get("removed", ()))
    if isinstance(event.get("slug"), str):
        out.add(event["slug"])
    return out


@dataclass(frozen=True)
class Filter:
    """Which events to show; an empty criterion lets every event through.

    ``slugs``: the event names one of them (slug, moved or removed).
    ``by``: its principal is one of them, whole (``operator:alice``) or the
    name after the colon (``alice``). ``actions``: its action is one of them,
    or it is a refusal of one of them. ``refused``: refusals only.
    ``since``: recorded at or after that moment.
    """

    slugs: frozenset[str] = frozenset()
    by: frozenset[str] = frozenset()
    actions: frozenset[str] = frozenset()
    refused: bool = False
    since: datetime | None = None

    def matches(self, event: dict[str, Any]) -> bool:
        action = event["action"]
        if self.refused and action != "refused":
            return False
        if self.actions and action not in self.actions and event.get("requested") not in self.actions:
            return False
        if self.by:
            by = event["by"]
            if by not in self.by and by.split(":", 1)[-1] not in self.by:
                return False
        if self.slugs and not (names(event) & self.slugs):
            return False
        if self.since is not None:
            at = event_time(event)
            if at is None or at < self.since:
                return False
        return True


def walk(read: Callable[[Callable[[bytes, dict[str, Any]], None]], Any], flt: Filter,
         last: int | None, emit: Callable[[bytes, dict[str, Any]], None]) -> Any:
    """Stream the events that ``flt`` lets through to ``emit``, oldest
    first; with ``last``, only the last that many (held in a ring of that
    size, never the whole log; a ``last`` beyond any log's length is
    every event). ``read(each)`` is the log read
    (``Storm.history``); its result is returned. On damage, what was read
    before it is emitted, then the ``UnknownOrder`` is raised again."""
    ring: deque | None = deque(maxlen=min(last, sys.maxsize)) if last is not None else None

    def each(line: bytes, event: dict[str, Any]) -> None:
        if flt.matches(event):
            if ring is None:
                emit(line, event)
            else:
                ring.append((line, event))

    try:
        result = read(each)
    except UnknownOrder:
        for line, event in ring or ():
            emit(line, event)
        raise
    for line, event in ring or ():
        emit(line, event)
    return result


def printable_line(line: bytes, event: dict[str, Any]) -> bytes:
    """``line`` as ``log --json`` prints it: the line itself, except a
    ``migrate`` line whose ``to`` holds a password (an earlier release
    recorded one), which is printed with that password shown as ``***``
    (``doctor`` names that line)."""
    if event.get("action") != "migrate" or not isinstance(event.get("to"), str):
        return line
    from ..roots import shown

    masked = shown(event["to"])
    if masked == event["to"]:
        return line
    from ..core.framing import encode

    return encode({**event, "to": masked})

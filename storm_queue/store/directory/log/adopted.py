"""The earlier priority tool's log, which ``storm-queue adopt`` takes over.

Pure: it takes the old log's bytes and its witness's bytes and returns
plain data, or raises ``OldDamage`` naming the line (1-based; 0 when the
fault is the witness's or the file's, not one line's) and the rule broken.

The format, as that tool wrote it and as strictly as it read it:

- one JSON object per line, newline-terminated, ASCII, keys sorted, no key
  twice; every line has ``"v": 1``, ``action``, ``by`` (text) and ``at``
  (text, ``YYYY-MM-DDTHH:MM:SSZ``, a real time), and neither ``seq`` nor
  ``prev``;
- ``push``: ``slug``, ``issue`` (text), ``deps`` (list), ``moved`` (list),
  ``appended`` (bool), and ``noop`` (text) when nothing moved (and only
  then);
- ``bump``: ``slug``, ``issue``, ``deps``, ``moved``, optional ``noop``, no
  ``appended``;
- ``unbump``: ``slug``, optional ``removed`` (list; absent means
  ``[slug]``);
- ``refused``: ``requested`` (push, bump, unbump or reset), ``slug`` (the
  raw request, any text), ``authorised`` (bool), ``reason`` (text);
- ``reset``: ``reason`` (text), ``abandons`` (a whole number), only as
  line 1.

Names (``slug``, ``deps``, ``moved``, ``removed`` of push, bump and unbump)
must be names as ``names.is_name`` says: they become directories and shell
words here. ``reason`` is text wherever it appears. A ``noop`` line moves
nothing. Other keys are kept as the old tool left them and not read.

Replay: push and bump append each slug of ``moved`` not already in the
lane; unbump removes each slug of ``removed``; refused and reset change
nothing. The named set is the slugs pushed or bumped by name (not as a
no-op) and not since un-bumped.

The witness, ``.priority.log.witness``, is ``{"log": NAME, "length": BYTES,
"at": STAMP}``; a log shorter than the witnessed length, or missing while
the witness exists, is damaged.
"""

from __future__ import annotations

import json
import re

from ....core.framing import Malformed, decode, sha256
from ....core.jsoncodec import loads
from ....core.names import is_name
from ....core.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: the old tool's time stamp: ASCII digits only
STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
#: the most of a log's first bytes read to tell its format
HEAD = 64 << 10
OLD_ACTIONS = ("push", "bump", "unbump", "refused", "reset")
REQUESTED = ("push", "bump", "unbump", "reset")


class OldDamage(ValueError):
    """The old log breaks its format: ``rule`` says how, at ``line``
    (1-based; 0 when it is not one line's fault)."""

    def __init__(self, line: int, rule: str):
        super().__init__(f"line {line}: {rule}" if line else rule)
        self.line, self.rule = line, rule


@dataclass(frozen=True)
class Entry:
    """One slug of the replayed lane: whether it is ``named``, and the line
    that put it there (its ``number``, ``by``, ``at``, ``action`` and the
    slug it asked for, ``request``)."""

    slug: str
    named: bool
    by: str
    at: str
    action: str
    request: str
    number: int


@dataclass(frozen=True)
class Replayed:
    """What the old log replays to: the ``lane`` in FIFO order, and the
    file's ``lines``, byte ``length`` and ``sha256``."""

    lane: tuple[Entry, ...]
    lines: int
    length: int
    sha256: str

    def rows(self) -> list[dict[str, Any]]:
        """The lane as the ``adopt`` event carries it."""
        return [{"slug": e.slug, "named": e.named, "by": e.by, "at": e.at, "action": e.action,
                 "for": e.request, "line": e.number} for e in self.lane]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice")
        out[key] = value
    return out


def _object(raw: bytes) -> dict[str, Any]:
    """One ASCII JSON object with no key twice; ``ValueError`` saying why not."""
    if any(b > 0x7F for b in raw):
        raise ValueError("it is not ASCII")
    try:
        value = json.loads(raw.decode("ascii"), object_pairs_hook=_pairs)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"it is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("it is not a JSON object")
    return value


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_stamp(value: Any) -> bool:
    """``YYYY-MM-DDTHH:MM:SSZ`` naming a real time."""
    if not (isinstance(value, str) and STAMP.match(value)):
        return False
    from datetime import datetime  # only a taken-over log's times need it, not a reader's start-up

    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and is_name(v) for v in value)


def check_line(raw: bytes, number: int) -> dict[str, Any]:
    """The event of line ``number`` (its bytes, newline included), checked
    against every rule of the format; ``OldDamage`` naming the first broken."""

    def bad(rule: str) -> OldDamage:
        return OldDamage(number, rule)

    if not raw.endswith(b"\n"):
        raise bad("the line does not end in a newline")
    try:
        event = _object(raw[:-1])
    except ValueError as exc:
        raise bad(str(exc)) from None
    if list(event) != sorted(event):
        raise bad("its keys are not sorted")
    if "seq" in event or "prev" in event:
        raise bad("it has 'seq' or 'prev', which the earlier tool never wrote")
    if type(event.get("v")) is not int or event["v"] != 1:
        raise bad(f"'v' is {json.dumps(event.get('v'))}, not 1")
    action = event.get("action")
    if action not in OLD_ACTIONS or not isinstance(action, str):
        raise bad(f"'action' is {json.dumps(action)}, not one of {', '.join(OLD_ACTIONS)}")
    if not is_text(event.get("by")):
        raise bad("'by' is missing or not text")
    if not is_stamp(event.get("at")):
        raise bad(f"'at' is {json.dumps(event.get('at'))}, not a time YYYY-MM-DDTHH:MM:SSZ")
    if "reason" in event and not is_text(event["reason"]):
        raise bad("'reason' is not text")
    if action in ("push", "bump", "unbump"):
        if not (is_text(event.get("slug")) and is_name(event["slug"])):
            raise bad(f"'slug' is {json.dumps(event.get('slug'))}, not a name")
    if action in ("push", "bump"):
        if not is_text(event.get("issue")):
            raise bad("'issue' is missing or not text")
        for key in ("deps", "moved"):
            if not _names(event.get(key)):
                raise bad(f"'{key}' is missing or not a list of names")
        if "noop" in event:
            if not is_text(event["noop"]):
                raise bad("'noop' is not text")
            if event["moved"]:
                raise bad("it is a no-op ('noop') yet moved lanes")
        elif action == "push" and not event["moved"]:
            raise bad("a push that moved nothing has no 'noop' saying why")
        if action == "push" and not isinstance(event.get("appended"), bool):
            raise bad("'appended' is missing or not a bool")
        if action == "bump" and "appended" in event:
            raise bad("a bump has no 'appended'")
    elif action == "unbump":
        if "removed" in event and not _names(event["removed"]):
            raise bad("'removed' is not a list of names")
    elif action == "refused":
        if event.get("requested") not in REQUESTED or not isinstance(event.get("requested"), str):
            raise bad(f"'requested' is {json.dumps(event.get('requested'))}, not one of {', '.join(REQUESTED)}")
        if "slug" not in event or not (event["slug"] is None or is_text(event["slug"])):
            raise bad("'slug' is missing or not text")
        if not isinstance(event.get("authorised"), bool):
            raise bad("'authorised' is missing or not a bool")
        if not is_text(event.get("reason")):
            raise bad("'reason' is missing or not text")
    else:  # reset
        if number != 1:
            raise bad("a reset is valid only as line 1")
        if not is_text(event.get("reason")):
            raise bad("'reason' is missing or not text")
        if not is_count(event.get("abandons")):
            raise bad("'abandons' is missing or not a whole number")
    return event


@dataclass(frozen=True)
class OldWitness:
    log: str
    length: int
    at: str


def check_witness(raw: bytes, log_name: str) -> OldWitness:
    """The old witness, checked; ``OldDamage`` (line 0) when it is not one."""
    try:
        data = _object(raw[:-1] if raw.endswith(b"\n") else raw)
    except ValueError as exc:
        raise OldDamage(0, f"the witness is not the earlier tool's ({exc})") from None
    if not (is_text(data.get("log")) and is_count(data.get("length")) and is_text(data.get("at"))):
        raise OldDamage(0, "the witness is not the earlier tool's: it needs 'log' (text), 'length' (a whole number) "
                           "and 'at' (text)")
    if data["log"] != log_name:
        raise OldDamage(0, f"the witness is for {json.dumps(data['log'])}, not {json.dumps(log_name)}")
    return OldWitness(data["log"], data["length"], data["at"])


def replay(data: bytes | None, witness: bytes | None, log_name: str) -> Replayed:
    """Check the old log ``data`` (None: there is no log file) against its
    ``witness`` (None: there is none) and every line against the format,
    then replay it. Raises ``OldDamage`` at the first fault."""
    seen = check_witness(witness, log_name) if witness is not None else None
    if data is None:
        if seen is not None:
            raise OldDamage(0, f"the log is missing, but its witness says it held {seen.length} bytes")
        raise OldDamage(0, "there is no log to adopt")
    if seen is not None and len(data) < seen.length:
        raise OldDamage(0, f"the log holds {len(data)} bytes, shorter than the {seen.length} its witness recorded")
    lane: dict[str, tuple[str, str, str, str, int]] = {}
    named: dict[str, None] = {}
    number = 0
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        number += 1
        event = check_line(data[start:end], number)
        start = end
        action = event["action"]
        if action in ("push", "bump"):
            for slug in event["moved"]:
                if slug not in lane:
                    lane[slug] = (event["by"], event["at"], action, event["slug"], number)
            if "noop" not in event:
                named[event["slug"]] = None
        elif action == "unbump":
            for slug in event.get("removed", [event["slug"]]):
                lane.pop(slug, None)
            named.pop(event["slug"], None)
    entries = tuple(Entry(slug, slug in named, *how) for slug, how in lane.items())
    return Replayed(entries, number, len(data), sha256(data).hexdigest())


def looks_old(first_line: bytes, witness: bytes | None) -> bool:
    """Whether the log whose first line (or first bytes) is ``first_line``,
    and whose witness is ``witness``, was written by the earlier tool: its
    first line is an object with ``"v": 1`` and neither ``seq`` nor
    ``prev``, or (no line to tell by) its witness has no ``seq``."""
    line = first_line.split(b"\n", 1)[0]
    if line.strip():
        try:
            event = loads(line)
        except ValueError:
            return False
        return isinstance(event, dict) and event.get("v") == 1 and "seq" not in event and "prev" not in event
    if witness is None:
        return False
    try:
        data = loads(witness)
    except ValueError:
        return False
    return isinstance(data, dict) and "length" in data and "seq" not in data and "digest" not in data


def unwitnessed(data: bytes, witness: bytes | None, kept: Callable[[str], bytes | None]) -> dict[str, Any] | None:
    """The ``adopt`` event of a log that an adopt stopped before its witness
    (see ``ops.adopt``), or None when ``data`` is not such a log: exactly one
    line, an ``adopt`` (not a no-op) with ``seq`` 1, whose witness is not yet
    this tool's, and whose kept file (``kept(name)`` gives its bytes) has
    the sha256 and length the line records."""
    if not data.endswith(b"\n") or data.count(b"\n") != 1:
        return None
    try:
        event = decode(data)
    except Malformed:
        return None
    if event["action"] != "adopt" or event.get("noop") or event["seq"] != 1 or event["prev"] is not None:
        return None
    name, keep = event["name"], event["kept"]
    if not (isinstance(name, str) and isinstance(keep, str) and keep.startswith(f"{name}.adopted-") and "/" not in keep):
        return None
    if witness is not None:
        try:
            seen = loads(witness)
        except ValueError:
            seen = None
        if isinstance(seen, dict) and "seq" in seen:  # this tool's witness: its own rules judge the log
            return None
    old = kept(keep)
    if old is None or len(old) != event["bytes"] or sha256(old).hexdigest() != event["sha256"]:
        return None
    return event

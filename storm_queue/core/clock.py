"""Time as the log writes it: UTC, RFC 3339 with microseconds and ``Z``.

Stamps of this one form compare as strings in time order, so the pure core
compares them without parsing. ``time`` is cheap to import; ``datetime`` is
loaded only to read a time a person typed."""

from __future__ import annotations

import time


def stamp(t: float) -> str:
    """The stamp of the POSIX time ``t``."""
    whole = int(t // 1)
    micro = int(round((t - whole) * 1_000_000))
    if micro == 1_000_000:
        whole, micro = whole + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micro:06d}Z"


def now() -> str:
    """The stamp of this moment."""
    return stamp(time.time())


def seconds(text: str) -> float:
    """The POSIX time of a stamp (``ValueError`` when it is not one)."""
    from datetime import datetime, timezone

    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return moment.timestamp()


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse(text: str, at: float) -> str:
    """The stamp of a time a person typed, relative to the POSIX time ``at``:
    ``now``, ``+N`` with a unit ``s``, ``m``, ``h`` or ``d`` (``+90m``), a
    date (``2026-12-01``, midnight UTC) or RFC 3339 with a zone
    (``2026-12-01T08:00:00Z``, ``2026-12-01T09:00:00+01:00``). Anything
    else raises ``ValueError`` naming the forms."""
    from datetime import datetime, timezone

    word = text.strip()
    forms = "give now, +N with s, m, h or d (+90m), a date (2026-12-01) or RFC 3339 (2026-12-01T08:00:00Z)"
    if word == "now":
        return stamp(at)
    if word[:1] == "+" and word[-1:] in UNITS and word[1:-1].isascii() and word[1:-1].isdigit() and len(word) < 16:
        return _bounded(word, at + int(word[1:-1]) * UNITS[word[-1]])
    try:
        if len(word) == 10 and word.isascii():
            moment = datetime.strptime(word, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        else:
            moment = datetime.fromisoformat(word[:-1] + "+00:00" if word.endswith(("Z", "z")) else word)
            if moment.tzinfo is None or not word.isascii() or "T" not in word.upper():
                raise ValueError
    except (ValueError, OverflowError):
        raise ValueError(f"{word!r} is not a time: {forms}") from None
    return _bounded(word, moment.timestamp())


def _bounded(word: str, t: float) -> str:
    if not 0 <= t < 253402300800:  # 1970 to 9999: stamps compare as strings only there
        raise ValueError(f"{word!r} is out of range (1970 to 9999)")
    return stamp(t)

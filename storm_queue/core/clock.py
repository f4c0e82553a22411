"""Time as the log writes it: UTC, RFC 3339 with microseconds and ``Z``.

Stamps of this one form compare as strings in time order, so the pure core
compares them without parsing. Pure: the time comes in as a number (the
wall clock is read at the edges, ``storm_queue.wall``); ``datetime`` is
loaded only to read a time a person typed."""

from __future__ import annotations


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the day ``days`` after 1970-01-01, in the
    proleptic Gregorian calendar (H. Hinnant's ``civil_from_days``)."""
    z = days + 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, doy - (153 * mp + 2) // 5 + 1


def stamp(t: float) -> str:
    """The stamp of the POSIX time ``t`` (what ``time.strftime`` of its
    UTC time gives, with microseconds)."""
    whole = int(t // 1)
    micro = int(round((t - whole) * 1_000_000))
    if micro == 1_000_000:
        whole, micro = whole + 1, 0
    days, rest = divmod(whole, 86400)
    year, month, day = _civil(days)
    return f"{year:04d}-{month:02d}-{day:02d}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}.{micro:06d}Z"


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the date (H. Hinnant's ``days_from_civil``)."""
    y = year - (month <= 2)
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doe = yoe * 365 + yoe // 4 - yoe // 100 + (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + doe - 719468


def seconds(text: str) -> float:
    """The POSIX time of a stamp (``ValueError`` when it is not one): a stamp
    of the log's one form is read by arithmetic (``datetime.strptime``
    would load ``re``, ``calendar`` and ``locale``: a reader's start-up
    twice over), the same float ``datetime`` gives; anything else is left
    to ``datetime`` to read or refuse."""
    if len(text) == 27 and text.isascii() and text[4] == text[7] == "-" and text[10] == "T" \
            and text[13] == text[16] == ":" and text[19] == "." and text[26] == "Z":
        parts = (text[0:4], text[5:7], text[8:10], text[11:13], text[14:16], text[17:19], text[20:26])
        if all(p.isdigit() for p in parts):
            year, month, day, hour, minute, second, micro = map(int, parts)
            leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
            if year >= 1 and 1 <= month <= 12 and hour < 24 and minute < 60 and second < 60 \
                    and 1 <= day <= (29 if month == 2 and leap else _MONTH_DAYS[month - 1]):
                whole = _days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
                return (whole * 10**6 + micro) / 10**6
    from datetime import datetime, timezone

    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return moment.timestamp()


#: the longest wait any request takes, in seconds (a day): for the writers' lock, for work (claim), for a
#: lease to end (tenure)
WAIT_MOST = 86400


def wait_seconds(value: float) -> float:
    """``value`` as seconds to wait, from 0 to ``WAIT_MOST``; ``BadArgument``
    (exit 2) for anything else (a negative, NaN or longer wait, a bool, or
    no number), so that no wait is endless and none is refused by the server
    after something was recorded."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= WAIT_MOST:  # (NaN: no range)
        return float(value)
    from .errors import BadArgument
    from .names import figure

    said = figure(value) if isinstance(value, int) else repr(value)
    raise BadArgument(f"a wait of {said} seconds: a wait is a number of seconds from 0 to {WAIT_MOST:,}; nothing "
                      "was done")


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

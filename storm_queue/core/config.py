"""``storm.toml``, the operator's reviewed declaration, read into a frozen value.

"There is no declaration" (absent) and "I could not read the declaration"
(unreadable, or a bad ``sources``) are different results, never confused.
Pure: ``parse`` takes the text; the directory store reads the file
(``store.directory.declared``), the database store its row.
"""

from __future__ import annotations

from .names import is_name, quote
from .records import dataclass

DEFAULT_LOG = "priority.log"
RESERVED_SOURCES = frozenset({"operator"})

#: every key storm.toml may hold, by table; anything else is reported by
#: ``doctor`` as unknown (a key storm-queue gains must be added here)
KNOWN = {
    "priority": ("sources", "log", "starving_after"),
    "doctor": ("running_hours",),
    "runner": ("slots", "attempts", "ttl", "ttl_min", "ttl_max", "max_lease_age", "unattended", "retry_delay",
               "retry_max"),
}


@dataclass(frozen=True)
class Policy:
    """``[runner]``: how many lanes may hold a lease at once (``slots``), the
    attempts a lane may spend before it is quarantined, the lease TTL a claim
    gets by default, the window a TTL must fall in, and how long one claim
    may be renewed for in all (seconds); ``unattended``: finished lanes
    wait for a batch review instead of holding the storm (what the
    ``UNATTENDED`` file says on a directory storm; a database storm has no
    such file, so this declared key is how it says it); and the storm's own
    backoff after a failed attempt (``runs.backoff``): a lane whose attempt
    N failed is not claimed again for ``retry_delay * 2**(N-1)`` seconds,
    at most ``retry_max`` (``retry_delay`` 0: claimed again at once)."""

    slots: int = 1
    attempts: int = 3
    ttl: int = 600
    ttl_min: int = 60
    ttl_max: int = 86400
    max_lease_age: int = 14400
    unattended: bool = False
    retry_delay: int = 0
    retry_max: int = 600


@dataclass(frozen=True)
class Declaration:
    """What ``storm.toml`` says.

    ``log_error`` is set when the file cannot be read as TOML (or its ``log``
    key is unusable): the log's place, and so the order, is unknown.
    ``sources_error`` is set when the log's place is known but ``sources`` is
    not a list of names: every request is refused, and the refusal recorded.
    """

    present: bool
    log: str = DEFAULT_LOG
    sources: tuple[str, ...] = ()
    log_error: str | None = None
    sources_error: str | None = None
    #: ``[doctor] running_hours`` when it is given and a positive number
    running_hours: float | None = None
    #: what requests ignore but an operator should fix, as (kind, words):
    #: ``unknown_key``, or ``wrong_type`` for a key storm-queue can do without
    notes: tuple[tuple[str, str], ...] = ()
    stat: object | None = None  # the os.stat_result of the file read: who could have written it
    runner: Policy = Policy()
    #: ``[priority] starving_after`` in seconds: a ready lane waiting longer while others start
    #: ahead of it is shown as starving (None: never; the default)
    starving_after: int | None = None

    @property
    def error(self) -> str | None:
        return self.log_error or self.sources_error


def _log_path(value: object) -> str | None:
    """A log path is relative to the root, made of names, with no ``..``."""
    if not isinstance(value, str):
        return None
    parts = value.split("/")
    return value if all(is_name(p) for p in parts) else None


def read_toml(text: str) -> dict:
    """The TOML ``text`` as tomllib reads it; ``tomllib.TOMLDecodeError``
    for anything it cannot read: not TOML, nested deeper than the reader
    goes (its RecursionError), or an integer longer than Python converts
    (its ValueError). Every reading of a declaration goes through here."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:
        raise tomllib.TOMLDecodeError("arrays or tables are nested too deeply to be read") from None
    except ValueError as exc:  # (an integer of more digits than int() takes)
        raise tomllib.TOMLDecodeError(f"a value cannot be read ({str(exc).split(';')[0]})") from None


def parse(text: str) -> Declaration:
    """Return the declaration that the TOML ``text`` makes (a byte order
    mark before it is not part of it)."""
    import tomllib

    text = text.removeprefix("\ufeff")
    try:
        data = read_toml(text)
    except tomllib.TOMLDecodeError as exc:
        return Declaration(True, log_error=syntax_error(text, str(exc)))
    hours, notes = _audit(data)
    extra = {"running_hours": hours, "notes": notes}
    priority = data.get("priority", {})
    policy = _policy(data.get("runner", {}))
    if isinstance(policy, str):  # the log's place is known, and a refusal of every request can be recorded
        log = _log_path(priority.get("log", DEFAULT_LOG)) if isinstance(priority, dict) else None
        if log is not None:
            return Declaration(True, log, sources_error=policy, **extra)
        policy = Policy()
    extra["runner"] = policy
    if not isinstance(priority, dict):
        return Declaration(True, log_error="storm.toml: [priority] must be a table", **extra)
    log = _log_path(priority.get("log", DEFAULT_LOG))
    if log is None:
        return Declaration(
            True,
            log_error="storm.toml: [priority] log must be a relative path of names, "
            f"such as {DEFAULT_LOG!r}",
            **extra,
        )
    sources = priority.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        return Declaration(True, log, sources_error="storm.toml: [priority] sources must be a list of names", **extra)
    starving = duration(priority.get("starving_after"))
    if isinstance(starving, str):
        return Declaration(True, log, sources_error=f"storm.toml: [priority] starving_after {starving}", **extra)
    extra["starving_after"] = starving
    bad = [s for s in sources if not is_name(s) or s in RESERVED_SOURCES]
    if bad:
        return Declaration(
            True,
            log,
            sources_error=f"storm.toml: [priority] sources lists {bad[0]!r}, which cannot be "
            "declared (a source is a name, and 'operator' is reserved)",
            **extra,
        )
    return Declaration(True, log, tuple(sources), **extra)


#: where tomllib says it stopped (compiled by ``syntax_error``, never on a command's ordinary path)
_AT = r" \((?:at line (\d+), column (\d+)|at end of document)\)$"

#: what a few of the parser's words usually mean, said after them
_HINTS = {
    "Illegal character '\\n'": "a string not closed on its line?",
    "Cannot overwrite a value": "a key given twice?",
}

#: how many characters of storm.toml may be parsed again in all, looking
#: for the line a syntax error's statement starts at (a storm.toml is a
#: few hundred; this bounds the time a pathological file can take)
LOOK_BACK = 200_000


def syntax_error(text: str, parser_says: str) -> str:
    """A storm.toml syntax error in words, at the line the file has it.

    tomllib says where it stopped (``(at line N, column M)``, or ``(at end
    of document)``). That is the wrong line when the statement it stopped in
    began on an earlier line (an array missing a comma or its ``]``, a
    multi-line string not closed): then the statement's first line is found
    (the longest run of whole lines before it that parses) and both are
    named, saying that the mistake lies between them."""
    import re
    import tomllib

    found = re.search(_AT, parser_says)
    what = parser_says[: found.start()] if found else parser_says
    if what in _HINTS:
        what += f" ({_HINTS[what]})"
    if found is None:
        return f"storm.toml is not valid TOML: {what}"
    lines = text.split("\n")
    if found.group(1):
        stop, where = int(found.group(1)), f"line {found.group(1)}, column {found.group(2)}"
    else:  # the last line that holds anything
        stop, where = max((n for n, line in enumerate(lines, 1) if line.strip()), default=1), "the end of the file"
    start, budget = None, LOOK_BACK
    for first in range(stop, 0, -1):
        prefix = "".join(line + "\n" for line in lines[: first - 1])
        budget -= len(prefix)
        if budget < 0:
            break
        try:
            read_toml(prefix)
        except tomllib.TOMLDecodeError:
            continue
        start = first
        break

    def shown(number: int) -> str:
        return quote(lines[number - 1].removesuffix("\r"))

    if start == stop and found.group(1):
        return f"storm.toml is not valid TOML: line {stop}, column {found.group(2)}: {what}: {shown(stop)}"
    if start == stop:
        return (f"storm.toml is not valid TOML: {what} at the end of the file: the statement at line {stop} "
                f"({shown(stop)}) is not finished (a missing bracket or closing quote?)")
    if start is None:
        return (f"storm.toml is not valid TOML: {what} at {where}, where the parser stopped; the mistake may be "
                "on an earlier line, inside a value that starts above it")
    return (f"storm.toml is not valid TOML: {what} at {where}, inside the statement that starts at line {start} "
            f"({shown(start)}): the mistake is on one of lines {start} to {stop} (a missing comma, "
            f"bracket or closing quote?), not necessarily where the parser stopped")


#: no [runner] value may exceed ten years (in seconds): a lease's expiry
#: stays a stamp that compares as a string (years up to 9999)
RUNNER_MAX = 10 * 366 * 86400


def unrecordable(data: dict) -> str | None:
    """Why the parsed declaration ``data`` cannot be recorded in a log line
    as JSON that every reader and the database's insert check read back
    (a number that is not finite: JSON has none; a NUL character, which a
    database's text cannot hold), naming the key (quoted); None when it
    can."""
    from .names import quote

    def find(value: object, path: tuple) -> str | None:
        where = quote(".".join(str(k) for k in path))
        if isinstance(value, float) and not -float("inf") < value < float("inf"):
            return f"{where} is {value}, a number JSON cannot hold: write a finite number"
        if isinstance(value, str) and "\x00" in value:
            return f"{where} holds a NUL character, which a database storm cannot carry"
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, inner in items:
            if isinstance(key, str) and "\x00" in key:
                inside = f" in {where}" if path else ""
                return f"a key{inside} holds a NUL character, which a database storm cannot carry"
            why = find(inner, (*path, key))
            if why:
                return why
        return None

    return find(data, ())


def duration(value: object) -> int | None | str:
    """A duration as storm.toml gives it (``"90s"``, ``"30m"``, ``"6h"``,
    ``"2d"``: a whole number with a unit) in seconds; None when not given,
    else what is wrong with it in words."""
    from .clock import UNITS

    if value is None:
        return None
    text = value if isinstance(value, str) else ""
    number, unit = text[:-1], text[-1:]
    if not (unit in UNITS and number.isascii() and number.isdigit() and len(number) <= 12 and int(number) > 0):
        return (f"must be a duration: a whole number above 0 with s, m, h or d, such as \"6h\" "
                f"(not {quote(str(value))})")
    seconds = int(number) * UNITS[unit]
    return seconds if seconds <= RUNNER_MAX else f"must be at most {RUNNER_MAX // 86400} days"


def _policy(table: object) -> Policy | str:
    """``[runner]`` as a ``Policy``, or what is wrong with it in words."""
    if not isinstance(table, dict):
        return "storm.toml: [runner] must be a table"
    values = {}
    for name in KNOWN["runner"]:
        value = table.get(name, getattr(Policy, name))
        if name == "unattended":
            if not isinstance(value, bool):
                return "storm.toml: [runner] unattended must be true or false"
            values[name] = value
            continue
        least = 0 if name == "retry_delay" else 1  # no delay at all is a retry_delay
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= RUNNER_MAX:
            return f"storm.toml: [runner] {name} must be a whole number from {least} to {RUNNER_MAX}"
        values[name] = value
    policy = Policy(**values)
    if not policy.ttl_min <= policy.ttl <= min(policy.ttl_max, policy.max_lease_age):
        return "storm.toml: [runner] needs ttl_min <= ttl <= ttl_max, and ttl <= max_lease_age"
    return policy


def _audit(data: dict) -> tuple[float | None, tuple[tuple[str, str], ...]]:
    """``[doctor] running_hours`` (None unless a positive number) and, in
    words, every key that ``KNOWN`` does not list and every wrong-typed key
    that requests can do without. Outside text (a key) is quoted."""
    from .names import quote

    notes = []
    for table, value in data.items():
        if table not in KNOWN:
            what = "table" if isinstance(value, dict) else "key"
            notes.append(("unknown_key", f"unknown {what} {quote(table)}; storm-queue does not read it (a typo?)"))
        elif isinstance(value, dict):
            notes += [("unknown_key", f"unknown key {quote(key)} in [{table}]; storm-queue does not read it (a typo?)")
                      for key in value if key not in KNOWN[table]]
    doctor = data.get("doctor", {})
    if not isinstance(doctor, dict):
        notes.append(("wrong_type", "[doctor] must be a table; doctor uses its defaults"))
        return None, tuple(notes)
    hours = doctor.get("running_hours")
    if hours is None:
        return None, tuple(notes)
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0:
        notes.append(("wrong_type", "[doctor] running_hours must be a positive number of hours; doctor uses its default"))
        return None, tuple(notes)
    return float(hours), tuple(notes)

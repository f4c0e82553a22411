"""One event, one line: the JSON framing, the schema of each action and the
SHA-256 chain that links every line to the one before it."""

from __future__ import annotations

from .jsoncodec import COMPACT, dumps, loads

try:  # the interpreter's own SHA-256 loads in a tenth of the time hashlib (OpenSSL) takes
    from _sha256 import sha256
except ImportError:  # pragma: no cover -- Python 3.12 renamed it
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

VERSION = 1
ACTIONS = ("push", "bump", "unbump", "refused", "reset", "repair",
           "claim", "renew", "finish", "expire", "recover", "quarantine", "unpark", "schedule",
           "init", "declare", "add", "settle", "migrate", "adopt", "waive", "halt", "resume", "upgrade",
           "grant", "revoke", "release", "cancel", "hold", "unhold")

_STR, _INT, _BOOL, _LIST, _OPT_STR, _OPT_INT, _OBJ = "str", "int", "bool", "list", "str?", "int?", "object"
_ROWS = "lane rows"  # an adopt's lane: objects naming a slug, whether it is named, and the old line's by and at
_COMMON = {"v": _INT, "seq": _INT, "at": _STR, "action": _STR, "by": _STR}
_LANE = {"slug": _STR, "issue": _STR, "deps": _LIST, "moved": _LIST, "removed": _LIST}
SCHEMA: dict[str, dict[str, str]] = {
    "push": {**_LANE, "appended": _BOOL},
    "bump": dict(_LANE),
    "unbump": {"slug": _STR, "moved": _LIST, "removed": _LIST},
    "refused": {"requested": _STR, "slug": _OPT_STR, "code": _STR, "message": _STR, "authorised": _BOOL},
    "reset": {"reason": _STR, "abandons": _INT},
    "repair": {"torn": _INT, "side": _STR},
    "claim": {"slug": _STR, "issue": _STR, "holder": _STR, "token": _INT, "ttl": _INT, "expires": _STR, "attempt": _INT},
    "renew": {"slug": _STR, "token": _INT, "ttl": _INT, "expires": _STR},
    "finish": {"slug": _STR, "token": _INT, "result": _STR},
    "expire": {"slug": _STR, "token": _INT, "expired": _STR},
    "recover": {"slug": _STR, "token": _OPT_INT, "marker": _BOOL},
    "quarantine": {"slug": _STR, "attempts": _INT, "budget": _INT},
    "unpark": {"slug": _STR, "reason": _STR},
    "schedule": {"slug": _STR, "not_before": _OPT_STR},
    "init": {"storm": _STR, "operator": _STR},
    "declare": {"sha256": _STR, "declaration": _OBJ},
    "add": {"slug": _STR, "issue": _STR, "deps": _LIST, "appended": _BOOL},
    "settle": {"slug": _STR, "ledger": _STR},
    "migrate": {"to": _STR},
    # the earlier tool's log taken over (see log/adopted.py); a no-op carries nulls and an empty lane
    "adopt": {"name": _OPT_STR, "kept": _OPT_STR, "sha256": _OPT_STR, "bytes": _OPT_INT, "lines": _OPT_INT,
              "lane": _ROWS},
    "waive": {"slug": _STR, "dep": _STR, "undo": _BOOL, "moved": _LIST, "removed": _LIST},
    "halt": {"reason": _STR},
    "resume": {"reason": _STR},
    "upgrade": {"from": _INT, "to": _INT},  # a database storm's schema, carried from one version to another
    "grant": {"kind": _STR, "role": _STR},  # a database role admitted as a runner or a reader
    "revoke": {"kind": _STR, "role": _STR},
    "release": {"slug": _STR, "token": _INT, "holder": _STR},  # the holder gave its live lease back (issue 20 item 6)
    "cancel": {"slug": _STR, "token": _OPT_INT},  # the lane settled abandoned; the lease of token revoked (item 7)
    "hold": {"slug": _STR, "reason": _STR},  # the lane is not started until unhold (issue 33 item 3)
    "unhold": {"slug": _STR, "reason": _STR},
}
#: the optional fields of any action: ``not_before`` is a push's schedule, and a failed finish's backoff (the
#: storm's own retry delay, ``[runner] retry_delay``); ``carried``, a migrate's: what it carried in a form of the
#: database's own
OPTIONAL = {"reason": _STR, "noop": _STR, "key": _STR, "fingerprint": _STR, "note": _STR, "not_before": _OPT_STR,
            "carried": _LIST}
#: the optional fields of one action alone: a reset --keep-intact's (issue 20 item 4) name the old log kept
#: aside, the lines of it the new log begins with, the last of those lines' digest and the bytes lost
OPTIONAL_OF = {"reset": {"abandoned": _OPT_STR, "kept": _INT, "kept_digest": _OPT_STR, "lost": _INT},
               "recover": {"force": _BOOL},  # a recover's that ended a live lease (issue 20 item 6)
               "upgrade": {"rederived": _INT}}  # the lines an upgrade folded the server's tables from again (issue 30)
#: the fields of each action that hold lane names (a name becomes a directory and a shell word)
NAMED = {"push": ("slug", "moved", "removed", "deps"), "bump": ("slug", "moved", "removed", "deps"),
         "unbump": ("slug", "moved", "removed"), "claim": ("slug", "holder"), "add": ("slug", "deps"),
         "init": (), "declare": (), "migrate": (), "adopt": (),  # an adopt's names are checked in its rows
         "waive": ("slug", "dep", "moved", "removed"), "halt": (), "resume": (), "upgrade": (),
         "grant": (), "revoke": (), "release": ("slug", "holder")}


#: the actions whose token is always a positive number
_TOKEN_ACTIONS = ("claim", "renew", "finish", "expire", "release")


class Malformed(ValueError):
    """A line that is not a well-formed version-1 event."""


def digest(line: bytes) -> str:
    """The chain digest of a line: lowercase hex SHA-256 of its bytes,
    newline included."""
    return sha256(line).hexdigest()


def encode(event: dict[str, Any]) -> bytes:
    """One event as one ASCII JSON line ending in a newline; outside text can
    only ever be a JSON string inside it."""
    return (dumps(event, separators=COMPACT) + "\n").encode("ascii")


def _is(value: Any, kind: str) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _OPT_STR:
        return value is None or isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _OPT_INT:
        return value is None or (isinstance(value, int) and not isinstance(value, bool))
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _OBJ:
        return isinstance(value, dict)
    if kind == _ROWS:
        return _rows_ok(value)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_ROW = {"slug": str, "named": bool, "by": str, "at": str, "action": str, "for": str, "line": int}


def _rows_ok(value: Any) -> bool:
    """An adopt's ``lane``: a list of distinct slugs, each an object with
    exactly the fields of ``_ROW``, of their kinds, its slugs names."""
    from .names import is_name

    if type(value) is not list:
        return False
    seen = set()
    for row in value:
        if not (type(row) is dict and row.keys() == _ROW.keys() and all(type(row[k]) is t for k, t in _ROW.items())
                and is_name(row["slug"]) and is_name(row["for"]) and row["slug"] not in seen):
            return False
        seen.add(row["slug"])
    return True


#: the principals a line may name (core/authority.py, the database's runners), each before a colon; a lane
#: process is ``lane:`` and its value as a JSON string
_PRINCIPALS = ("operator", "source", "account", "runner")


def is_stamp(at: Any) -> bool:
    """Whether ``at`` is written as the log writes a time
    (``YYYY-MM-DDTHH:MM:SS.ffffffZ``, core/clock.py ``stamp``; the
    database's insert check reads it the same way). String methods: it is
    asked of every line."""
    return (type(at) is str and len(at) == 27 and at[4:20:3] == "--T::." and at[26] == "Z" and at.isascii()
            and at[:26].replace("-", "0").replace("T", "0").replace(":", "0").replace(".", "0").isdigit())


def is_principal(by: Any) -> bool:
    """Whether ``by`` names a principal: ``operator:``, ``source:``,
    ``account:`` or ``runner:`` and what it is called (a refused
    ``--source ''`` is recorded as ``source:``), or ``lane:`` and a JSON
    string."""
    if type(by) is not str:
        return False
    kind, colon, rest = by.partition(":")
    if not colon:
        return False
    if kind == "lane":
        try:
            if type(loads(rest)) is not str:
                return False
        except ValueError:
            return False
        return True
    return kind in _PRINCIPALS


def decode(line: bytes) -> dict[str, Any]:
    """Parse and check one line (newline included); raise ``Malformed``
    saying what is wrong."""
    try:
        event = loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Malformed(f"not JSON ({exc})") from None
    if not isinstance(event, dict):
        raise Malformed("not a JSON object")
    if event.get("v") != VERSION:
        raise Malformed(f"unknown format version {event.get('v')!r} (this storm-queue reads {VERSION})")
    action = event.get("action")
    if not isinstance(action, str) or action not in SCHEMA:  # a list is no action (and not hashable)
        raise Malformed(f"unknown action {action!r}")
    for fields in (_COMMON, SCHEMA[action]):
        for name, kind in fields.items():
            if name not in event or not _is(event[name], kind):
                raise Malformed(f"field {name!r} is missing or not a {kind}")
    for name, kind in (*OPTIONAL.items(), *OPTIONAL_OF.get(action, {}).items()):
        if name in event and not _is(event[name], kind):
            raise Malformed(f"field {name!r} is not a {kind}")
    if not is_stamp(event["at"]):
        raise Malformed(f"field 'at' holds {dumps(event['at'])[:80]}, which is not a time as the log writes one "
                        "(YYYY-MM-DDTHH:MM:SS.ffffffZ)")
    if not is_principal(event["by"]):
        raise Malformed(f"field 'by' holds {dumps(event['by'])[:80]}, which is not a principal (operator:, source:, "
                        "account: or runner: and a name, or lane: and a JSON string)")
    if action not in ("refused", "reset", "repair"):  # a name enters the lane, a directory and a shell only as a name
        from .names import is_name

        for name in NAMED.get(action, ("slug",)):
            value = event.get(name, [])
            bad = [v for v in ([value] if isinstance(value, str) else value) if not is_name(v)]
            if bad:
                raise Malformed(f"field {name!r} holds {dumps(bad[0])}, which is not a name")
    if action in _TOKEN_ACTIONS and event["token"] < 1:
        raise Malformed("field 'token' is not a positive number")
    if action == "settle" and event["ledger"] not in ("integrated", "abandoned"):
        raise Malformed("field 'ledger' is neither 'integrated' nor 'abandoned'")
    if action == "finish" and event["result"] not in ("ok", "failed"):
        raise Malformed("field 'result' is neither 'ok' nor 'failed'")
    if action == "adopt" and "noop" not in event and event["seq"] != 1:
        raise Malformed("an adopt that took a log over is valid only as line 1")
    prev = event.get("prev", "missing")
    if prev is not None and not (isinstance(prev, str) and len(prev) == 64):
        raise Malformed("field 'prev' is not null or a SHA-256 digest")
    return event


# -- the same rules, compiled for a reader of many lines ----------------------
#
# ``decode`` reads like the rules it applies; a reader of a whole log asks
# the same question a million times. ``QUICK`` compiles, from the same tables,
# one plain expression per action that says whether ``decode`` (and the
# chain) would accept an already parsed event of that action. It only ever
# says yes when they would; any other line is given to ``decode``, which
# says what is wrong.

_TEST = {_STR: "type({v}) is str", _OPT_STR: "({v} is None or type({v}) is str)",
         _INT: "type({v}) is int", _OPT_INT: "({v} is None or type({v}) is int)",
         _BOOL: "type({v}) is bool", _LIST: "type({v}) is list and all(type(item) is str for item in {v})",
         _OBJ: "type({v}) is dict", _ROWS: "_rows_ok({v})"}


def _learn(values: Any, known: set[str]) -> bool:
    """True when ``values`` is a list (or tuple) of names; they join ``known``."""
    from .names import is_name

    if not all(type(v) is str and is_name(v) for v in values):
        return False
    if len(known) > 1 << 16:  # bounded: a log of many names costs a little time, never memory
        known.clear()
    known.update(values)
    return True


def _optional_fit(event: dict[str, Any]) -> bool:
    """The optional fields ``event`` has are of their kind."""
    for name, kind in (*OPTIONAL.items(), *OPTIONAL_OF.get(event["action"], {}).items()):
        if name in event and not _is(event[name], kind):
            return False
    return True


def _compile(action: str) -> Callable[..., bool]:
    """The ``fits`` of one action (see ``QuickChecks``): one expression over
    the fields unpacked at once, as few steps as the rules allow."""
    from operator import itemgetter

    fields = {**_COMMON, **SCHEMA[action]}
    del fields["action"]  # the caller found this check by it
    order = [*fields, "prev"]
    x = {name: f"x{i}" for i, name in enumerate(order)}
    named = NAMED.get(action, ("slug",)) if action not in ("refused", "reset", "repair") else ()
    at, by = x["at"], x["by"]  # is_stamp and is_principal, inlined: they are asked of every line
    tests = [f"{x['v']} == {VERSION}", f"{x['seq']} == seq", f"{x['prev']} == prev",
             f"type({at}) is str and len({at}) == 27 and {at}[4:20:3] == '--T::.' and {at}[26] == 'Z' and {at}.isascii()"
             f" and {at}[:26].replace('-', '0').replace('T', '0').replace(':', '0').replace('.', '0').isdigit()",
             f"(type({by}) is str and {by}.startswith(_BY) or _principal({by}))"]
    texts, names, name_lists = [], [], []
    for name, kind in fields.items():
        v = x[name]
        if name in named:  # a name is text, so the look in ``known`` checks its kind too
            (names if kind == _STR else name_lists).append(v)
        elif kind == _STR:
            texts.append(v)
        else:
            tests.append(_TEST[kind].format(v=v))
        if name in OPTIONAL and OPTIONAL[name] != kind:
            tests.append(_TEST[OPTIONAL[name]].format(v=v))
    tests += [f"type({v}) is str" for v in texts]
    if name_lists:
        tests += [f"type({v}) is list" for v in name_lists]
    if names or name_lists:  # each name looked up in ``known``, the lists' names by one issuperset
        every = "(" + ", ".join([f"*{v}" for v in name_lists] + names) + ",)"
        look = [f"{v} in known" for v in names] + ([f"known.issuperset({' + '.join(name_lists)})"] if name_lists else [])
        tests.append(f"({' and '.join(look)} or _learn({every}, known))")
    if action in _TOKEN_ACTIONS:
        tests.append(f"{x['token']} >= 1")
    if action == "finish":
        tests.append(f"{x['result']} in ('ok', 'failed')")
    if action == "settle":
        tests.append(f"{x['ledger']} in ('integrated', 'abandoned')")
    if action == "adopt":
        tests.append("(seq == 1 or 'noop' in e)")
    # every field above was found, so an event of only those has no optional field to check
    tests.append(f"(len(e) == {len(order) + 1} or _optional_fit(e))")
    body = "\n        and ".join(tests)
    # the builtins it names as its parameters' defaults: a local is read faster than a global
    words = set(body.replace("(", " ").replace(")", " ").replace(",", " ").split())
    builtins = [b for b in ("type", "str", "int", "list", "bool", "dict", "len") if b in words]
    src = (f"def fits(e, known, seq, prev, {', '.join(f'{b}={b}' for b in builtins)}):\n"
           f"    {', '.join(x[n] for n in order)} = _get(e)\n    return ({body})\n")
    scope: dict[str, Any] = {"_learn": _learn, "_optional_fit": _optional_fit, "_rows_ok": _rows_ok, "_get": itemgetter(*order),
                             "_principal": is_principal, "_BY": tuple(f"{kind}:" for kind in _PRINCIPALS)}
    exec(src, scope)  # noqa: S102 -- built from the schema's names and numbered locals only
    return scope["fits"]


class QuickChecks(dict):  # type: ignore[type-arg]
    """For each action, ``fits(event, known, seq, prev)``: True only when
    ``decode`` would accept the parsed ``event`` of that action (its
    ``action`` field already looked up) and it has ``seq`` and ``prev`` (the
    chain's last digest, or None, so that a ``prev`` equal to it is null or
    64 characters long). ``known`` is a set of text already found to be
    names; names found join it (boundedly). ``fits`` may raise rather than
    say no, for values no writer makes. Compiled from the tables above on
    first use of an action; an action that is not one raises ``KeyError``."""

    def __missing__(self, action: str) -> Callable[..., bool]:
        if action not in SCHEMA:
            raise KeyError(action)
        fits = self[action] = _compile(action)
        return fits


QUICK = QuickChecks()


def frame(bodies: list[dict[str, Any]], seq: int, prev: str | None, at: str, by: str) -> list[tuple[dict, bytes]]:
    """Number, stamp and chain ``bodies`` after the line (``seq``, ``prev``)."""
    out = []
    for body in bodies:
        seq += 1
        event = {"v": VERSION, "seq": seq, "at": at, "action": body["action"], "by": by, "prev": prev}
        event.update((k, v) for k, v in body.items() if k != "action")
        line = encode(event)
        prev = digest(line)
        out.append((event, line))
    return out

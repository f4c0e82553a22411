"""Values both ways: a Python value as a parameter (``_dump``), a column's
text as a Python value by its type (``_loader``), and ``%s`` placeholders
as ``$1``."""

from __future__ import annotations

from .exceptions import DataError, ProgrammingError


class Jsonb:
    """A value sent as ``jsonb``."""

    __slots__ = ("obj",)

    def __init__(self, obj: object):
        self.obj = obj


def _json(text: str):
    import json

    return json.loads(text)


def _json_text(obj: object) -> str:
    import json

    return json.dumps(obj)


def _decimal(text: str):
    from decimal import Decimal

    return Decimal(text)


def _bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    raise DataError("bytea in escape format: set bytea_output = hex")


#: a column's text as a Python value, by its type's oid (not here: the text itself)
_LOADS = {16: lambda s: s == "t", 17: _bytea, 20: int, 21: int, 23: int, 26: int, 700: float, 701: float,
          1700: _decimal, 114: _json, 3802: _json}
#: an array type's oid: its element type's
_ELEMENT = {1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1028: 26, 1021: 700, 1022: 701, 1231: 1700,
            199: 114, 3807: 3802, 1009: 25, 1015: 1043, 1002: 18, 1003: 19}


def _array(text: str, load) -> list:
    """A (nested) array in the server's text form, each element given to ``load``."""
    out: list = []
    stack = [out]
    i, n = 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "{":
            inner: list = []
            stack[-1].append(inner)
            stack.append(inner)
            i += 1
        elif ch == "}":
            stack.pop()
            i += 1
        elif ch == ",":
            i += 1
        elif ch == '"':
            j, parts = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    j += 1
                parts.append(text[j])
                j += 1
            stack[-1].append(load("".join(parts)))
            i = j + 1
        else:
            j = i
            while text[j] not in ",}":
                j += 1
            word = text[i:j]
            stack[-1].append(None if word == "NULL" else load(word))
            i = j
    return out


def _loader(oid: int):
    if oid in _LOADS:
        return _LOADS[oid]
    element = _ELEMENT.get(oid)
    if element is not None:
        inner = _LOADS.get(element, str)
        return lambda s: _array(s, inner)
    return None


def _dump(value: object) -> tuple[int, bytes | None, int]:
    """``(oid, bytes, format)`` a parameter is sent as (format 1: binary)."""
    if value is None:
        return 0, None, 0
    if value is True or value is False:
        return 16, b"t" if value else b"f", 0
    if isinstance(value, int):
        oid = 21 if -(1 << 15) <= value < 1 << 15 else 23 if -(1 << 31) <= value < 1 << 31 else \
            20 if -(1 << 63) <= value < 1 << 63 else 1700
        return oid, str(value).encode(), 0
    if isinstance(value, float):
        text = "NaN" if value != value else "Infinity" if value == float("inf") else \
            "-Infinity" if value == float("-inf") else repr(value)
        return 701, text.encode(), 0
    if isinstance(value, str):
        return 0, _text(value), 0
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 17, bytes(value), 1
    if isinstance(value, Jsonb):
        return 3802, _text(_json_text(value.obj)), 0
    if isinstance(value, (list, tuple)):
        oids = {_dump(v)[0] for v in value if v is not None}
        oid = {frozenset({17}): 1001, frozenset({0}): 1009}.get(frozenset(oids), 0)
        return oid, _text(_array_literal(value)), 0
    raise ProgrammingError(f"cannot send a {type(value).__name__} to the server")


def _text(value: str) -> bytes:
    if "\x00" in value:
        raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return value.encode("utf-8")


def _array_literal(values) -> str:
    def one(v: object) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, (list, tuple)):
            return _array_literal(v)
        if isinstance(v, (bytes, bytearray, memoryview)):
            return '"\\\\x' + bytes(v).hex() + '"'
        text = ("t" if v else "f") if isinstance(v, bool) else _json_text(v.obj) if isinstance(v, Jsonb) else str(v)
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "{" + ",".join(one(v) for v in values) + "}"


def _placeholders(query: str, named: bool) -> tuple[str, tuple[str, ...] | None]:
    """``query`` with ``%s`` (``%(name)s`` when ``named``) as ``$1``, ``$2``, …
    and ``%%`` as ``%``; and what fills each in order (names, or indexes)."""
    out, names, by_name = [], [], {}
    parts = query.split("%")
    out.append(parts[0])
    i = 1
    while i < len(parts):
        part = parts[i]
        if part == "" and i + 1 < len(parts):  # %%
            out.append("%" + parts[i + 1])
            i += 2
            continue
        if not named and part.startswith("s"):
            names.append(str(len(names)))
            out.append(f"${len(names)}{part[1:]}")
        elif named and part.startswith("(") and ")s" in part:
            name, rest = part[1:].split(")s", 1)
            if name not in by_name:
                names.append(name)
                by_name[name] = len(names)
            out.append(f"${by_name[name]}{rest}")
        else:
            raise ProgrammingError(f"only '%s', '%(name)s' and '%%' are placeholders: {query[:60]!r}")
        i += 1
    return "".join(out), tuple(names) if named else tuple(range(len(names)))

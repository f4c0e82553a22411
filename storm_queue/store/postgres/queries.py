"""The SQL of a database storm, kept out of the Python: the named statements
of queries.sql (``q``), the storm's advisory lock keys they hold
(``lock_keys``), and the schema (``schema``, schema.sql with those keys
filled in).

Each file is read on first use only, so a directory storm never opens
them; queries.sql is parsed with ``str`` methods alone (a request's
start-up loads no ``re``)."""

from __future__ import annotations

import os

#: where schema.sql's row trigger takes the storm's lock: the keys of ``lock_storm`` go here
LOCK_KEYS_MARK = "{lock_keys}"
_HERE = os.path.dirname(os.path.abspath(__file__))
_queries: dict[str, str] | None = None


def _text(name: str) -> str:
    with open(os.path.join(_HERE, name), encoding="utf-8") as f:
        return f.read()


def _header(line: str) -> str | None:
    """The name a header line ``-- name --`` gives, else None."""
    line = line.strip()
    if line.startswith("-- ") and line.endswith(" --"):
        name = line[3:-3]
        if name.isidentifier():
            return name
    return None


def parse(text: str) -> dict[str, str]:
    """The statements of a queries file by name (queries.sql's layout): each
    one's lines from its header to the next, without comment lines, the
    blank lines around it and a final semicolon. ``ValueError`` for a name
    given twice or a header with no statement under it."""
    found: dict[str, str] = {}
    named: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        name = _header(line)
        if name is not None:
            named.append((name, []))
        elif named and not line.lstrip().startswith("--"):
            named[-1][1].append(line)
    for name, lines in named:
        statement = "\n".join(lines).strip()
        if statement.endswith(";"):
            statement = statement[:-1].rstrip()
        if name in found or not statement:
            raise ValueError(f"queries.sql: the statement {name} is {'named twice' if name in found else 'empty'}")
        found[name] = statement
    return found


def q(name: str) -> str:
    """The statement queries.sql names ``name`` (the file is read and parsed
    on the first call, once); ``KeyError`` for a name it does not hold."""
    global _queries
    if _queries is None:
        _queries = parse(_text("queries.sql"))
    return _queries[name]


def lock_keys() -> tuple[int, int]:
    """The two int4 keys of the storm's advisory lock, as ``lock_storm``
    (the one place they are written) takes it."""
    args = q("lock_storm").partition("(")[2].partition(")")[0]
    first, second = (int(key) for key in args.split(","))
    return first, second


def schema() -> str:
    """schema.sql, ready to run: the script that creates the storm's schema,
    its row trigger taking the advisory lock ``lock_storm`` takes."""
    text = _text("schema.sql")
    if text.count(LOCK_KEYS_MARK) != 1:
        raise ValueError(f"schema.sql must hold {LOCK_KEYS_MARK} once, where its row trigger takes the storm's lock")
    return text.replace(LOCK_KEYS_MARK, "{}, {}".format(*lock_keys()))

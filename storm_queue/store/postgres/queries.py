"""The SQL of a database storm, kept out of the Python: the named statements
of queries.sql (``q``), the storm's advisory lock keys they hold
(``lock_keys``), the schema (``schema``: schema.sql, the first version,
and the numbered migrations that carry it to this storm-queue's; an
upgrade runs the ones a storm lacks: ``migrations``, ``schema_version``).

Each file is read on first use only, so a directory storm never opens
them; queries.sql is parsed with ``str`` methods alone (a request's
start-up loads no ``re``)."""

from __future__ import annotations

import os

#: where the row trigger of schema.sql (and the functions of versions 2 to 8) took the storm's advisory
#: lock: the keys of ``lock_storm_advisory`` go here
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
    """The two int4 keys of the storm's advisory lock before schema
    version 9, as ``lock_storm_advisory`` (the one place they are
    written) takes it."""
    args = q("lock_storm_advisory").partition("(")[2].partition(")")[0]
    first, second = (int(key) for key in args.split(","))
    return first, second


def schema() -> str:
    """The script that makes a new storm's schema at this storm-queue's
    version: schema.sql (the first version), then every migration in
    turn, the storm's advisory lock keys filled in where they take it."""
    if _text("schema.sql").count(LOCK_KEYS_MARK) != 1:
        raise ValueError(f"schema.sql must hold {LOCK_KEYS_MARK} once, where its row trigger takes the storm's lock")
    return "\n".join([_keyed(_text("schema.sql")), *(script for _, script in migrations())])


def _keyed(text: str) -> str:
    return text.replace(LOCK_KEYS_MARK, "{}, {}".format(*lock_keys()))


def migrations() -> list[tuple[int, str]]:
    """The migrations, in order: ``(N, script)`` for each
    ``migrations/NNNN.sql``, numbered from 1 without a gap; the script
    carries a storm at version N - 1 to version N (the ``{lock_keys}``
    mark filled in as in ``schema``), and records it."""
    names = sorted(n for n in os.listdir(os.path.join(_HERE, "migrations")) if n.endswith(".sql"))
    found = []
    for n, name in enumerate(names, 1):
        if name != f"{n:04d}.sql":
            raise ValueError(f"migrations/{name}: the migrations are numbered 0001.sql, 0002.sql, ... without a gap")
        found.append((n, _keyed(_text(os.path.join("migrations", name)))))
    return found


_version: int | None = None


def schema_version() -> int:
    """The version of this storm-queue's schema: the number of its last
    migration (the migrations counted once)."""
    global _version
    if _version is None:
        _version = len(migrations())
    return _version

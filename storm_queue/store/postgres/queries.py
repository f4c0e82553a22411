"""The SQL of a database storm, kept out of the Python: the named statements
of queries.sql (``q``), the storm's advisory lock keys of versions before
9 (``lock_keys``), and the server's code in sql/: ``schema`` (sql/schema.sql,
the current tables, with the functions of sql/functions/ applied), the
numbered migrations that carry an older storm's tables and data forward
(``migrations``, ``pending``, ``schema_version``) and the functions an
upgrade applies again (``functions``, ``function_names``).

Each file is read on first use only, so a directory storm never opens
them; queries.sql is parsed with ``str`` methods alone (a request's
start-up loads no ``re``)."""

from __future__ import annotations

import os

#: where sql/schema.sql, and a migration that makes triggers on them, has the server's functions applied
FUNCTIONS_MARK = "-- {functions}"
#: where sql/schema.sql records this storm-queue's schema version
VERSION_MARK = "{schema_version}"
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


def functions() -> str:
    """The server's code: every ``sql/functions/NAME.sql`` in name order,
    each one function's current definition (``CREATE OR REPLACE``), as one
    script; their bodies are checked when called (``check_function_bodies``
    off, as pg_dump restores them: they may call one another in any order).
    ``ValueError`` for a file that does not define the function it is named
    after, or defines more than one."""
    scripts = [q("functions_begin") + ";", q("functions_reshaped") + ";"]
    for name in function_names():
        text = _text(os.path.join("sql", "functions", f"{name}.sql"))
        if _defined(text) != [(True, name)]:
            raise ValueError(f"sql/functions/{name}.sql must hold one definition, of storm_queue.{name}, "
                             f"written CREATE OR REPLACE FUNCTION")
        scripts.append(text)
    return "\n".join(scripts)


def _defined(text: str) -> list[tuple[bool, str]]:
    """Each function ``text`` creates in schema storm_queue: whether it is
    written ``CREATE OR REPLACE``, and its name (read without ``re``)."""
    words = text.split()
    found = []
    for i, word in enumerate(words[1:-1], 1):
        if word.upper() == "FUNCTION" and words[i - 1].upper() in ("CREATE", "REPLACE") \
                and words[i + 1].startswith("storm_queue."):
            replace = [w.upper() for w in words[max(i - 3, 0):i]] == ["CREATE", "OR", "REPLACE"]
            found.append((replace, words[i + 1][len("storm_queue."):].split("(")[0]))
    return found


def function_names() -> list[str]:
    """The names of the server's functions (one file each in sql/functions/)."""
    return sorted(n[:-4] for n in os.listdir(os.path.join(_HERE, "sql", "functions")) if n.endswith(".sql"))


def _with_functions(text: str) -> str:
    """``text`` with the tree's functions where it holds the mark ``{functions}``."""
    return text.replace(FUNCTIONS_MARK, "\n" + functions(), 1)


def schema() -> str:
    """The script that makes a new storm's schema at this storm-queue's
    version: sql/schema.sql (the current tables, triggers and grants; the
    migrations are never replayed), the tree's functions where it marks
    them, and the version it records."""
    text = _text(os.path.join("sql", "schema.sql"))
    if text.count(FUNCTIONS_MARK) != 1 or text.count(VERSION_MARK) != 1:
        raise ValueError(f"sql/schema.sql must hold {FUNCTIONS_MARK} and {VERSION_MARK} once each")
    return _with_functions(text).replace(VERSION_MARK, str(schema_version()))


def migrations() -> list[tuple[int, str, bool]]:
    """The migrations, in order: ``(N, script, applies_functions)`` for
    each ``sql/migrations/NNNN.sql``, which carries a storm from the
    version of the file before it (the first: from version 0, the schema
    5cbddde made) to version N, tables and data only, and records it. A
    script that makes triggers on the server's functions holds the mark
    ``{functions}`` where they are applied (``applies_functions``)."""
    folder = os.path.join(_HERE, "sql", "migrations")
    found = []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".sql")):
        if len(name) != 8 or not name[:4].isdigit():
            raise ValueError(f"sql/migrations/{name}: a migration is named NNNN.sql, the version it carries to")
        text = _text(os.path.join("sql", "migrations", name))
        found.append((int(name[:4]), text, FUNCTIONS_MARK in text))
    return found


def upgradable(version: int) -> bool:
    """Whether a storm at ``version`` can be carried forward: version 0,
    or one a migration ends at (1 to 8 were development builds' only)."""
    return version == 0 or any(n == version for n, _, _ in migrations())


def pending(version: int) -> list[str]:
    """The scripts that carry a storm at ``version`` (``upgradable``) to
    this storm-queue's, in order; the tree's functions applied where one
    marks them, else after the last (the upgrade drops the functions the
    tree no longer defines, and grants, afterwards)."""
    scripts, applied = [], False
    for n, text, marked in migrations():
        if n > version:
            scripts.append(_with_functions(text) if marked else text)
            applied = applied or marked
    if not applied:
        scripts.append(q("functions_path") + ";\n" + functions())
    return scripts


_version: int | None = None


def schema_version() -> int:
    """The version of this storm-queue's schema: the number of its last
    migration (the migrations read once)."""
    global _version
    if _version is None:
        _version = migrations()[-1][0]
    return _version

"""The SQL of a database storm in one place: queries.sql's layout as
``queries.parse`` reads it, every name the package asks ``q`` for is a
statement there (and every statement is asked for), the lock keys are
written once, and reading the file needs no ``re``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from storm_queue.store.postgres import queries
from tests.conftest import clean_env

PACKAGE = Path(__file__).resolve().parents[2] / "storm_queue"


def test_a_statement_runs_from_its_header_to_the_next() -> None:
    text = ("-- what the file is\n\n-- one --\n-- a comment of it\nSELECT 1\nFROM t;\n\n"
            "-- two --\nSET x = {}\n-- not -- a header --\n")
    assert queries.parse(text) == {"one": "SELECT 1\nFROM t", "two": "SET x = {}"}


@pytest.mark.parametrize("text", ["-- a --\nSELECT 1;\n-- a --\nSELECT 2;\n", "-- a --\n-- only a comment\n\n-- b --\nSELECT 1\n"])
def test_a_name_twice_or_a_header_with_nothing_under_it_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        queries.parse(text)


def _asked() -> set[str]:
    """Every name the package passes to ``q`` as a literal."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "q":
                assert len(node.args) == 1 and isinstance(node.args[0], ast.Constant), f"{path}: q() of a non-literal"
                found.add(node.args[0].value)
    return found


def test_every_statement_asked_for_is_in_the_file_and_every_one_is_asked_for() -> None:
    held = set(queries.parse((PACKAGE / "store" / "postgres" / "queries.sql").read_text(encoding="utf-8")))
    asked = _asked()
    assert asked - held == set(), "asked for, not in queries.sql"
    assert held - asked == set(), "in queries.sql, never asked for"


def test_the_advisory_lock_keys_of_the_earlier_schemas_are_written_once_and_no_current_code_takes_them() -> None:
    """Before schema version 9 the storm's lock was an advisory lock (a
    storm at version 0 still takes it in its row trigger until upgraded);
    its keys are written once, in queries.sql. From version 9 it is a table
    only the operator may lock, and nothing in sql/ takes the advisory one."""
    assert queries.lock_keys() == (0x73746F72, 0x6D71)
    where = [path.name for path in PACKAGE.rglob("*") if path.is_file() and path.suffix in (".py", ".sql")
             and "1937010546" in path.read_text(encoding="utf-8")]
    assert where == ["queries.sql"]
    assert "pg_advisory_xact_lock" not in queries.schema() + "".join(script for _, script, _ in queries.migrations())
    assert queries.q("lock_storm") == "LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE"


SQL = PACKAGE / "store" / "postgres" / "sql"


def test_the_migrations_carry_tables_and_data_and_each_records_its_version() -> None:
    """sql/migrations/NNNN.sql: ascending, each records the version it
    carries to, none defines a function (functions are code:
    sql/functions/, applied where a migration marks them), and only the
    last re-derives the fold's tables, as its last statement (the tree's
    fold_line writes columns any migration may add); the schema a new
    storm is made by records the last."""
    found = queries.migrations()
    numbers = [n for n, _, _ in found]
    assert numbers == sorted(set(numbers)) and numbers[-1] == queries.schema_version() >= 10
    for n, script, _ in found:
        assert "CREATE FUNCTION" not in script and "CREATE OR REPLACE FUNCTION" not in script, n
        assert ("storm_queue.rederive()" in script) == (n == numbers[-1]), n
        assert f"VALUES (1, {n});" in script or f"SET version = {n};" in script, n
    assert found[-1][1].rstrip().splitlines()[-1] == "SELECT storm_queue.rederive();"
    assert f"INSERT INTO storm_queue.version (id, version) VALUES (1, {queries.schema_version()});" in queries.schema()
    assert queries.upgradable(0) and queries.upgradable(9) and not queries.upgradable(5)
    assert queries.pending(queries.schema_version()) == ["SET LOCAL search_path = pg_catalog, pg_temp;\n"
                                                         + queries.functions()]


def test_every_server_function_is_defined_once_in_a_file_of_its_own_with_a_fixed_search_path() -> None:
    """Issue 31, item 1: one file per function in sql/functions/ (its
    current definition only); no other file of the package defines one."""
    import re

    names = queries.function_names()
    assert len(names) >= 40
    defined = re.compile(r"CREATE (?:OR REPLACE )?FUNCTION\s+storm_queue\.(\w+)")
    for path in PACKAGE.rglob("*.sql"):
        found = defined.findall(path.read_text(encoding="utf-8"))
        if path.parent == SQL / "functions":
            assert found == [path.stem], path
            assert "SET search_path = pg_catalog, pg_temp" in path.read_text(encoding="utf-8"), path
        else:
            assert found == [], (path, found)
    assert queries.schema().count("CREATE OR REPLACE FUNCTION") == len(names)


def test_reading_the_queries_loads_no_re() -> None:
    code = ("import sys; from storm_queue.store.postgres import queries; queries.q('lock_storm'); queries.schema(); "
            "print('re' in sys.modules)")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60,
                          cwd=PACKAGE.parent)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize("text", [
    "CREATE FUNCTION storm_queue.stamp(x int) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;",
    "CREATE OR REPLACE FUNCTION storm_queue.stamp(x int) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"
    "CREATE OR REPLACE FUNCTION storm_queue.stamp(x text) RETURNS int LANGUAGE sql AS $$ SELECT 2 $$;",
    "CREATE OR REPLACE FUNCTION storm_queue.stamped(x int) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;",
    "-- no definition at all",
])
def test_a_function_file_holds_exactly_its_own_definition(monkeypatch, text) -> None:
    """A sql/functions file that defines nothing, another function, two,
    or one without OR REPLACE (which a re-applying upgrade would fail on)
    is refused before anything reaches a server."""
    from storm_queue.store.postgres import queries

    real = queries._text
    monkeypatch.setattr(queries, "_text", lambda name: text if name.endswith("stamp.sql") else real(name))
    with pytest.raises(ValueError, match=r"sql/functions/stamp\.sql must hold one definition"):
        queries.functions()

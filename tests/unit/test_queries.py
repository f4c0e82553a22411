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


def test_the_advisory_lock_keys_of_the_earlier_schemas_are_written_once_and_their_migrations_take_them() -> None:
    """Before schema version 9 the storm's lock was an advisory lock; an
    upgrade from such a version takes it, and their migrations' functions
    take it (their {lock_keys} mark filled in from queries.sql). From
    version 9 it is a table only the operator may lock."""
    assert queries.lock_keys() == (0x73746F72, 0x6D71)
    where = [path.name for path in PACKAGE.rglob("*") if path.is_file() and path.suffix in (".py", ".sql")
             and "1937010546" in path.read_text(encoding="utf-8")]
    assert where == ["queries.sql"]
    schema = queries.schema()
    assert queries.LOCK_KEYS_MARK not in schema
    assert schema.count("PERFORM pg_advisory_xact_lock(1937010546, 28017);") >= 1
    written = (PACKAGE / "store" / "postgres" / "schema.sql").read_text(encoding="utf-8")
    assert schema.startswith(written.replace(queries.LOCK_KEYS_MARK, "1937010546, 28017"))
    assert queries.q("lock_storm") == "LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE"


def test_the_migrations_are_numbered_without_a_gap_and_the_schema_is_at_the_last() -> None:
    found = queries.migrations()
    assert [n for n, _ in found] == list(range(1, len(found) + 1)) and len(found) == queries.schema_version() >= 1
    for n, script in found:  # each is in the schema a new storm is made by, and records its version last
        assert queries.LOCK_KEYS_MARK not in script and script in queries.schema(), n
        assert script.rstrip().splitlines()[-1].endswith(f"{n});") or f"version = {n}" in script.splitlines()[-1], n


def test_reading_the_queries_loads_no_re() -> None:
    code = ("import sys; from storm_queue.store.postgres import queries; queries.q('lock_storm'); queries.schema(); "
            "print('re' in sys.modules)")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60,
                          cwd=PACKAGE.parent)
    assert done.stdout.strip() == "False", done.stderr

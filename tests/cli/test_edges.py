"""Issue 13 items 1-4, through the real command line: a directory that is
not a storm, one JSON document on every exit path, interrupts, and --root
and --json before the command name."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env, make_storm, run_cli, tree

QUEUE = "a 1\nb 2 a\nc 3\n"


def one_document(text: str) -> dict:
    doc = json.loads(text)  # exactly one document: json.loads refuses trailing data
    assert isinstance(doc, dict)
    return doc


# -- 1: a directory is a storm only when it holds one --------------------


@pytest.mark.parametrize("args", [("bump", "x"), ("push", "x", "1"), ("unbump", "x"), ("claim",), ("list",),
                                  ("list", "--json"), ("next",), ("doctor",), ("why", "x"), ("log",), ("verify",)])
def test_a_directory_without_storm_files_is_refused_and_left_alone(tmp_path: Path, args: tuple[str, ...]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("not a storm\n")
    before = tree(plain, times=True)
    done = run_cli(plain, *args)
    assert done.returncode == 2, done.stderr
    assert f"{plain} is not a storm (no queue.txt or storm.toml): create one with storm-queue init {plain}" in done.stderr
    assert "Traceback" not in done.stderr
    assert tree(plain, times=True) == before  # nothing written: no log, witness, lock or progress.log


def test_storm_find_refuses_a_directory_without_storm_files(tmp_path: Path) -> None:
    from storm_queue import NoStorm, Storm

    with pytest.raises(NoStorm, match="is not a storm"):
        Storm.find(str(tmp_path), env={})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["queue.txt", "storm.toml", "priority.log", ".priority.log.witness"])
def test_any_one_storm_file_makes_a_storm(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("")
    done = run_cli(tmp_path, "list", "--json")
    assert "is not a storm" not in done.stderr


def test_init_then_bump_works(tmp_path: Path) -> None:
    root = tmp_path / "new"
    assert run_cli(None, "init", str(root)).returncode == 0
    (root / "queue.txt").write_text(QUEUE)
    done = run_cli(root, "bump", "b")
    assert done.returncode == 0, done.stderr


def test_a_database_url_is_left_to_the_database_storm() -> None:
    from storm_queue.desk import find_root

    for url in ("postgresql://op@localhost/storm", "postgres://localhost/storm"):
        assert find_root(url, {}) == url

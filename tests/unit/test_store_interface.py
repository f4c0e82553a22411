"""The store interface (storm_queue/store/interface.py): both stores keep
it, the service holds one and inherits from none, and every member says
what it promises."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from storm_queue.service.storm import KINDS, Storm
from storm_queue.store.directory.effects import Files
from storm_queue.store.directory.store import Directory
from storm_queue.store.interface import Effects, Store
from storm_queue.store.postgres.rows import Writes
from storm_queue.store.postgres.store import Database

PACKAGE = Path(__file__).resolve().parents[2] / "storm_queue"


def members(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")]


@pytest.mark.parametrize("protocol", [Store, Effects])
def test_every_member_of_the_interface_says_what_it_promises(protocol: type) -> None:
    names = members(protocol)
    assert 8 <= len(names) <= 12, names
    for name in names:
        doc = inspect.getdoc(getattr(protocol, name)) or ""
        assert len(doc.split()) >= 8, f"{protocol.__name__}.{name} has no promise: {doc!r}"


def test_both_stores_keep_the_interface(tmp_path: Path) -> None:
    directory = Directory(str(tmp_path), env={})
    database = Database("postgresql://nobody@127.0.0.1:1/none", env={})  # opens no connection until asked
    for store in (directory, database):
        assert isinstance(store, Store), type(store)
        for name in members(Store):
            ours = inspect.signature(getattr(type(store), name))
            theirs = inspect.signature(getattr(Store, name))
            assert list(ours.parameters) == list(theirs.parameters), (type(store).__name__, name)
    assert database.root == "postgresql://nobody@127.0.0.1:1/none" and database._conn is None
    assert isinstance(Files(str(tmp_path), str(tmp_path / "priority.log")), Effects)
    assert isinstance(Writes(database), Effects)
    for effects in (Files, Writes):
        for name in members(Effects):
            ours = inspect.signature(getattr(effects, name))
            assert list(ours.parameters) == list(inspect.signature(getattr(Effects, name)).parameters), name


def test_the_service_holds_a_store_and_no_class_inherits_one(tmp_path: Path) -> None:
    (tmp_path / "queue.txt").write_text("")
    storm = Storm(str(tmp_path), env={})
    assert isinstance(storm.store, Directory) and Storm.__bases__ == (object,)
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                assert not bases & {"Directory", "Database", "Storm", "Files", "Writes"}, f"{path}: {node.name}"


def test_every_request_kind_is_a_function_of_the_storm(tmp_path: Path) -> None:
    (tmp_path / "queue.txt").write_text("")
    storm = Storm(str(tmp_path), env={})
    assert {"bump", "settle", "recover"} <= set(KINDS)
    for name, home in KINDS.items():
        assert home.startswith("storm_queue.service."), (name, home)
        method = getattr(storm, name)
        assert method.__self__ is storm and method.__func__.__module__ == home, name
        assert next(iter(inspect.signature(method.__func__).parameters)) == "storm"
        assert name in dir(storm)
    with pytest.raises(AttributeError):
        storm.no_such_request  # noqa: B018


def test_only_the_factory_looks_at_a_root_to_choose_a_store() -> None:
    """``roots.is_url`` (the look) is called in roots.py alone."""
    callers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                fn = node.func
                if (fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", "")) == "is_url":
                    callers.append(path.relative_to(PACKAGE).as_posix())
    assert set(callers) == {"roots.py"}, callers

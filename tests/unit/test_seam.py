"""The store seam, read from the code: nothing outside ``store/`` reaches
past the Protocol (``store/interface.py``), the service calls nothing up
in ``ops/``, and the modules of ``store/postgres/`` import one another
without a circle (issue 31, item 5). Each check names what it found."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "storm_queue"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in it (a function's lazy
    import and a ``TYPE_CHECKING`` one included), as absolute names, each
    with its line; ``from . import x`` names ``x`` as well."""
    here = module_of(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def test_the_imports_are_read_whole() -> None:
    """The reader the checks below rest on sees a lazy, a relative and a
    ``TYPE_CHECKING`` import: a check that read none would pass vacuously."""
    names = {name for _, name in imported(PACKAGE / "store" / "postgres" / "store.py")}
    assert {"storm_queue.store.postgres.served", "storm_queue.store.postgres.connect", "storm_queue.core.resolver"} <= names


def test_the_service_calls_nothing_up_in_ops() -> None:
    """ops call the service (or the CLI calls ops); the service never imports
    ``storm_queue.ops``, nor names one of its modules to import by string."""
    found = []
    for path in sorted((PACKAGE / "service").rglob("*.py")):
        found += [f"{path.name}:{line} imports {name}" for line, name in imported(path)
                  if name == "storm_queue.ops" or name.startswith("storm_queue.ops.")]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("storm_queue.ops"):
                found.append(f"{path.name}:{node.lineno} names {node.value}")
    assert not found, found


def postgres_graph() -> dict[str, set[str]]:
    """Which module of ``store/postgres`` imports which (a subpackage, if
    one comes, one node)."""
    root = PACKAGE / "store" / "postgres"
    prefix = "storm_queue.store.postgres."
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = module_of(path)[len(prefix):].split(".")[0] if path != root / "__init__.py" else ""
        if not name:
            continue
        targets = graph.setdefault(name, set())
        for _, target in imported(path):
            if target.startswith(prefix):
                first = target[len(prefix):].split(".")[0]
                if first != name and ((root / f"{first}.py").is_file() or (root / first).is_dir()):
                    targets.add(first)
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules in order), or []."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) == []


def test_the_postgres_store_imports_without_a_circle() -> None:
    graph = postgres_graph()
    assert {"store", "connect", "served", "log", "version"} <= set(graph) and "log" in graph["store"]
    assert circle(graph) == [], " -> ".join(circle(graph))



def declared(protocol: type) -> set[str]:
    """The members ``protocol`` declares: its methods and its annotated attributes."""
    return set(getattr(protocol, "__annotations__", {})) | {name for name in vars(protocol) if not name.startswith("_")}


STORES = ("Store", "Directory", "Database")


def store_uses(path: Path) -> list[tuple[int, str, str]]:
    """Every member ``path`` asks of a store, as (line, "store" or "upkeep",
    member): ``x.store.NAME`` and ``s.NAME``, where ``s`` is a name bound to
    a store (``store``; a parameter annotated ``Store``, ``Directory`` or
    ``Database``; a name assigned ``x.store`` or a store made there), and
    ``x.upkeep.NAME`` and ``u.NAME``, where ``u`` was assigned ``x.upkeep``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stores, upkeeps = {"store"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if any(isinstance(n, ast.Name) and n.id in STORES or isinstance(n, ast.Constant) and n.value in STORES
                   for n in ast.walk(node.annotation)):
                stores.add(node.arg)
        if isinstance(node, ast.Assign):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "store":
                stores |= names
            elif isinstance(value, ast.Attribute) and value.attr == "upkeep":
                upkeeps |= names
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in STORES:
                stores |= names
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            of = node.value
            if (isinstance(of, ast.Attribute) and of.attr == "store") or (isinstance(of, ast.Name) and of.id in stores):
                uses.append((node.lineno, "store", node.attr))
            elif (isinstance(of, ast.Attribute) and of.attr == "upkeep") or (isinstance(of, ast.Name) and of.id in upkeeps):
                uses.append((node.lineno, "upkeep", node.attr))
    return uses


def test_the_use_finder_finds_a_use_past_the_protocol(tmp_path: Path) -> None:
    source = tmp_path / "reach.py"
    source.write_text("def f(storm, s: 'Directory'):\n    storm.store.log_path(1)\n    s.conn\n"
                      "    u = storm.store.upkeep\n    u.close()\n    storm.store.upkeep.log_file(2)\n")
    assert sorted(store_uses(source)) == [(2, "store", "log_path"), (3, "store", "conn"), (4, "store", "upkeep"),
                                  (5, "upkeep", "close"), (6, "store", "upkeep"), (6, "upkeep", "log_file")]


def test_nothing_outside_the_stores_reaches_past_the_protocol() -> None:
    """Outside ``store/``, a store is asked only what ``Store`` declares,
    and its upkeep only what ``Upkeep`` declares (no ``log_path``, ``conn``,
    ``_errors``...: a member the interface does not promise)."""
    from storm_queue.store.interface import Store, Upkeep

    allowed = {"store": declared(Store), "upkeep": declared(Upkeep)}
    assert {"read", "writing", "upkeep"} <= allowed["store"] and {"log_file", "close"} <= allowed["upkeep"]
    seen, past = 0, []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "store":
            continue
        for line, of, name in store_uses(path):
            seen += 1
            if name not in allowed[of]:
                past.append(f"{path.relative_to(PACKAGE)}:{line} {of}.{name}")
    assert seen > 20 and not past, past


def test_both_stores_keep_the_upkeep(tmp_path: Path) -> None:
    """What callers beside the request path ask, each store answers: a
    directory's log is a file, a database's is not; a directory admits by
    its files' owner, so it knows no member (``NotHere``, exit 2)."""
    import pytest

    from storm_queue.core.config import Declaration
    from storm_queue.core.errors import NotHere
    from storm_queue.store.directory.store import Directory
    from storm_queue.store.interface import Store, Upkeep
    from storm_queue.store.postgres.store import Database

    directory, database = Directory(str(tmp_path), env={}), Database("postgresql://nobody@127.0.0.1:1/none", env={})
    for store in (directory, database):
        assert isinstance(store, Store) and isinstance(store.upkeep, Upkeep)
        assert store.upkeep.appended in ("appended to queue.txt", "added as a lane row")
    for name, member in vars(Upkeep).items():
        if callable(member) and not name.startswith("_"):
            assert member.__doc__, name
    decl = Declaration(True)
    assert directory.upkeep.log_file(decl) == str(tmp_path / decl.log) and database.upkeep.log_file(decl) is None
    for ask in (lambda: directory.upkeep.member("someone", "runner"), directory.upkeep.schema,
                lambda: directory.upkeep.change_member("grant", "runner", "someone"),
                lambda: directory.upkeep.carry(0)):
        with pytest.raises(NotHere, match="directory storm"):
            ask()
    (tmp_path / "queue.txt").write_text("a 1\n")
    watched = directory.upkeep.watched()
    assert str(tmp_path / "queue.txt") in watched and str(tmp_path / decl.log) in watched
    assert database.upkeep.watched() == [] and database.upkeep.declared_in() is None
    assert directory.upkeep.declared_in() == str(tmp_path / "storm.toml")
    database.upkeep.close()  # nothing open: nothing to close, and no connection is made
    assert database._conn is None


def caught(path: Path) -> list[tuple[int, str]]:
    """Every handler in ``path`` that catches what a store's Protocol does
    not document, as (line, what): ``OSError`` (or one of its subclasses'
    names the builtins give), alone or in a tuple, and a bare ``except``."""
    import builtins

    system = {name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, OSError)}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ExceptHandler):
            if node.type is None:
                found.append((node.lineno, "a bare except"))
                continue
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            found += [(node.lineno, n.id) for n in names if isinstance(n, ast.Name) and n.id in system]
    return found


def test_the_handler_finder_finds_a_system_error(tmp_path: Path) -> None:
    source = tmp_path / "catch.py"
    source.write_text("try:\n    pass\nexcept (ValueError, OSError):\n    pass\ntry:\n    pass\nexcept:\n    pass\n"
                      "try:\n    pass\nexcept PermissionError as e:\n    pass\ntry:\n    pass\nexcept WriteFailed:\n    pass\n")
    assert caught(source) == [(3, "OSError"), (7, "a bare except"), (11, "PermissionError")]


def test_the_service_catches_only_what_the_protocol_documents() -> None:
    """The service answers a store's failure by the typed errors its
    Protocol documents (``core.errors``: ``WriteFailed``, ``AppendFailed``,
    ``RecordFailed``...); an ``OSError`` is the store's to translate, and a
    file the caller names is read by ``given``."""
    found = [f"{path.relative_to(PACKAGE)}:{line} catches {what}"
             for path in sorted((PACKAGE / "service").rglob("*.py")) for line, what in caught(path)]
    assert not found, found


#: names that, outside ``store/``, hold a store when nothing else says so (a parameter left unannotated)
STORE_NAMES = {"store", "storm", "source", "db", "database", "directory"}


def reached(path: Path) -> list[tuple[int, str]]:
    """What ``path`` reaches that only a store may: ``keeps_files`` (a
    store-kind check by another name) or ``conn`` (its connection) on
    anything, and a ``_private`` member of a store (a name ``store_uses``
    binds to one, a name of ``STORE_NAMES``, or ``x.store``/``x.upkeep``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = set(STORE_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if any(isinstance(n, ast.Name) and n.id in STORES or isinstance(n, ast.Constant) and n.value in STORES
                   for n in ast.walk(node.annotation)):
                bound.add(node.arg)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr in ("store", "upkeep"):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr in ("keeps_files", "conn"):
            found.append((node.lineno, node.attr))
        elif node.attr.startswith("_") and not node.attr.startswith("__"):
            of = node.value
            if (isinstance(of, ast.Name) and of.id in bound) or (isinstance(of, ast.Attribute) and of.attr in ("store", "upkeep")):
                found.append((node.lineno, node.attr))
    return found


def test_the_reach_finder_finds_a_reach(tmp_path: Path) -> None:
    source = tmp_path / "reach.py"
    source.write_text("def f(storm, s: 'Database', x):\n    with storm._errors():\n        c = storm.conn\n"
                      "    if x.store.keeps_files:\n        s._kind = None\n    x.store._load()\n    x._own = 1\n"
                      "    self._fine = 2\n")
    assert sorted(reached(source)) == [(2, "_errors"), (3, "conn"), (4, "keeps_files"), (5, "_kind"), (6, "_load")]


def test_nothing_outside_the_stores_asks_their_kind_or_their_insides() -> None:
    """Outside ``store/``, nothing reads ``keeps_files`` (what a caller
    needs of the kind it asks of ``upkeep``: the doctor's checks are
    ``Upkeep.doctor``), a connection (``conn``), or a store's ``_private``
    members (``_errors``, ``_kind``...)."""
    found = [f"{path.relative_to(PACKAGE)}:{line} {name}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.relative_to(PACKAGE).parts[0] != "store" for line, name in reached(path)]
    assert not found, found

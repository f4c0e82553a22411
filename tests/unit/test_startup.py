"""Lean start-up: what ``next``, ``list --json`` and a request import, the
click-free quick path (byte for byte the click path's answer), and the lazy
package namespace. Timings live in bench/, never here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storm_queue.cli import entry
from tests.conftest import clean_env, make_storm

QUEUE = "a 1\nb 2 a\nc 3 gone\nd 4\n"

# Run one command in-process the way the console script does, then say which
# modules it loaded.
PROBE = """
import sys
sys.argv = ["storm-queue"] + sys.argv[1:]
from storm_queue.cli.entry import main
try:
    main()
except SystemExit:
    pass
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n")
"""

NEVER_FOR_READERS = {"rich", "filelock", "click", "dataclasses", "typing", "inspect", "hashlib", "datetime", "tomllib"}


def loaded(root: Path, *args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args, "--root", str(root)],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert "MODULES " in done.stderr, done.stderr
    return set(done.stderr.rsplit("MODULES ", 1)[1].split())


@pytest.fixture
def busy_storm(tmp_path: Path) -> Path:
    """A storm with a recorded request, so a reader reads a real log."""
    root = make_storm(tmp_path / "storm", QUEUE, abandoned=["gone"])
    done = subprocess.run([sys.executable, "-m", "storm_queue", "bump", "b", "--root", str(root)],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize("args", [("next",), ("next", "--json"), ("list", "--json")])
def test_readers_import_neither_rich_nor_the_lock_nor_click(busy_storm: Path, args: tuple[str, ...]) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    modules = loaded(busy_storm, *args)
    assert "storm_queue.store.directory.store" in modules  # the probe really ran the command
    found = {m.split(".")[0] for m in modules} & NEVER_FOR_READERS
    assert not found, f"{' '.join(args)} imported {sorted(found)}; import them inside the function that needs them"


def test_next_does_not_import_rich(busy_storm: Path) -> None:
    """The issue's named guard, through -X importtime as a user would see it.
    A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "storm_queue", "next", "--root", str(busy_storm)],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "storm_queue.store.directory.store" in imported
    assert not [m for m in imported if m.split(".")[0] == "rich"]


def test_a_request_imports_no_rich_and_no_lock_library(busy_storm: Path) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    modules = loaded(busy_storm, "unbump", "b")
    assert "fcntl" in modules  # a writer takes the lock
    assert not {m for m in modules if m.split(".")[0] in ("rich", "filelock", "asyncio")}


def test_the_package_loads_its_names_on_first_use() -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    code = ("import sys, storm_queue; assert 'storm_queue.service.storm' not in sys.modules; "
            "from storm_queue import Storm, Listing, Outcome, StormError, UnknownOrder, NoStorm, Busy, RecordFailed; "
            "import storm_queue.service.storm as d, storm_queue.core.errors as e; "
            "assert Storm is d.Storm and Busy is e.Busy and issubclass(UnknownOrder, StormError); "
            "assert set(storm_queue.__all__) <= set(dir(storm_queue)); "
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
    import storm_queue

    with pytest.raises(AttributeError):
        storm_queue.no_such_name  # noqa: B018


# -- the quick path answers exactly as click does ----------------------

CLICK = "import sys; from storm_queue.cli.app import main; main(prog_name='storm-queue')"


def both(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    env = env or clean_env()
    quick = subprocess.run([sys.executable, "-m", "storm_queue", *args], capture_output=True, cwd=cwd, env=env, timeout=60)
    slow = subprocess.run([sys.executable, "-c", CLICK, *args], capture_output=True, cwd=cwd, env=env, timeout=60)
    return quick, slow


def same(quick: subprocess.CompletedProcess, slow: subprocess.CompletedProcess) -> None:
    assert (quick.returncode, quick.stdout, quick.stderr) == (slow.returncode, slow.stdout, slow.stderr)


def storms(tmp_path: Path) -> dict[str, Path]:
    """Storms in the situations a reader meets: plain, with blocked lanes to
    mark and a skipped line to say, with a torn tail, with an unknown order."""
    plain = make_storm(tmp_path / "plain", QUEUE, abandoned=["gone"])
    marks = make_storm(tmp_path / "marks", QUEUE + "bad*slug 1\n", abandoned=["gone"])
    torn = make_storm(tmp_path / "torn", QUEUE)
    subprocess.run([sys.executable, "-m", "storm_queue", "bump", "d", "--root", str(torn)], env=clean_env(), check=True,
                   capture_output=True, timeout=60)
    with open(torn / "priority.log", "ab") as f:
        f.write(b'{"v":1,"seq":2')
    unknown = make_storm(tmp_path / "unknown", QUEUE)
    (unknown / "priority.log").write_text("not json\n")
    halted = make_storm(tmp_path / "halted", QUEUE)  # next and claim say halted, by whom, when and why
    subprocess.run([sys.executable, "-m", "storm_queue", "halt", "--reason", 'a "freeze"', "--root", str(halted)],
                   env=clean_env(), check=True, capture_output=True, timeout=60)
    return {"plain": plain, "marks": marks, "torn": torn, "unknown": unknown, "halted": halted}


@pytest.mark.parametrize("form", [["next"], ["next", "--json"], ["list", "--json"], ["--json", "next"],
                                  ["next", "--json", "--root", "{root}"], ["next", "--root", "{root}", "--json"],
                                  ["list", "--root", "{root}", "--json"]])
def test_quick_forms_answer_as_click_does(tmp_path: Path, form: list[str]) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    for name, root in storms(tmp_path).items():
        args = [a.replace("{root}", str(root)) for a in form]
        quick, slow = both(args, cwd=root)
        same(quick, slow)
        if name == "unknown" and form[0] != "--json":
            assert quick.returncode == 3
        if name == "marks" and form[0] != "--json":  # the second run found nothing left to say
            assert b"skipped" not in quick.stderr
        if name == "halted" and "list" in form:
            assert quick.returncode == 0 and b'"halted": true' in quick.stdout
        elif name == "halted":
            assert quick.returncode == 0 and b"halted by operator:" in quick.stderr and b'"freeze' in quick.stderr
            assert quick.stdout.startswith(b"halted by operator:") or b'"decision": "halted"' in quick.stdout
            assert b'reason "a \\"freeze\\""' in quick.stdout or b'"halted": true' in quick.stdout


def test_other_forms_answer_as_click_does(tmp_path: Path) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    root = make_storm(tmp_path / "storm", QUEUE)
    afile = root / "queue.txt"
    forms = [["next", "--root"], ["next", "--root", str(afile)], ["next", "--root", str(tmp_path / "none")],
             ["next", "--json", "--json"], ["next", "--root", str(root), "--root", str(root)], ["list"],
             ["next", "--help"], ["next", "extra"], ["next", "--root", "--json"], ["list", "--jso"], []]
    for args in forms:
        quick, slow = both(args, cwd=tmp_path)
        same(quick, slow)


@pytest.mark.parametrize("form", [["claim"], ["claim", "--json"], ["claim", "--holder", "r1", "--ttl", "90"],
                                  ["claim", "--holder", "bad name"], ["claim", "--ttl", "5"],
                                  ["claim", "--root", "{root}", "--json", "--holder", "r2"]])
def test_quick_claims_answer_as_click_does(tmp_path: Path, form: list[str]) -> None:
    """Two copies of each storm, one asked through each path: the same
    decision, the same record, the same words (times aside).
    A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    import re
    import shutil

    for name, root in storms(tmp_path / "a").items():
        twin = tmp_path / "b" / name
        shutil.copytree(root, twin, symlinks=True)
        quick = subprocess.run([sys.executable, "-m", "storm_queue", *[a.replace("{root}", str(root)) for a in form]],
                               capture_output=True, cwd=root, env=clean_env(), timeout=60)
        slow = subprocess.run([sys.executable, "-c", CLICK, *[a.replace("{root}", str(twin)) for a in form]],
                              capture_output=True, cwd=twin, env=clean_env(), timeout=60)

        def plain(ran: subprocess.CompletedProcess) -> tuple:
            strip = lambda b: re.sub(rb"\d{4}-\d\d-\d\dT[\d:.]+Z", b"T", b.replace(str(twin).encode(), str(root).encode()))  # noqa: E731
            return ran.returncode, strip(ran.stdout), strip(ran.stderr)

        assert plain(quick) == plain(slow), name
        if name == "plain" and "--ttl" not in form and "bad name" not in form:
            assert quick.returncode == 0 and quick.stdout.split()[0] in (b"run", b'{"outcome":')
        if name == "halted" and "--ttl" not in form and "bad name" not in form:
            assert quick.returncode == 0 and (re.fullmatch(rb'halted by operator:\S+ at \S+Z, reason "a \\"freeze\\""\n',
                                                           quick.stdout) or b'"decision": "halted"' in quick.stdout)


def test_no_storm_here_answers_as_click_does(tmp_path: Path) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    lone = tmp_path / "nothing"
    lone.mkdir()
    for args in (["next"], ["list", "--json"]):
        quick, slow = both(args, cwd=lone)
        same(quick, slow)
        assert quick.returncode == 2


def short(args: list[str]) -> tuple | None:
    """``entry.quick_form(args)`` as (command, root, as_json, the keywords
    that differ from their defaults), or None."""
    form = entry.quick_form(args)
    if form is None:
        return None
    command, words = form
    defaults = {p.name: () if p.multiple else (False if p.kind == "flag" else p.default) for p in command.params}
    rest = {k: v for k, v in words.items() if k not in ("root", "as_json") and v != defaults[k]}
    return command.name, words["root"], words["as_json"], rest


@pytest.mark.parametrize(("args", "form"), [
    (["next"], ("next", None, False, {})),
    (["list", "--json"], ("list", None, True, {})),
    (["list"], ("list", None, False, {})),
    (["next", "--root", ".", "--json"], ("next", ".", True, {})),
    (["claim", "--holder", "r1", "--ttl", "90"], ("claim", None, False, {"holder": "r1", "ttl": 90})),
    (["claim", "--key", "k"], ("claim", None, False, {"key": "k"})),
    (["bump", "a"], ("bump", None, False, {"slug": "a"})),
    (["bump", "--reason=x y", "a", "--wait", "2.5"], ("bump", None, False, {"slug": "a", "reason": "x y", "wait": 2.5})),
    (["push", "z", "26", "--deps", "c,e", "--dry-run"], ("push", None, False, {"slug": "z", "issue": "26", "deps": "c,e", "dry_run": True})),
    (["log", "--slug", "a", "--slug", "b", "--last", "0"], ("log", None, False, {"slugs": ("a", "b"), "last": 0})),
    (["init", "--json"], ("init", None, True, {})),
    (["--json", "init", "d"], ("init", None, True, {"directory": "d"})),
    (["bump", "--", "a"], ("bump", None, False, {"slug": "a"})),
    (["claim", "--ttl", "0"], None),
    (["claim", "--ttl", "٣"], None),
    (["claim", "--ttl", "1e3"], None),
    (["claim", "--holder", "a", "--holder", "b"], None),
    (["next", "--holder", "a"], None),
    (["next", "--json", "--json"], None),
    (["next", "--root"], None),
    (["next", "--root", "-x"], None),
    (["bump", "a", "--reason", "-x"], None),
    (["bump"], None),
    (["bump", "a", "b"], None),
    (["next", "-h"], None),
    (["next", "--help"], None),
    (["--version"], None),
    (["--root", "/", "init"], None),
    (["--json", "watch"], None),
    (["completion", "bash"], None),
    (["demo"], None),
    (["settle", "a", "merged"], None),
    (["finish", "a", "--token", "1"], None),
    ([], None),
])
def test_which_forms_are_quick(args: list[str], form: tuple | None) -> None:
    assert short(args) == form


def test_shell_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_STORM_QUEUE_COMPLETE", "bash_source")
    assert entry.quick_form(["next"]) is None


SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "storm-queue"


def test_the_command_is_the_script_that_calls_the_entry_point() -> None:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"scripts/storm-queue" = "storm-queue"' in text and "\n[project.scripts]" not in text
    code = [line for line in SCRIPT.read_text().splitlines() if line and not line.startswith("#")]
    assert code == ["import sys", "from storm_queue.cli.entry import main", "sys.exit(main())"]
    assert os.path.basename(entry.__file__) == "entry.py"
    installed = Path(sys.executable).parent / "storm-queue"
    if installed.exists():  # the environment's own command is that script, with its interpreter put in
        assert installed.read_text().split("\n", 1)[1] == SCRIPT.read_text().split("\n", 1)[1]


# What only an error, a storm.toml (tomllib's parser) or click loads: the json
# package imports re, and re imports enum, a quarter of a request's start-up.
NEVER_ON_A_PLAIN_REQUEST = {"re", "json", "enum"}


@pytest.mark.parametrize("args", [("bump", "b"), ("next",), ("claim",), ("list", "--json")], ids=" ".join)
def test_the_command_loads_neither_re_nor_json(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    root = make_storm(tmp_path / "storm", QUEUE, abandoned=["gone"])
    done = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), *args, "--root", str(root)],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    modules = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "storm_queue.store.directory.store" in modules and done.stdout  # the script really ran the command
    assert not modules & NEVER_ON_A_PLAIN_REQUEST, f"{' '.join(args)} imported {sorted(modules & NEVER_ON_A_PLAIN_REQUEST)}"


@pytest.mark.parametrize("args", [("next",), ("list",), ("list", "--json"), ("unbump", "b"), ("why", "b")])
def test_only_watch_imports_the_live_view(busy_storm: Path, args: tuple[str, ...]) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    modules = loaded(busy_storm, *args)
    assert "storm_queue.store.directory.store" in modules
    assert "storm_queue.cli.watch" not in modules, f"{' '.join(args)} imported storm_queue.cli.watch"
    assert "storm_queue.cli.watch" in loaded(busy_storm, "watch", "--once")


# What a command's path never loads on a directory storm: the terminal library,
# the lock library, the database driver, the socket module (a claim's default
# holder is the kernel's node name) and asyncio; tomllib only when there is a
# storm.toml to read. (The click path of a request still loads click itself.)
NEVER_ON_A_DIRECTORY = {"rich", "filelock", "psycopg2", "psycopg", "psycopg_binary", "psycopg_c", "psycopg_pool", "socket",
                        "selectors", "asyncio", "ssl"}
DECLARATION = '[priority]\nsources = ["nightly"]\n'


@pytest.mark.parametrize("declared", [False, True], ids=["no-storm.toml", "storm.toml"])
@pytest.mark.parametrize("args", [("bump", "b"), ("unbump", "b"), ("push", "e", "5"), ("claim",), ("claim", "--json"),
                                  ("next",), ("list", "--json")], ids=" ".join)
def test_a_command_loads_only_what_it_uses(tmp_path: Path, args: tuple[str, ...], declared: bool) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    root = make_storm(tmp_path / "storm", QUEUE, abandoned=["gone"], toml=DECLARATION if declared else None)
    if args[0] == "unbump":  # something to un-bump
        subprocess.run([sys.executable, "-m", "storm_queue", "bump", "b", "--root", str(root)], env=clean_env(),
                       check=True, capture_output=True, timeout=60)
    modules = loaded(root, *args)
    assert "storm_queue.store.directory.store" in modules  # the probe really ran the command
    if args[0] in ("bump", "unbump", "push", "claim"):
        assert "storm_queue.store.directory.log.writer" in modules  # ... and it was a request that wrote
    tops = {m.split(".")[0] for m in modules}
    assert not tops & NEVER_ON_A_DIRECTORY, f"{' '.join(args)} imported {sorted(tops & NEVER_ON_A_DIRECTORY)}"
    assert ("tomllib" in tops) == declared, f"{' '.join(args)} {'did not import' if declared else 'imported'} tomllib"
    if args[0] in ("next", "list", "claim") and not declared:  # the click-free path (tomllib's typing loads it)
        assert "contextlib" not in modules


# What ``next`` loads of storm-queue on a storm with nothing to mark or say:
# the reads alone (``directory``), never the requests (``desk.Storm``, the
# request path, authority, the lock) nor the human output (``render``).
# A module added to this path is a start-up cost: add it here knowingly.
NEXT_MODULES = {"cli", "cli.answer", "cli.commands", "cli.entry", "cli.streams", "cli.upkeep", "core", "core.clock", "core.config", "core.errors",
                "core.exit_codes", "core.fold", "core.framing", "core.jsoncodec", "core.lane", "core.ledgers",
                "core.logread", "core.names", "core.outcome", "core.queuetext", "core.records", "core.resolver",
                "core.statebody", "core.stream", "roots", "service", "service.storm", "store", "store.directory", "cli.params",
                "store.directory.declared", "store.directory.effects", "store.directory.fsutil", "store.directory.ledger", "store.directory.log",
                "store.directory.log.checkpoint", "store.directory.log.found", "store.directory.log.reader",
                "store.directory.queuefile", "store.directory.store", "wall"}
#: what a request of each kind never loads: the other kinds' modules (``service.storm.KINDS``), and what
#: only they need; a reader never loads the request path, nor who asks
NOT_FOR = {"bump": {"service.leases", "core.runs", "ops.adopt", "core.halt", "core.starving", "cli.watch",
                    "core.why", "service.history", "cli.render", "cli.handlers"},
           "claim": {"service.requests", "ops.adopt", "cli.render", "cli.handlers", "cli.watch", "core.why",
                     "service.history"},
           "next": {"service.passage", "service.requests", "service.leases", "core.runs", "ops.adopt",
                    "core.authority", "store.directory.accounts", "core.halt", "cli.render", "cli.handlers", "store.directory.log.lock",
                    "store.directory.log.writer", "core.shapes", "core.starving"}}


@pytest.mark.parametrize("args", [("next",), ("next", "--json"), ("bump", "b"), ("unbump", "b"), ("push", "e", "5"),
                                  ("claim",), ("claim", "--json")], ids=" ".join)
def test_each_command_loads_only_its_part_of_the_storm(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A real process: start-up (the console script's path from a fresh interpreter, what it imports) is tested."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nd 4\n")
    if args[0] == "unbump":
        subprocess.run([sys.executable, "-m", "storm_queue", "bump", "b", "--root", str(root)], env=clean_env(),
                       check=True, capture_output=True, timeout=60)
    ours = {m[len("storm_queue."):] for m in loaded(root, *args) if m.startswith("storm_queue.")}
    assert "store.directory.store" in ours
    kind = {"unbump": "bump", "push": "bump"}.get(args[0], args[0])
    assert not ours & NOT_FOR[kind], f"{' '.join(args)} loaded {sorted(ours & NOT_FOR[kind])}"
    if kind == "next":
        assert ours == NEXT_MODULES, f"more: {sorted(ours - NEXT_MODULES)}, fewer: {sorted(NEXT_MODULES - ours)}"


# What a bump and an unbump load of storm-queue on a database storm: the
# request path and the database store, never the directory store (its lock
# included), the human output or the other kinds of request. store.postgres.upkeep: the command line asks
# the store's upkeep to tell of a lock wait (a database tells nothing); it imports nothing as it loads (0.1 ms).
DATABASE_BUMP_MODULES = {
    "cli", "cli.answer", "cli.commands", "cli.entry", "cli.params", "cli.streams", "cli.upkeep", "core", "core.authority",
    "core.clock",
    "core.config", "core.errors", "core.exit_codes", "core.fold", "core.framing", "core.jsoncodec", "core.lane",
    "core.ledgers", "core.logread", "core.names", "core.outcome", "core.passwords", "core.queuetext", "core.records",
    "core.resolver", "core.shapes", "core.statebody", "roots", "service", "service.passage", "service.requests", "service.storm",
    "store", "store.postgres", "store.postgres.connect", "store.postgres.log", "store.postgres.queries",
    "store.postgres.rows", "store.postgres.store", "store.postgres.upkeep", "store.postgres.version", "store.postgres.driver", "wall"}
#: what a database request loads beyond a directory's: psycopg2 and what it loads (the driver: its C
#: extension loads ssl and socket; datetime, decimal and json decode values), select (the driver's waits),
#: urllib.parse and what it loads (core/passwords.py reads the URL), contextlib (the store's transactions)
DRIVER_MODULES = {"psycopg2", "psycopg2._psycopg", "psycopg2.extensions", "psycopg2._json", "psycopg2._range",
                  "psycopg2.errors", "_datetime", "datetime", "_decimal", "decimal", "numbers", "math", "_json", "json",
                  "json.decoder", "json.encoder", "json.scanner", "_socket", "socket", "selectors", "_ssl", "ssl",
                  "array", "base64", "binascii", "errno", "warnings", "struct", "_struct", "types", "select",
                  "urllib", "urllib.parse", "ipaddress", "re", "re._casefix", "re._compiler", "re._constants",
                  "re._parser", "_sre", "enum", "copyreg", "keyword", "operator", "_operator", "reprlib",
                  "contextlib", "collections", "collections.abc", "_collections", "functools", "_functools",
                  "itertools"}


@pytest.mark.postgresql
@pytest.mark.parametrize("verb", ["bump", "unbump"])
def test_a_database_bump_loads_the_driver_and_nothing_else_a_directory_bump_does_not(pg_url, tmp_path, verb) -> None:
    """A real process: start-up (what a fresh interpreter imports) is tested.
    The driver is psycopg2 (store/postgres/driver.py) and what it loads,
    never psycopg; beside it, the URL's reading (urllib.parse) and
    storm-queue's own modules, only what a directory bump loads too; never
    click or rich."""
    assert subprocess.run([sys.executable, "-m", "storm_queue", "init", pg_url], env=clean_env(), capture_output=True,
                          timeout=60).returncode == 0
    for args in (("add", "b", "2"), *((("bump", "b"),) if verb == "unbump" else ())):
        subprocess.run([sys.executable, "-m", "storm_queue", *args, "--root", pg_url], env=clean_env(), check=True,
                       capture_output=True, timeout=60)
    database = loaded(pg_url, verb, "b")
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    if verb == "unbump":
        subprocess.run([sys.executable, "-m", "storm_queue", "bump", "b", "--root", str(root)], env=clean_env(),
                       check=True, capture_output=True, timeout=60)
    directory = loaded(root, verb, "b")
    ours = {m[len("storm_queue."):] for m in database if m.startswith("storm_queue.")}
    assert ours == DATABASE_BUMP_MODULES, f"more: {sorted(ours - DATABASE_BUMP_MODULES)}, fewer: {sorted(DATABASE_BUMP_MODULES - ours)}"
    assert "psycopg2" in database  # the probe really reached the server
    assert not {m.split(".")[0] for m in database} & {"psycopg", "psycopg_binary", "psycopg_c", "psycopg_pool"}
    others = {m for m in database if not m.startswith("storm_queue")} - directory
    assert others <= DRIVER_MODULES, f"a database {verb} loaded {sorted(others - DRIVER_MODULES)}, which neither the driver nor a directory {verb} does"
    assert not {m.split(".")[0] for m in database} & {"click", "rich", "filelock"}

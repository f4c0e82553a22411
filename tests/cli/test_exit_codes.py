"""Contract section 5, through the real command line: every exit code, and
the rule that no refusal is ever a crash (4).

0 done (a recorded no-op too), 1 not authorised, 2 refused as asked or a
usage error (not recorded, said on stderr, log untouched), 3 unknown order.

The requests and refusals run on a directory storm and on a database storm
alike (the ``store`` fixture). Directory-only, each for its one reason: a
stranger made by chown of queue.txt (on a database the stranger is another
role, whose refusal cannot be recorded: tests/database), usage errors and
malformed slugs checked by the directory's files being untouched, and a
damaged priority.log (a database's event table refuses the damage).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import clean_env, log_events, make_storm, run_cli, run_main, tree

QUEUE = "a 1\nb 2 a\nc 3\nd 4 gone\ne 5 f\nf 6 e\ng 7 nowhere\nfin 8\nint 9\n"
TOML = '[priority]\nsources = ["nightly"]\n'


def request(root, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """ROOT: a directory, or a store (tests/stores.py)."""
    done = root.cli(*args, "--json", env=env) if hasattr(root, "cli") else run_cli(root, *args, "--json", env=env)
    return done, json.loads(done.stdout)


def requests(store) -> list[dict]:
    """The log's lines but a database storm's first, which records its init."""
    return [e for e in store.events() if e["action"] != "init"]


@pytest.fixture
def full(tmp_path: Path) -> Path:
    """A directory storm with lanes for every kind of refusal."""
    return make_storm(tmp_path / "storm", QUEUE, integrated=["int"], abandoned=["gone"], finished=["fin"], toml=TOML)


@pytest.fixture
def either(store):
    """The same storm as ``full``, kept by each store in turn."""
    store.make(QUEUE, integrated=["int"], abandoned=["gone"], finished=["fin"], toml=TOML)
    return store


# -- 0 ---------------------------------------------------------------


def test_admitted_request_exits_0_and_is_recorded(either) -> None:
    done, answer = request(either, "bump", "b", "--reason", "outage")
    assert done.returncode == 0, done.stderr
    assert answer["outcome"] == "done" and answer["code"] is None and answer["recorded"] is True
    assert answer["moved"] == ["a", "b"]
    events = requests(either)
    assert [e["action"] for e in events] == ["bump"]
    assert events[0]["moved"] == ["a", "b"] and events[0]["reason"] == "outage"


@pytest.mark.parametrize("args", [("bump", "int"), ("bump", "fin"), ("bump", "gone"), ("push", "fin", "8"), ("push", "int", "9")])
def test_recorded_noop_exits_0(either, args: tuple[str, ...]) -> None:
    done, answer = request(either, *args)
    assert done.returncode == 0, done.stderr
    assert answer["outcome"] == "noop" and answer["code"] is None and answer["recorded"] is True
    assert answer["moved"] == []
    events = requests(either)
    assert len(events) == 1
    assert events[0]["action"] == args[0] and events[0]["noop"]
    assert events[0]["moved"] == []


def test_list_and_next_exit_0(either) -> None:
    listed = either.cli("list")
    assert listed.returncode == 0, listed.stderr
    nxt = either.cli("next")
    assert nxt.returncode == 0, nxt.stderr
    assert nxt.stdout == "review fin\n"


def test_successful_reset_exits_0(full: Path) -> None:
    assert run_cli(full, "bump", "a").returncode == 0
    (full / "priority.log").write_bytes(b"not a log line\n")
    assert run_cli(full, "list").returncode == 3
    done, answer = request(full, "reset", "--reason", "disk move")
    assert done.returncode == 0, done.stderr
    assert answer["outcome"] == "done" and answer["action"] == "reset" and answer["recorded"] is True
    assert [e["action"] for e in log_events(full)] == ["reset"]
    assert run_cli(full, "list").returncode == 0


# -- 1 and 2: every refusal code, recorded, never 4 ------------------


def _prime_unbump_needed(store) -> None:
    assert store.cli("bump", "b").returncode == 0


def _prime_not_operator(root: Path) -> None:
    # The operator makes one request, so the log, witness and lock exist;
    # then queue.txt passes to another account: root is no longer the operator.
    assert run_cli(root, "bump", "c").returncode == 0
    os.chown(root / "queue.txt", 65534, 65534)


NOT_OPERATOR = ("not_operator", 1, False, ("bump", "a"), {}, _prime_not_operator)  # a directory's stranger: chown
REFUSALS = [
    # (code, exit, authorised, args, extra env, setup)
    ("invalid_slug", 2, False, ("bump", "../x"), {}, None),
    ("invalid_slug", 2, False, ("unbump", "x;y"), {}, None),
    ("invalid_issue", 2, False, ("push", "z", "\u0663"), {}, None),
    ("invalid_dependency", 2, False, ("push", "z", "5", "--deps", "a,.hidden"), {}, None),
    ("invalid_source", 2, False, ("bump", "a", "--source=a*"), {}, None),
    ("blank_reason", 2, False, ("reset", "--reason", "   "), {}, None),
    ("lane_process", 1, False, ("bump", "a"), {"STORM_QUEUE_LANE": "a"}, None),
    ("undeclared_source", 1, False, ("bump", "a", "--source", "github-label"), {}, None),
    ("operator_only", 1, False, ("reset", "--reason", "r", "--source", "nightly"), {}, None),
    ("unknown_slug", 2, True, ("bump", "zz"), {}, None),
    ("dependency_abandoned", 2, True, ("bump", "d"), {}, None),
    ("dependency_unknown", 2, True, ("bump", "g"), {}, None),
    ("dependency_cycle", 2, True, ("bump", "e"), {}, None),
    ("needed_by_named", 2, True, ("unbump", "a"), {}, _prime_unbump_needed),
    ("not_prioritised", 2, True, ("unbump", "c"), {}, None),
    ("issue_mismatch", 2, True, ("push", "a", "99"), {}, None),
    ("deps_mismatch", 2, True, ("push", "b", "2", "--deps", "c"), {}, None),
    ("log_readable", 2, True, ("reset", "--reason", "nothing is wrong"), {}, None),
]


@pytest.mark.parametrize("code,exit,authorised,args,env,setup", REFUSALS,
                         ids=[f"{r[0]}-{r[3][0]}" for r in REFUSALS])
def test_every_refusal_has_its_exit_code_and_is_recorded(either, code, exit, authorised, args, env, setup) -> None:
    _refused_and_recorded(either, code, exit, authorised, args, env, setup)


def test_a_stranger_by_chown_is_refused_and_recorded(tmp_path: Path) -> None:
    from tests.stores import DirectoryStorm

    store = DirectoryStorm(tmp_path)
    store.make(QUEUE, integrated=["int"], abandoned=["gone"], finished=["fin"], toml=TOML)
    code, exit, authorised, args, env, setup = NOT_OPERATOR
    _refused_and_recorded(store, code, exit, authorised, args, env, lambda s: setup(s.path))


def _refused_and_recorded(full, code, exit, authorised, args, env, setup) -> None:
    if setup is not None:
        setup(full)
    before = full.events()
    done, answer = request(full, *args, env=clean_env(**env))
    assert done.returncode == exit, (done.stdout, done.stderr)
    assert done.returncode != 4
    assert answer["outcome"] == "refused"
    assert answer["code"] == code
    assert answer["recorded"] is True
    assert answer["action"] == args[0]
    assert answer["message"]
    after = full.events()
    assert len(after) == len(before) + 1
    event = after[-1]
    assert event["action"] == "refused"
    assert event["requested"] == args[0]
    assert event["code"] == code
    assert event["authorised"] is authorised
    # the same refusal in words goes to stderr, not stdout
    plain = full.cli(*args, env=clean_env(**env))
    assert plain.returncode == exit
    assert plain.stdout == ""
    assert code in plain.stderr


@pytest.mark.parametrize("slug", ["", "-", ".hidden", "a*", "x;y", "../x", "a..b", "x" * 201, "a b", "\u0663", "a/b"])
def test_malformed_slugs_are_refused_with_2_never_a_crash(full: Path, slug: str) -> None:
    for verb in ("bump", "unbump"):
        # options first, then "--", so a slug that starts with "-" is still the argument
        done = run_cli(None, verb, "--json", "--root", str(full), "--", slug)
        answer = json.loads(done.stdout)
        assert done.returncode == 2, (slug, done.stderr)
        assert answer["code"] == "invalid_slug"
        assert answer["slug"] == slug
    assert all(e["code"] == "invalid_slug" and e["slug"] == slug for e in log_events(full))


def test_slug_that_is_not_utf8_is_refused_not_crashed(full: Path) -> None:
    done = run_main([b"bump", b"a\xff\xfe", b"--json", b"--root", bytes(full)], text=False)
    assert done.returncode == 2, done.stderr
    answer = json.loads(done.stdout)
    assert answer["code"] == "invalid_slug"
    events = log_events(full)
    assert len(events) == 1 and events[0]["code"] == "invalid_slug"


def test_stranger_refusal_that_cannot_be_recorded_still_exits_1(tmp_path: Path) -> None:
    """Root is not the operator of a storm it does not own; with no log yet it
    creates no file there, and says the refusal was not recorded."""
    root = make_storm(tmp_path / "storm", "a 1\n")
    os.chown(root / "queue.txt", 65534, 65534)
    before = tree(root)
    done, answer = request(root, "bump", "a")
    assert done.returncode == 1, done.stderr
    assert answer["code"] == "not_operator" and answer["recorded"] is False
    assert "not recorded" in answer["message"]
    assert tree(root) == before


# -- 2: usage errors are not requests --------------------------------

USAGE_ERRORS = [
    ("bump", "a", "--bogus"),
    ("bump",),
    ("push", "a"),
    ("push",),
    ("unbump",),
    ("list", "--bogus"),
    ("next", "extra"),
    ("bump", "a", "--wait", "soon"),
    ("no-such-command",),
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=[" ".join(a) for a in USAGE_ERRORS])
def test_usage_error_exits_2_on_stderr_and_is_not_recorded(full: Path, args: tuple[str, ...]) -> None:
    assert run_cli(full, "bump", "c").returncode == 0  # a log exists, so "untouched" means something
    before = tree(full)
    for extra in ((), ("--json",)):
        done = run_cli(full, *args, *extra)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr.strip(), "a usage error is said on stderr"
        if not extra:
            assert done.stdout == ""
        assert tree(full) == before, "a usage error records nothing and touches nothing"


def test_usage_error_on_a_fresh_storm_creates_no_log(full: Path) -> None:
    done = run_cli(full, "push", "z")
    assert done.returncode == 2
    assert "ISSUE" in done.stderr or "issue" in done.stderr.lower()
    assert not (full / "priority.log").exists()
    assert not (full / ".priority.log.witness").exists()
    assert not (full / "progress.log").exists()


# -- 3: unknown order ------------------------------------------------

DAMAGE = {
    "malformed line": lambda root: (root / "priority.log").write_bytes(b"garbage\n"),
    "shortened": lambda root: (root / "priority.log").write_bytes((root / "priority.log").read_bytes().splitlines(keepends=True)[0]),
    "log lost": lambda root: (root / "priority.log").unlink(),
    "witness lost": lambda root: (root / ".priority.log.witness").unlink(),
    "chain broken": lambda root: (root / "priority.log").write_bytes(
        (root / "priority.log").read_bytes().replace(b'"slug":"a"', b'"slug":"b"', 1)),
    "unknown version": lambda root: (root / "priority.log").write_bytes(
        (root / "priority.log").read_bytes().replace(b'{"v":1,', b'{"v":9,', 1)),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_unknown_order_exits_3_and_nothing_is_recorded(full: Path, damage: str) -> None:
    assert run_cli(full, "bump", "a").returncode == 0
    assert run_cli(full, "bump", "c").returncode == 0
    DAMAGE[damage](full)
    before = tree(full)
    for args in (("list",), ("next",), ("bump", "b"), ("push", "z", "5"), ("unbump", "a"),
                 ("bump", "../x"), ("bump", "zz")):
        done = run_cli(full, *args)
        assert done.returncode == 3, (damage, args, done.stdout, done.stderr)
        assert "storm-queue reset" in done.stderr
        # next's reason is on stdout too (issue 20): a runner that logs only stdout says why it cannot go on
        assert done.stdout == ("unknown: " + done.stderr.removeprefix("storm-queue: ") if args == ("next",) else "")
    # a lane process's refusal is not recorded onto an unknown order either
    lane = run_cli(full, "bump", "a", env=clean_env(STORM_QUEUE_LANE="a"))
    assert lane.returncode == 3
    assert tree(full) == before, "no request re-creates, appends to or re-witnesses a damaged log"


# -- the root cannot be found ----------------------------------------


def test_no_storm_exits_2_and_says_what_to_do(tmp_path: Path) -> None:
    empty = tmp_path / "nothing" / "here"
    empty.mkdir(parents=True)
    for parent in [empty, *empty.parents]:
        assert not (parent / "queue.txt").exists() and not (parent / "storm.toml").exists()
    for args in (("list",), ("next",), ("bump", "a")):
        done = run_cli(None, *args, cwd=empty)
        assert done.returncode == 2, done.stderr
        assert "--root" in done.stderr and "STORM_QUEUE_ROOT" in done.stderr
    missing = run_cli(tmp_path / "does-not-exist", "list")
    assert missing.returncode == 2
    assert "--root" in missing.stderr
    assert list(empty.iterdir()) == []



def test_a_progress_log_that_cannot_be_written_is_said_and_what_next_would_say_waits_for_it(tmp_path) -> None:
    """progress.log failing (here a directory in its place) was silent:
    next and bump exited 0 saying nothing, and next marked its news (a
    skipped line) as said, so it was never said once the file worked
    again. Now each says so on stderr (a request in ``warnings`` too), and
    the news is said by the first next that can."""
    root = make_storm(tmp_path / "s", "a 1\nbad$ 2\n")
    (root / "progress.log").mkdir()
    first = run_cli(root, "next")
    assert first.returncode == 0 and first.stdout == "run a 1\n"
    assert "progress.log could not be written" in first.stderr
    bumped = run_cli(root, "bump", "a", "--json")
    assert bumped.returncode == 0
    assert json.loads(bumped.stdout)["warnings"] == [
        "progress.log could not be written; the request is in the priority log (storm-queue log shows it)"]
    assert [e["action"] for e in log_events(root)] == ["bump"]
    (root / "progress.log").rmdir()
    again = run_cli(root, "next")
    assert again.returncode == 0 and again.stderr == ""
    assert 'queue.txt line 2 skipped: "bad$ 2"' in (root / "progress.log").read_text()

"""Authorisation (contract section 3 item 4, issue 2 item 5) with a real
second uid: 65534 (``nobody``).

The interpreter lives under /root, which other accounts cannot traverse, so
the other account is not a new interpreter: the test forks, the child drops
to uid 65534 and calls ``storm_queue.cli.app.main`` itself. Everything the CLI
may import lazily is imported before the fork.
"""

from __future__ import annotations

import hashlib  # noqa: F401 -- imported before forking, see above
import io
import json
import os
import pwd  # noqa: F401
import select
import shutil
import signal
import sys
import tempfile
import tomllib  # noqa: F401
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import filelock  # noqa: F401
import pytest

import storm_queue.cli.app
import storm_queue.ops.demo  # noqa: F401
import storm_queue.service.storm  # noqa: F401
import storm_queue.store.directory.log.lock  # noqa: F401
import storm_queue.store.directory.log.reader  # noqa: F401
import storm_queue.store.directory.log.writer  # noqa: F401
import storm_queue.cli.render  # noqa: F401
from tests.conftest import clean_env, log_events, run_cli, tree

NOBODY = 65534


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def drop_to_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def run_forked(root: Path, *args: str, env: dict[str, str] | None = None,
               drop: Callable[[], None] = drop_to_nobody, cwd: Path | None = None) -> Ran:
    """Run the CLI in a forked child that first calls ``drop`` (by default:
    become uid/gid 65534 with no supplementary groups), in ``cwd`` (default
    ``root``)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 97
        try:
            os.close(out_r)
            os.close(err_r)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(out_w)
            os.close(err_w)
            sys_stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="surrogateescape")
            sys_stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
            sys.stdout, sys.stderr = sys_stdout, sys_stderr
            sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
            signal.alarm(60)  # never hang the suite
            drop()
            os.chdir(cwd or root)
            os.environ.clear()
            os.environ.update(env if env is not None else clean_env())
            try:
                storm_queue.cli.app.main([*args, "--root", str(root)], prog_name="storm-queue")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 96)
        except BaseException:  # noqa: BLE001 -- report anything to the parent
            try:
                os.write(2, traceback.format_exc().encode())
            except OSError:
                pass
            code = 98
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: BLE001
                pass
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    chunks = {out_r: [], err_r: []}
    open_fds = [out_r, err_r]
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], 90)
        if not ready:
            os.kill(pid, 9)
            break
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.remove(fd)
                os.close(fd)
    for fd in open_fds:
        os.close(fd)
    from tests.children import reap

    code = os.waitstatus_to_exitcode(reap(pid, 120))
    ran = Ran(code, b"".join(chunks[out_r]).decode("utf-8", "replace"), b"".join(chunks[err_r]).decode("utf-8", "replace"))
    assert code not in (96, 97, 98), ran.stderr
    return ran


def json_of(ran) -> dict:
    return json.loads(ran.stdout)


@pytest.fixture
def storm_dir():
    """A factory for storms another account can reach: under a mkdtemp in
    /tmp made 0755 (pytest's tmp_path is 0700), files 0644."""
    made: list[str] = []

    def factory(queue: str, toml: str | None = None, abandoned=()) -> Path:
        base = tempfile.mkdtemp(prefix="sq-auth-", dir="/tmp")
        made.append(base)
        os.chmod(base, 0o755)
        root = Path(base) / "storm"
        root.mkdir(mode=0o755)
        os.chmod(root, 0o755)
        files = {"queue.txt": queue}
        if toml is not None:
            files["storm.toml"] = toml
        if abandoned:
            files["abandoned.txt"] = "".join(s + "\n" for s in abandoned)
        for name, text in files.items():
            (root / name).write_text(text)
            os.chmod(root / name, 0o644)
        return root

    yield factory
    for base in made:
        shutil.rmtree(base, ignore_errors=True)


def chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def test_the_child_really_is_another_account(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    ran = run_forked(root, "next", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json_of(ran)["decision"] == "run a 1"

    def drop_and_check() -> None:
        drop_to_nobody()
        assert (os.getuid(), os.geteuid(), os.getgid(), os.getgroups()) == (NOBODY, NOBODY, NOBODY, [])
        try:
            open(root / "queue.txt", "a").close()
        except PermissionError:
            return
        raise AssertionError("uid 65534 could write root's queue.txt")

    assert run_forked(root, "list", drop=drop_and_check).returncode == 0


# -- (a) a root-owned storm, and nobody ------------------------------


@pytest.mark.parametrize("with_log", [False, True], ids=["fresh storm", "storm with a log"])
def test_stranger_is_refused_not_recorded_and_touches_nothing(storm_dir, with_log: bool) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\nb 2 a\n")
    if with_log:
        assert run_cli(root, "bump", "b").returncode == 0
    before = tree(root)
    for args in (("bump", "a"), ("push", "z", "5"), ("unbump", "b"), ("reset", "--reason", "r"),
                 ("bump", "a", "--source", "bot")):
        ran = run_forked(root, *args)
        assert ran.returncode == 1, (args, ran.stdout, ran.stderr)
        assert "not recorded" in ran.stderr
        assert ran.stdout == ""
        doc = json_of(run_forked(root, *args, "--json"))
        assert doc["code"] == "not_operator"
        assert doc["by"] == "account:nobody"
        assert doc["recorded"] is False
        assert "not recorded" in doc["message"]
        assert tree(root) == before, f"{args} changed the storm"
    if not with_log:
        assert not (root / "priority.log").exists()


def test_stranger_learns_nothing_about_the_lane(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    known = json_of(run_forked(root, "bump", "a", "--json"))
    unknown = json_of(run_forked(root, "bump", "nosuchlane", "--json"))
    assert known["code"] == unknown["code"] == "not_operator"
    assert known["message"] == unknown["message"].replace("nosuchlane", "a")


def test_stranger_with_a_malformed_slug_gets_2_not_recorded(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    before = tree(root)
    ran = run_forked(root, "bump", "../x", "--json")
    assert ran.returncode == 2, ran.stderr
    doc = json_of(ran)
    assert doc["code"] == "invalid_slug" and doc["recorded"] is False
    assert "not recorded" in doc["message"]
    plain = run_forked(root, "push", "z", "\u0663")
    assert plain.returncode == 2
    assert "not recorded" in plain.stderr
    assert tree(root) == before


def test_stranger_can_list_and_next_and_next_says_it_skipped_side_effects(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    # a skipped line and a blocked lane before the chosen one: next has side effects to skip
    root = storm_dir("gone 0\nx 1 gone\ny 2\nbad! 3\n", abandoned=["gone"])
    assert run_cli(root, "bump", "gone").returncode == 0  # a recorded no-op: the log exists
    before = tree(root)
    listed = run_forked(root, "list")
    assert listed.returncode == 0, listed.stderr
    assert "y" in listed.stdout and "bad!" in listed.stdout
    assert json_of(run_forked(root, "list", "--json"))["decision"] == "run y 2"
    nxt = run_forked(root, "next")
    assert nxt.returncode == 0, nxt.stderr
    assert nxt.stdout == "run y 2\n"
    assert nxt.stderr.strip(), "next must say on stderr that it skipped its side effects"
    assert "nobody" in nxt.stderr
    assert any(w in nxt.stderr for w in ("not marked", "not written", "skipped", "skip"))
    assert tree(root) == before
    assert json_of(run_forked(root, "next", "--json"))["decision"] == "run y 2"
    # the owner's next does the side effects the stranger skipped
    assert run_cli(root, "next").stdout == "run y 2\n"
    assert (root / "lanes" / "x" / ".qwenstorm" / "result.json").exists()


def test_stranger_can_read_a_storm_with_no_log(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\nb 2\n")
    before = tree(root)
    assert run_forked(root, "next").stdout == "run a 1\n"
    assert run_forked(root, "list").returncode == 0
    assert tree(root) == before


# -- (b) a storm owned by 65534, and root ----------------------------


def test_root_is_not_the_operator_of_a_storm_it_does_not_own(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\nb 2\nc 3\n")
    assert run_cli(root, "bump", "a").returncode == 0  # log, witness, lock and progress.log exist
    chown_tree(root, NOBODY)
    files = ["priority.log", ".priority.log.witness", "priority.log.lock", "progress.log", "queue.txt"]
    for args, code in ((("bump", "b"), "not_operator"), (("push", "z", "5"), "not_operator"),
                       (("unbump", "a"), "not_operator"), (("reset", "--reason", "r"), "not_operator")):
        before = log_events(root)
        done = run_cli(root, *args, "--json", env=clean_env(USER="nobody", LOGNAME="nobody"))
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        assert doc["code"] == code and doc["recorded"] is True
        assert doc["by"] == "account:root"
        after = log_events(root)
        assert len(after) == len(before) + 1
        event = after[-1]
        assert (event["action"], event["by"], event["code"], event["authorised"]) == ("refused", "account:root", code, False)
        assert event["requested"] == args[0]
        for name in files:
            assert os.stat(root / name).st_uid == NOBODY, f"{name} is no longer the storm owner's"
        stray_owned = [p for p, st in tree(root).items() if st[1] != NOBODY]
        assert stray_owned == [], f"root left files of its own in the storm: {stray_owned}"
    assert "z" not in (root / "queue.txt").read_text()
    # the owner can still write: the witness root replaced is the owner's
    mine = run_forked(root, "bump", "c", "--json")
    assert mine.returncode == 0, mine.stderr
    doc = json_of(mine)
    assert doc["by"] == "operator:nobody" and doc["recorded"] is True and doc["moved"] == ["c"]
    events = log_events(root)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert run_forked(root, "list").returncode == 0
    assert run_cli(root, "list").returncode == 0


def test_root_on_a_fresh_storm_it_does_not_own_creates_nothing(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    chown_tree(root, NOBODY)
    before = tree(root)
    done = run_cli(root, "bump", "a", "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["code"] == "not_operator" and doc["recorded"] is False and doc["by"] == "account:root"
    assert tree(root) == before
    # ... and nobody, the owner, can then start the log
    ran = run_forked(root, "bump", "a", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json_of(ran)["by"] == "operator:nobody"
    assert all(st[1] == NOBODY for st in tree(root).values())


def test_real_and_effective_uid_must_both_be_the_owners(storm_dir) -> None:
    """A real process: a forked child drops its real or effective uid to 65534."""
    root = storm_dir("a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    # real uid 65534, effective uid root: not the operator of root's storm
    ran = run_forked(root, "bump", "a", "--json", drop=lambda: os.setresuid(NOBODY, 0, 0))
    assert ran.returncode == 1, ran.stderr
    assert json_of(ran)["code"] == "not_operator"
    # real uid root, effective uid 65534 on nobody's storm: not the operator either
    other = storm_dir("a 1\n")
    chown_tree(other, NOBODY)
    ran = run_forked(other, "bump", "a", "--json", drop=lambda: os.setresuid(0, NOBODY, 0))
    assert ran.returncode == 1, ran.stderr
    assert json_of(ran)["code"] == "not_operator"


# -- (c) the operator, lanes and sources -----------------------------


@pytest.mark.parametrize("value", ["", "build-7", 'we"ird\nvalue'])
def test_lane_process_is_refused_and_recorded(storm_dir, value: str) -> None:
    root = storm_dir("a 1\n", toml='[priority]\nsources = ["nightly"]\n')
    for extra in ((), ("--source", "nightly")):
        done = run_cli(root, "bump", "a", *extra, "--json", env=clean_env(STORM_QUEUE_LANE=value))
        assert done.returncode == 1, done.stderr
        doc = json.loads(done.stdout)
        assert doc["code"] == "lane_process" and doc["recorded"] is True
        assert doc["by"] == "lane:" + json.dumps(value)
        event = log_events(root)[-1]
        assert (event["action"], event["code"], event["by"], event["authorised"]) == (
            "refused", "lane_process", "lane:" + json.dumps(value), False)
    assert all(e["action"] == "refused" for e in log_events(root))


def test_sources_declared_and_undeclared(storm_dir) -> None:
    root = storm_dir("a 1\nb 2\n", toml='[priority]\nsources = ["nightly-triage"]\n')
    refused = run_cli(root, "bump", "a", "--source", "github-label", "--json")
    assert refused.returncode == 1
    doc = json.loads(refused.stdout)
    assert (doc["code"], doc["by"], doc["recorded"]) == ("undeclared_source", "source:github-label", True)
    event = log_events(root)[-1]
    assert (event["action"], event["by"], event["code"]) == ("refused", "source:github-label", "undeclared_source")
    admitted = run_cli(root, "bump", "a", "--source", "nightly-triage", "--json")
    assert admitted.returncode == 0, admitted.stderr
    doc = json.loads(admitted.stdout)
    assert (doc["outcome"], doc["by"], doc["moved"]) == ("done", "source:nightly-triage", ["a"])
    event = log_events(root)[-1]
    assert (event["action"], event["by"]) == ("bump", "source:nightly-triage")
    # a missing storm.toml declares no source
    (root / "storm.toml").unlink()
    none = run_cli(root, "bump", "b", "--source", "nightly-triage", "--json")
    assert none.returncode == 1
    assert json.loads(none.stdout)["code"] == "undeclared_source"


def test_a_declared_source_runs_as_the_operator_account_only(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n", toml='[priority]\nsources = ["nightly"]\n')
    assert run_cli(root, "bump", "a").returncode == 0
    ran = run_forked(root, "bump", "a", "--source", "nightly", "--json")
    assert ran.returncode == 1
    doc = json_of(ran)
    assert doc["code"] == "not_operator" and doc["by"] == "account:nobody"


@pytest.mark.parametrize("with_log", [False, True], ids=["fresh storm", "storm with a log"])
def test_storm_toml_not_valid_toml(storm_dir, with_log: bool) -> None:
    root = storm_dir("a 1\nb 2\n", toml='[priority]\nsources = ["nightly"]\n')
    if with_log:
        assert run_cli(root, "bump", "a").returncode == 0
    (root / "storm.toml").write_text("[priority\nsources = [\n")
    before = tree(root)
    for args in (("bump", "b"), ("push", "z", "5"), ("unbump", "a"), ("bump", "b", "--source", "nightly"),
                 ("reset", "--reason", "r")):
        done = run_cli(root, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "not recorded" in done.stderr
        assert "storm.toml" in done.stderr
        doc = json.loads(run_cli(root, *args, "--json").stdout)
        assert doc["outcome"] == "refused" and doc["recorded"] is False
    for args in (("list",), ("next",)):
        done = run_cli(root, *args)
        assert done.returncode == 3, (args, done.stdout, done.stderr)
        assert "storm.toml" in done.stderr
        doc = json.loads(run_cli(root, *args, "--json").stdout)
        assert doc["outcome"] == "unknown" and "storm.toml" in doc["message"]
    assert tree(root) == before
    if not with_log:
        assert not (root / "priority.log").exists() and not (root / ".priority.log.witness").exists()


@pytest.mark.parametrize("sources", ['"x"', '["operator"]', '["nightly", "operator"]', '["ok", "not a name"]', "[1]", '["../x"]'])
def test_malformed_sources_refuse_every_request_recorded(storm_dir, sources: str) -> None:
    root = storm_dir("a 1\nb 2\n", toml=f"[priority]\nsources = {sources}\n")
    for args, by in ((("bump", "a"), "operator:root"), (("push", "z", "5"), "operator:root"),
                     (("bump", "a", "--source", "nightly"), "source:nightly"), (("unbump", "a"), "operator:root")):
        before = len(log_events(root))
        done = run_cli(root, *args, "--json")
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        assert (doc["code"], doc["recorded"], doc["by"]) == ("declaration_unreadable", True, by)
        events = log_events(root)
        assert len(events) == before + 1
        assert (events[-1]["action"], events[-1]["code"], events[-1]["by"]) == ("refused", "declaration_unreadable", by)
    assert "z" not in (root / "queue.txt").read_text()
    # the log's place is known, so the order still is
    assert run_cli(root, "next").stdout == "run a 1\n"


def test_principal_name_comes_from_the_password_database(storm_dir) -> None:
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    done = run_cli(root, "bump", "a", "--json", env=clean_env(USER="mallory", LOGNAME="mallory"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["by"] == "operator:root"
    assert log_events(root)[-1]["by"] == "operator:root"
    ran = run_forked(root, "bump", "a", "--json", env=clean_env(USER="root", LOGNAME="root"))
    assert json_of(ran)["by"] == "account:nobody"
    assert "mallory" not in (root / "progress.log").read_text()

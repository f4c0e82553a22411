"""``storm-queue init``: a storm that works at once, owned by the caller,
0644/0755 whatever the umask, and never over anything that exists."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

import storm_queue.cli.app
import storm_queue.ops.init  # imported before a fork drops privileges
from storm_queue.core import config
from storm_queue.ops.init import declaration_text, example_declaration
from tests.conftest import REPO, log_events, run_cli, tree

NOBODY = 65534
FILES = ["queue.txt", "integrated.txt", "abandoned.txt", "storm.toml"]


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    yield
    os.umask(old)


@pytest.fixture
def open_base():
    """A directory under /tmp that any account may create in (0777, sticky)."""
    base = tempfile.mkdtemp(prefix="sq-init-", dir="/tmp")
    os.chmod(base, 0o1777)
    yield Path(base)
    shutil.rmtree(base, ignore_errors=True)


def test_init_creates_a_working_storm_with_fixed_modes_whatever_the_umask(tmp_path, umask_077):
    root = tmp_path / "spring"
    ran = run_cli(None, "init", str(root))
    assert ran.returncode == 0, ran.stderr
    assert "created a storm in" in ran.stdout and "queue.txt" in ran.stdout
    assert sorted(os.listdir(root)) == sorted(FILES)
    st = os.stat(root)
    assert stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == os.geteuid()
    for name in FILES:
        st = os.lstat(root / name)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644, name
        assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()), name
    assert (root / "queue.txt").read_bytes() == b""

    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["decision"] == "empty"
    assert run_cli(root, "next").stdout == "empty\n"
    pushed = run_cli(root, "push", "a", "1", "--reason", "first lane")
    assert pushed.returncode == 0, pushed.stderr
    with open(root / "queue.txt", "a") as f:  # a hand edit, as an operator would
        f.write("b 2 a\n")
    bumped = run_cli(root, "bump", "b")
    assert bumped.returncode == 0, bumped.stderr
    assert run_cli(root, "next").stdout == "run a 1\n"
    assert [e["action"] for e in log_events(root)] == ["push", "bump"]
    # a new storm declares no source
    sourced = run_cli(root, "bump", "b", "--source", "nightly-triage")
    assert sourced.returncode == 1 and "undeclared_source" in sourced.stderr


def test_init_defaults_to_the_current_directory_and_answers_json(tmp_path):
    ran = run_cli(None, "init", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"outcome": "done", "root": str(tmp_path), "created": FILES}
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o755


def test_the_new_declaration_is_the_example_with_every_setting_commented_out(tmp_path):
    assert run_cli(None, "init", str(tmp_path / "s")).returncode == 0
    written = (tmp_path / "s" / "storm.toml").read_text()
    example = (REPO / "storm.toml.example").read_text()
    assert example_declaration() == example
    assert written == declaration_text(example)
    settings = [line for line in example.splitlines() if line and not line.startswith(("#", "["))]
    assert settings, "the example has settings to comment out"
    for line in example.splitlines():
        assert (f"# {line}" if line in settings else line) in written.splitlines()
    decl = config.parse(written)
    assert decl.present and decl.sources == () and decl.log == config.DEFAULT_LOG and decl.error is None


def test_init_refuses_to_overwrite_naming_every_file_and_writes_nothing(tmp_path):
    root = tmp_path / "s"
    root.mkdir(mode=0o700)
    (root / "storm.toml").write_text("[priority]\nsources = ['x']\n")
    os.symlink("/nonexistent/target", root / "abandoned.txt")  # a dangling link exists too
    before = tree(tmp_path, times=True)
    mode = stat.S_IMODE(os.stat(root).st_mode)
    ran = run_cli(None, "init", str(root))
    assert ran.returncode == 2
    assert "storm.toml" in ran.stderr and "abandoned.txt" in ran.stderr and "nothing was written" in ran.stderr
    assert "queue.txt" not in ran.stderr
    assert tree(tmp_path, times=True) == before
    assert stat.S_IMODE(os.stat(root).st_mode) == mode
    as_json = run_cli(None, "init", str(root), "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["outcome"] == "error"


@pytest.mark.parametrize("case", ["file", "no-parent"])
def test_init_refuses_a_place_that_cannot_be_a_storm(tmp_path, case):
    target = tmp_path / "x"
    if case == "file":
        target.write_text("")
    else:
        target = tmp_path / "missing" / "x"
    ran = run_cli(None, "init", str(target))
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    assert ("not a directory" if case == "file" else "does not exist") in ran.stderr
    assert sorted(os.listdir(tmp_path)) == (["x"] if case == "file" else [])


def test_init_refuses_a_directory_whose_mode_it_cannot_set():
    """/proc/self is the caller's own, and its mode cannot be changed: the
    chmod was a PermissionError crash (exit 4)."""
    ran = run_cli(None, "init", "/proc/self")
    assert ran.returncode == 2 and "cannot be made a storm's root" in ran.stderr, ran.stderr


def _init_as_nobody(path: Path) -> int:
    """Run ``storm-queue init PATH`` in a child that is uid/gid 65534."""
    return _as_nobody("init", str(path))


def _as_nobody(*args: str) -> int:
    """Run ``storm-queue ARGS`` in a child that is uid/gid 65534."""
    pid = os.fork()
    if pid == 0:
        code = 98
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            storm_queue.cli.app.main(list(args), prog_name="storm-queue")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 97
        finally:
            os._exit(code)
    from tests.children import reap

    return os.waitstatus_to_exitcode(reap(pid, 120))


def test_another_account_gets_a_storm_it_owns(open_base):
    """A real process: a forked child becomes another account (uid 65534)."""
    root = open_base / "theirs"
    assert _init_as_nobody(root) == 0
    for path in [root] + [root / name for name in FILES]:
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), path
    # and its queue.txt makes 65534 the operator: root is refused
    ran = run_cli(root, "bump", "a")
    assert ran.returncode == 1 and "not_operator" in ran.stderr


def test_init_refuses_a_directory_another_account_owns(open_base):
    root = open_base / "theirs"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    ran = run_cli(None, "init", str(root))
    assert ran.returncode == 2
    assert "owned by nobody" in ran.stderr or f"owned by {NOBODY}" in ran.stderr
    assert os.listdir(root) == []


def test_declaration_text_comments_settings_only():
    text = "# a comment\n[priority]\nsources = [\"a\"]\n\nlog = \"x\"\n  # indented comment\n"
    assert declaration_text(text) == "# a comment\n[priority]\n# sources = [\"a\"]\n\n# log = \"x\"\n  # indented comment\n"


def test_what_later_requests_create_is_0644_whatever_the_umask_and_readable_by_others(open_base, umask_077):
    """The log, its witness and checkpoint, progress.log, the lock, the keys
    and the lanes' directories, made by requests under umask 077: each file
    0644, each directory 0755, as init makes the first ones, so another
    account that may read the storm reads it (a forked child, uid 65534)."""
    root = open_base / "private"
    assert run_cli(None, "init", str(root)).returncode == 0
    (root / "queue.txt").write_text("".join(f"l{i} {i}\n" for i in range(40)))
    for i in range(36):  # past a checkpoint's EVERY lines
        assert run_cli(root, "bump", f"l{i}", "--key", f"k{i}").returncode == 0
    assert run_cli(root, "claim", "--holder", "r1").returncode == 0
    assert run_cli(root, "settle", "l0", "integrated", "--force", "--reason", "done by hand").returncode == 0
    made = {os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files}
    assert {"priority.log", ".priority.log.witness", "progress.log", "priority.log.lock", "lanes/l0"} <= made
    assert any("checkpoint" in name for name in made), made
    for name in made:
        st = os.lstat(root / name)
        assert stat.S_IMODE(st.st_mode) == (0o755 if stat.S_ISDIR(st.st_mode) else 0o644), name
    assert _as_nobody("list", "--json", "--root", str(root)) == 0

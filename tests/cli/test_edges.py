"""Issue 13 items 1-4, through the real command line: a directory that is
not a storm, one JSON document on every exit path, interrupts, and --root
and --json before the command name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env, log_events, make_storm, run_cli, run_main, tree

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
    from storm_queue.roots import find_root

    for url in ("postgresql://op@localhost/storm", "postgres://localhost/storm"):
        assert find_root(url, {}) == url


# -- 2 and 4: one JSON document on every exit path; --root as given ------

def both(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The console script's path (quick where it can) and click's, as bytes."""
    quick = run_main(args, cwd=cwd, text=False)
    slow = run_main(args, cwd=cwd, text=False, click=True)
    assert (quick.returncode, quick.stdout, quick.stderr) == (slow.returncode, slow.stdout, slow.stderr), args
    return quick, slow


@pytest.mark.parametrize("args", [["bump", "--json"], ["push", "x", "--json"], ["list", "--json", "--bogus"],
                                  ["--json", "nosuchcommand"], ["bump", "a", "--wait", "soon", "--json"]])
def test_a_usage_error_with_json_prints_one_document(tmp_path: Path, args: list[str]) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    done, _ = both([*args, "--root", str(root)] if args[0] != "--json" else args, cwd=root)
    assert done.returncode == 2
    doc = one_document(done.stdout.decode())
    assert doc["outcome"] == "error" and doc["exit"] == 2 and doc["message"]
    assert b"Usage: storm-queue" in done.stderr and b"Error:" in done.stderr  # the usage text stays on stderr
    assert not (root / "priority.log").exists()


def test_a_usage_error_without_json_prints_nothing_on_stdout(tmp_path: Path) -> None:
    done, _ = both(["bump"], cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, b"")


@pytest.mark.parametrize("args", [["bump", "api"], ["list"], ["next"], ["claim"], ["doctor"]])
def test_a_root_that_is_a_file_is_the_tools_own_refusal(tmp_path: Path, args: list[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for form in ([*args, "--root", str(afile)], ["--root", str(afile), *args]):
        plain, _ = both(form, cwd=tmp_path)
        words = f'storm root "{afile}" is not a directory; pass --root DIR for an existing storm\n'
        assert plain.returncode == 2 and plain.stdout == (f"error: {words}".encode() if args == ["next"] else b"")
        assert plain.stderr.decode() == f'storm-queue: {words}'
        assert b"is a file" not in plain.stderr and b"Usage:" not in plain.stderr
        as_json, _ = both([*form, "--json"], cwd=tmp_path)
        assert as_json.returncode == 2
        doc = one_document(as_json.stdout.decode())
        assert doc["outcome"] == "error" and doc["exit"] == 2 and "is not a directory" in doc["message"]


@pytest.mark.parametrize("args", [["--root", "", "bump", "a"], ["bump", "a", "--root="], ["list", "--root", ""],
                                  ["--root", "", "log"], ["migrate", "", "postgresql://nobody@/nowhere"],
                                  ["init", ""], ["--root", "", "next", "--json"]])
def test_an_empty_root_is_refused_not_taken_for_the_working_directory(tmp_path: Path, args: list[str]) -> None:
    """``--root "$STORM"`` with STORM unset: a refusal (exit 2), never the
    storm the working directory happens to be in; nothing recorded there."""
    root = make_storm(tmp_path / "here", QUEUE)
    before = tree(root)
    done = run_cli(None, *args, cwd=root)
    assert done.returncode == 2, done.stderr
    assert "is empty (an unset shell variable?)" in (done.stdout if "--json" in args else done.stderr)
    assert tree(root) == before


def test_migrate_given_the_url_first_is_refused_in_words_not_a_crash(tmp_path: Path) -> None:
    """``migrate URL DIR`` (the two swapped) crashed (exit 4, a
    FileNotFoundError on the URL taken for a directory). A refusal, exit 2,
    saying the order, the password masked; nothing touched."""
    root = make_storm(tmp_path / "here", QUEUE)
    before = tree(root)
    done = run_cli(None, "migrate", "postgresql://u:S3cret@127.0.0.1:1/x", str(root))
    assert done.returncode == 2, done.stderr
    assert "storm-queue migrate DIR URL" in done.stderr and "S3cret" not in done.stderr + done.stdout
    assert tree(root) == before


@pytest.mark.parametrize(("args", "advice"), [
    (["list"], "cd into a storm, pass --root with an absolute path, or set STORM_QUEUE_ROOT"),
    (["bump", "a", "--json"], "cd into a storm, pass --root with an absolute path, or set STORM_QUEUE_ROOT"),
    (["init", "here"], "cd elsewhere, or name the directory by an absolute path")])
def test_a_current_directory_that_was_removed_is_said_in_words(tmp_path: Path, args: list[str], advice: str) -> None:
    """A shell left in a directory another process removed: a refusal (exit
    2) that says so, not a crash. A real process: its own cwd is under test."""
    gone = tmp_path / "gone"
    gone.mkdir()
    env = clean_env()
    env["PYTHONPATH"] = env["PYTHONPATH"].rstrip(os.pathsep)  # an empty entry is relative: Python could not start
    done = subprocess.run([sys.executable, "-m", "storm_queue", *args], capture_output=True, text=True,
                          env=env, cwd=gone, preexec_fn=lambda: os.rmdir(gone), timeout=60)
    assert done.returncode == 2, done.stderr
    assert "the current directory no longer exists (it was removed)" in done.stderr
    assert done.stderr.rstrip().endswith(advice)
    if "--json" in args:
        assert one_document(done.stdout)["exit"] == 2



@pytest.mark.parametrize("lead,rest", [(["--root", "{root}"], ["list"]), (["--root", "{root}"], ["list", "--plain"]),
                                       (["--json", "--root", "{root}"], ["next"]), (["--root", "{root}", "--json"], ["next"]),
                                       (["--root", "{root}"], ["next"]), (["--root", "{root}"], ["list", "--json"]),
                                       (["--json", "--root", "{root}"], ["log"]),
                                       (["--root", "{root}"], ["why", "b"]), (["--root", "{root}", "--json"], ["doctor"])])
def test_root_and_json_before_the_command_name(tmp_path: Path, lead: list[str], rest: list[str]) -> None:
    before = make_storm(tmp_path / "before", QUEUE)
    after = make_storm(tmp_path / "after", QUEUE)
    for name in ("queue.txt",):  # a lane's ready_since (list --json) dates from these files' change
        st = os.stat(before / name)
        os.utime(after / name, ns=(st.st_atime_ns, st.st_mtime_ns))
    first, _ = both([a.replace("{root}", str(before)) for a in lead] + rest, cwd=tmp_path)
    moved = [a for a in lead if a == "--json"] and ["--json"]
    second, _ = both(rest + ["--root", str(after)] + (moved or []), cwd=tmp_path)
    assert first.returncode == second.returncode and first.returncode in (0, 1), first.stderr
    assert first.stdout.replace(str(before).encode(), b"ROOT") == second.stdout.replace(str(after).encode(), b"ROOT")
    assert first.stderr.replace(str(before).encode(), b"ROOT") == second.stderr.replace(str(after).encode(), b"ROOT")


def test_the_quick_path_takes_root_and_json_before_the_command() -> None:
    from tests.unit.test_startup import short

    assert short(["--root", "/", "next"]) == ("next", "/", False, {})
    assert short(["--json", "--root", "/", "next"]) == ("next", "/", True, {})
    assert short(["--root", "/", "list", "--json"]) == ("list", "/", True, {})
    assert short(["--root", "/a", "next", "--root", "/b"]) == ("next", "/b", False, {})  # the command's own wins, as in click
    assert short(["--root", "next"]) is None


def test_a_request_with_root_before_the_command_is_recorded_there(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    done = run_main(["--root", str(root), "--json", "bump", "b"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert one_document(done.stdout)["moved"] == ["a", "b"]
    assert [e["slug"] for e in log_events(root)] == ["b"]


def test_root_and_json_before_a_command_that_does_not_take_them_is_a_usage_error(tmp_path: Path) -> None:
    for args in (["--json", "demo"], ["--root", str(tmp_path), "completion", "bash"], ["--root", str(tmp_path), "init"]):
        done, _ = both(args, cwd=tmp_path)
        assert done.returncode == 2 and b"does not take" in done.stderr
        if "--json" in args:
            assert one_document(done.stdout.decode())["exit"] == 2
    made = run_cli(None, "--json", "init", str(tmp_path / "new"))
    assert made.returncode == 0 and one_document(made.stdout)["outcome"] == "done"


def test_a_claim_with_root_and_json_before_the_command(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    for click in (False, True):
        done = run_main(["--json", "--root", str(root), "claim", "--holder", "r1"], cwd=tmp_path, click=click)
        assert done.returncode == 0, done.stderr
        assert one_document(done.stdout)["decision"] in ("run a 1 1", "wait")


# -- 3: interrupts ---------------------------------------------------------


def _held_lock(root: Path) -> int:
    """Hold the writers' lock as another writer would; returns the descriptor."""
    import fcntl

    fd = os.open(root / "priority.log.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@pytest.mark.parametrize("signame,code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("args", [["bump", "b"], ["claim", "--holder", "r1"], ["push", "z", "9"]])
@pytest.mark.parametrize("as_json", [False, True])
def test_an_interrupt_while_waiting_for_the_lock(tmp_path: Path, signame: str, code: int, args: list[str],
                                                 as_json: bool) -> None:
    """A real process: the test sends it SIGINT or SIGTERM while it waits for the lock."""
    import signal
    import time

    root = make_storm(tmp_path / "storm", QUEUE)
    assert run_cli(root, "bump", "a").returncode == 0  # a log, witness and lock to leave alone
    fd = _held_lock(root)
    try:
        before = tree(root)
        argv = [sys.executable, "-m", "storm_queue", *args, "--root", str(root), "--wait", "30"] + (["--json"] if as_json else [])
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
        time.sleep(1.5)  # started, and waiting for the lock
        assert proc.poll() is None
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(fd)
    assert proc.returncode == code, err
    assert err.strip().splitlines() == ["storm-queue: interrupted: nothing was recorded"]
    assert "Aborted" not in err and "Traceback" not in err
    if as_json:
        assert one_document(out) == {"outcome": "error", "message": "interrupted: nothing was recorded", "exit": code,
                                     "recorded": False}
    else:
        assert out == ""
    assert tree(root) == before  # the log, its witness and queue.txt unchanged


def test_waiting_at_a_terminal_says_who_holds_the_lock_once(tmp_path: Path) -> None:
    """A real process: its stderr is a pseudo-terminal, and the test sends it SIGTERM."""
    import select
    import signal
    import time

    root = make_storm(tmp_path / "storm", QUEUE)
    assert run_cli(root, "bump", "a").returncode == 0
    fd = _held_lock(root)
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "storm_queue", "bump", "b", "--root", str(root), "--wait", "30"],
                                stdout=subprocess.PIPE, stderr=slave, text=True, env=clean_env())
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 20
        while b"\n" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 4096)
        time.sleep(1.5)  # long enough for a second notice, were there one
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(fd)
        os.close(master)
    text = seen.decode().replace("\r\n", "\n")
    lines = [line for line in text.splitlines() if line]
    assert proc.returncode == 143
    waiting = [line for line in lines if "waiting up to" in line]
    assert len(waiting) == 1, lines
    assert f"process {os.getpid()}" in waiting[0] and "priority.log.lock" in waiting[0]
    assert lines[-1] == "storm-queue: interrupted: nothing was recorded"


def test_waiting_not_at_a_terminal_says_nothing_until_the_end(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    fd = _held_lock(root)
    try:
        done = run_cli(root, "bump", "b", "--wait", "1")
    finally:
        os.close(fd)
    assert done.returncode == 5
    assert "waiting up to" not in done.stderr and done.stderr.count("\n") == 1


def test_an_interrupt_under_the_lock_is_acted_on_after_the_record(tmp_path: Path) -> None:
    """A request holding the lock finishes its record before the interrupt
    counts; the line says it was recorded.
    A real process: it sends itself SIGINT under the lock."""
    root = make_storm(tmp_path / "storm", QUEUE)
    code = f"""
import os, signal, sys
sys.argv = ["storm-queue", "bump", "b", "--root", {str(root)!r}, "--json"]
from storm_queue.store.directory.log import writer
real = writer.append
def append(*a, **k):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C under the lock, just before the line is written
    return real(*a, **k)
writer.append = append
from storm_queue.cli.entry import main
main()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 130, done.stderr
    assert [e["slug"] for e in log_events(root)] == ["b"]
    assert done.stderr.strip().splitlines()[-1] == ("storm-queue: interrupted: the bump b was recorded (line 1) but its "
                                                    "answer may not have been printed; storm-queue log --last 1 shows it")
    doc = one_document(done.stdout)
    assert doc["exit"] == 130 and doc["recorded"] is True

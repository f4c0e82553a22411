"""Links (issue 5 item 6): a symbolic link planted in place of the log, the
witness, the lock, ``queue.txt`` or ``next``'s said-once file is never
followed: it is refused and named, and nothing is written through it (the
file it points at keeps every byte, its mode and its time). Lane directories
under ``lanes/`` are created and entered without following links. A FIFO
in place of a storm's file is refused at once, never waited on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import log_events, make_storm, run_cli, tree

TARGET = b"the file a link points at\n"


def _plant(root: Path, name: str, outside: Path) -> tuple[Path, os.stat_result]:
    """Put a link to ``outside`` (a file outside the storm) in place of ``name``."""
    outside.write_bytes(TARGET)
    path = root / name
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(outside)
    return path, os.stat(outside)


def _untouched(outside: Path, st: os.stat_result) -> None:
    assert outside.read_bytes() == TARGET
    now = os.stat(outside)
    assert (now.st_mode, now.st_uid, now.st_size, now.st_mtime_ns) == (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns)


def _storm(tmp_path: Path) -> Path:
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nc 3\n")
    assert run_cli(root, "bump", "a").returncode == 0
    return root


# name: (exit code of list/next, exit code of a request, the words that name it)
LINKS = {
    "queue.txt": (2, 2, "symbolic link"),
    "priority.log.lock": (0, 2, "symbolic link"),
    ".priority.log.said": (0, 0, None),  # list and requests never read it; next does (below)
    "priority.log": (3, 3, "Too many levels of symbolic links"),
    ".priority.log.witness": (3, 3, "Too many levels of symbolic links"),
}


@pytest.mark.parametrize("name", LINKS)
def test_a_planted_link_is_refused_by_name_and_nothing_is_written_through_it(tmp_path, name):
    root = _storm(tmp_path)
    outside = tmp_path / "outside"
    path, st = _plant(root, name, outside)
    reads, requests, words = LINKS[name]
    log_before = (root / "priority.log").read_bytes() if name != "priority.log" else None
    for args in (["list"], ["list", "--json"]):
        done = run_cli(root, *args)
        assert done.returncode == reads, (args, done.stdout, done.stderr)
        if reads:
            assert str(path) in (done.stderr + done.stdout) and words in (done.stderr + done.stdout)
        assert "Traceback" not in done.stderr
    for args in (["bump", "c"], ["push", "z", "9"], ["unbump", "a"], ["bump", "c", "--json"]):
        done = run_cli(root, *args)
        assert done.returncode == requests, (args, done.stdout, done.stderr)
        if requests:
            assert str(path) in (done.stderr + done.stdout) and words in (done.stderr + done.stdout), done.stderr
            assert "Traceback" not in done.stderr and "crashed" not in done.stderr
        _untouched(outside, st)
        assert path.is_symlink()
    if requests and log_before is not None:
        assert (root / "priority.log").read_bytes() == log_before  # refused before anything was recorded
    _untouched(outside, st)


def test_next_refuses_a_linked_said_file(tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\nbad! 2\n")
    assert run_cli(root, "bump", "a").returncode == 0
    outside = tmp_path / "outside"
    path, st = _plant(root, ".priority.log.said", outside)
    done = run_cli(root, "next")
    assert done.returncode == 2, done.stderr
    assert str(path) in done.stderr and "symbolic link" in done.stderr
    _untouched(outside, st)


@pytest.mark.parametrize("name", ["priority.log", ".priority.log.witness"])
def test_reset_sets_a_linked_log_aside_without_touching_its_target(tmp_path, name):
    root = _storm(tmp_path)
    outside = tmp_path / "outside"
    path, st = _plant(root, name, outside)
    done = run_cli(root, "reset", "--reason", "a link was planted", "--json")
    assert done.returncode == 0, done.stderr
    kept = list(root.glob(name + ".abandoned-*"))
    assert len(kept) == 1 and kept[0].is_symlink()  # the link itself was moved aside
    assert not path.is_symlink()
    assert [e["action"] for e in log_events(root)] == ["reset"]
    _untouched(outside, st)


@pytest.mark.parametrize("where", ["lanes", "lanes/x", "lanes/x/.qwenstorm"])
def test_next_never_marks_a_lane_through_a_planted_directory_link(tmp_path, where):
    # x is blocked on an abandoned lane and met before the chosen one: next would mark it
    root = make_storm(tmp_path / "storm", "gone 0\nx 1 gone\ny 2\n", abandoned=["gone"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x" / ".qwenstorm").mkdir(parents=True)
    (elsewhere / ".qwenstorm").mkdir()
    link = root / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    outside_before = tree(elsewhere)
    done = run_cli(root, "next")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "run y 2\n"
    assert str(link) in done.stderr and "not a directory" in done.stderr
    assert tree(elsewhere) == outside_before
    assert link.is_symlink()


def test_next_marks_a_lane_in_real_directories(tmp_path):
    root = make_storm(tmp_path / "storm", "gone 0\nx 1 gone\ny 2\n", abandoned=["gone"])
    assert run_cli(root, "next").stdout == "run y 2\n"
    body = json.loads((root / "lanes" / "x" / ".qwenstorm" / "result.json").read_text())
    assert (body["completed"], body["blocked_on"], body["blocked_on_all"]) == (False, "gone", ["gone"])


def test_a_linked_checkpoint_is_never_read_or_written_through(tmp_path, monkeypatch):
    """The checkpoint (``.priority.log.checkpoint``, a cache) in place of
    which a link is planted: commands ignore it and replay the whole log,
    ``verify`` names it, and the writer that refreshes the checkpoint
    replaces the link itself, never writing what it points at."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.directory.log import checkpoint

    root = _storm(tmp_path)
    outside = tmp_path / "outside"
    path, st = _plant(root, ".priority.log.checkpoint", outside)
    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["slug"] for r in json.loads(listed.stdout)["rows"] if r["prioritised"]] == ["a"]
    verified = run_cli(root, "verify")
    assert verified.returncode == 0, verified.stderr
    said = verified.stdout + verified.stderr
    assert str(path) in said and "Too many levels of symbolic links" in said, said
    _untouched(outside, st)

    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
    storm = Storm(str(root), env=env)
    for n in range(checkpoint.EVERY):
        assert storm.bump("c" if n % 2 else "b", reason=f"r{n}").recorded
    _untouched(outside, st)
    assert not path.is_symlink() and path.is_file()  # the refresh replaced the link, by rename
    assert run_cli(root, "verify").returncode == 0


@pytest.mark.parametrize("name", ["queue.txt", "storm.toml", "priority.log", ".priority.log.witness", "integrated.txt",
                                  "abandoned.txt", "priority.log.lock"])
def test_a_fifo_in_place_of_a_storms_file_is_refused_at_once_never_waited_on(tmp_path, name):
    """Opening a FIFO waits for a writer who may never come, and a request
    under the writers' lock holds SIGINT and SIGTERM back: it hung until
    SIGKILL. Each command is a process of its own, killed at the timeout
    (a hang fails the test)."""
    root = _storm(tmp_path)
    (root / name).unlink(missing_ok=True)
    os.mkfifo(root / name)
    readers = () if name.endswith(".lock") else (("list",),)  # (a reader takes no lock)
    for args in (*readers, ("bump", "c"), ("claim", "--holder", "h")):
        done = run_cli(root, *args, process=True, timeout=30)
        assert done.returncode in (1, 2, 3, 4), (name, args, done.stdout, done.stderr)
        assert "not a regular file" in done.stderr, (name, args, done.stderr)
    assert (root / name).exists() and not (root / name).is_file()

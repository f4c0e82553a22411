"""``storm-queue verify`` through the real command line: exit 0 when sound,
3 naming the first bad line (its number, byte offset and what is wrong),
the checkpoint audited, a progress bar only at a terminal, ``--json``, and
it writes nothing."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from storm_queue.core import fold
from storm_queue.store.directory.log import checkpoint, reader
from storm_queue.store.directory.log.checkpoint import Checkpoint
from tests.conftest import clean_env, make_storm, run_cli, run_main, tree

QUEUE = "a 1\nb 2 a\nc 3\nd 4\n"


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A storm whose log has five lines."""
    root = make_storm(tmp_path / "storm", QUEUE)
    for args in (("bump", "b"), ("bump", "c"), ("unbump", "c"), ("bump", "nope"), ("bump", "d")):
        assert run_cli(root, *args).returncode in (0, 2)
    return root


def verify(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = run_cli(root, "verify", "--json", *args)
    return done, json.loads(done.stdout)


def line_starts(root: Path) -> list[int]:
    starts, offset = [], 0
    for line in (root / "priority.log").read_bytes().splitlines(keepends=True):
        starts.append(offset)
        offset += len(line)
    return starts


def edit_line(root: Path, number: int, old: bytes, new: bytes) -> None:
    lines = (root / "priority.log").read_bytes().splitlines(keepends=True)
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    (root / "priority.log").write_bytes(b"".join(lines))


def test_a_sound_log_exits_0_and_says_what_it_checked(recorded: Path) -> None:
    before = tree(recorded)
    done, doc = verify(recorded)
    assert done.returncode == 0, done.stderr
    assert doc["sound"] is True and doc["problem"] is None
    assert doc["lines"] == 5 and doc["bytes"] == (recorded / "priority.log").stat().st_size
    assert doc["lane"] == ["a", "b", "d"] and doc["named"] == ["b", "d"]
    text = run_cli(recorded, "verify")
    assert text.returncode == 0
    assert "sound: 5 line(s)" in text.stdout and "checkpoint: none" in text.stdout
    assert tree(recorded) == before  # verify reads only


def test_a_fresh_storm_is_sound(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    done, doc = verify(root)
    assert done.returncode == 0 and doc["sound"] and doc["lines"] == 0
    assert any("recorded nothing yet" in w for w in doc["warnings"])


@pytest.mark.parametrize(("damage", "line", "what"), [
    (lambda r: edit_line(r, 3, b'"action":"unbump"', b'"action":"unbumpp"'), 3, "line 3 is malformed: unknown action"),
    # line 2 edited: the first wrong line is 2, whose content no longer matches what line 3 chains to
    (lambda r: edit_line(r, 2, b'"slug":"c"', b'"slug":"C"'), 2,
     "line 2 was changed: its content no longer matches the digest line 3 chains to"),
    (lambda r: edit_line(r, 4, b'"seq":4', b'"seq":5'), 4, "line 4 has seq 5, expected 4"),
    (lambda r: edit_line(r, 1, b'{"v":1', b'{"v":2'), 1, "unknown format version 2"),
    (lambda r: edit_line(r, 2, b'"by":"operator:', b'"by":7,"x":"'), 2, "field 'by' is missing or not a str"),
])
def test_the_first_bad_line_is_named_with_its_offset(recorded: Path, damage, line: int, what: str) -> None:
    starts = line_starts(recorded)
    damage(recorded)
    done, doc = verify(recorded)
    assert done.returncode == 3
    assert doc["sound"] is False
    assert doc["problem"]["line"] == line and doc["problem"]["offset"] == starts[line - 1]
    assert what in doc["problem"]["what"]
    text = run_cli(recorded, "verify")
    assert text.returncode == 3
    assert f"NOT sound: {doc['problem']['what']} (line {line} starts at byte {starts[line - 1]})" in text.stdout
    assert "storm-queue reset --reason" in text.stdout


def test_a_log_shorter_than_its_witness_is_not_sound(recorded: Path) -> None:
    data = (recorded / "priority.log").read_bytes()
    (recorded / "priority.log").write_bytes(data[: line_starts(recorded)[4]])
    done, doc = verify(recorded)
    assert done.returncode == 3 and "shorter than the" in doc["problem"]["what"]
    assert doc["problem"]["line"] == 5 and doc["problem"]["offset"] == line_starts(recorded)[-1] + len(data.splitlines()[3]) + 1


def test_a_missing_witness_is_not_sound(recorded: Path) -> None:
    os.unlink(reader.witness_path(str(recorded / "priority.log")))
    done, doc = verify(recorded)
    assert done.returncode == 3 and "witness" in doc["problem"]["what"]


def test_a_torn_tail_is_sound_with_a_warning(recorded: Path) -> None:
    with open(recorded / "priority.log", "ab") as f:
        f.write(b'{"v":1,"se')
    done, doc = verify(recorded)
    assert done.returncode == 0 and doc["sound"]
    assert any("torn write of 10 bytes" in w for w in doc["warnings"])


def put_checkpoint(root: Path, k: int, state: fold.LaneState | None = None) -> None:
    path = str(root / "priority.log")
    data = (root / "priority.log").read_bytes()
    lines = data.splitlines(keepends=True)
    full = reader.read(path, keep_events=True, use_checkpoint=False)
    offset = sum(len(x) for x in lines[:k])
    from storm_queue.core.framing import digest

    checkpoint.save(path, Checkpoint(offset, k, digest(lines[k - 1]), state or fold.replay(full.events[:k])))


def test_a_checkpoint_that_agrees_is_reported(recorded: Path) -> None:
    put_checkpoint(recorded, 3)
    done, doc = verify(recorded)
    assert done.returncode == 0
    assert doc["checkpoint"] == {"state": "agrees", "line": 3, "why": None}
    assert "checkpoint: at line 3, agrees" in run_cli(recorded, "verify").stdout


def test_a_forged_checkpoint_that_readers_would_trust_is_not_sound(recorded: Path) -> None:
    put_checkpoint(recorded, 3, fold.LaneState(("c",), ("c",), {}))
    assert run_cli(recorded, "list", "--json").returncode == 0  # readers trust it: only verify can tell
    done, doc = verify(recorded)
    assert done.returncode == 3
    assert doc["checkpoint"]["state"] == "disagrees"
    assert doc["problem"]["line"] == 3 and "delete that file" in doc["problem"]["what"]
    os.unlink(checkpoint.checkpoint_path(str(recorded / "priority.log")))
    assert verify(recorded)[0].returncode == 0


def test_a_stale_checkpoint_is_ignored_with_a_warning(recorded: Path) -> None:
    put_checkpoint(recorded, 3)
    cpath = Path(checkpoint.checkpoint_path(str(recorded / "priority.log")))
    body = json.loads(cpath.read_bytes())
    body["offset"] -= 2
    cpath.write_text(json.dumps(body))
    done, doc = verify(recorded)
    assert done.returncode == 0
    assert doc["checkpoint"]["state"] == "ignored" and "no line of the log ends" in doc["checkpoint"]["why"]
    assert any("is ignored" in w for w in doc["warnings"])


def test_an_unreadable_declaration_is_an_unknown_order(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE, toml="[priority\n")
    done = run_cli(root, "verify", "--json")
    assert done.returncode == 3 and json.loads(done.stdout)["outcome"] == "unknown"


PTY_VERIFY = """
import sys
import storm_queue.cli.app as cli
import storm_queue.cli.handlers as handlers
handlers.LONG_LOG = 1
sys.argv = ["storm-queue", "verify", "--root", sys.argv[1]]
cli.main(prog_name="storm-queue")
"""


def run_in_pty(argv: list[str]) -> tuple[int, bytes]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
        try:
            os.execve(argv[0], argv, clean_env(COLUMNS="100", TERM="xterm"))
        finally:
            os._exit(127)
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    from tests.children import reap

    status = reap(pid, 120)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out


def test_the_progress_bar_shows_only_at_a_terminal(recorded: Path, monkeypatch) -> None:
    """A real process on a pseudo-terminal, then (the same command, not at a terminal) in this one."""
    import storm_queue.cli.handlers as handlers

    code, out = run_in_pty([sys.executable, "-c", PTY_VERIFY, str(recorded)])
    assert code == 0, out
    assert b"verifying the log" in out and b"sound: 5 line(s)" in out
    monkeypatch.setattr(handlers, "LONG_LOG", 1)
    done = run_main(["verify", "--root", str(recorded)], text=False, click=True)
    assert done.returncode == 0 and b"verifying" not in done.stderr + done.stdout


def test_a_short_log_shows_no_bar_even_at_a_terminal(recorded: Path) -> None:
    """A real process on a pseudo-terminal."""
    code, out = run_in_pty([sys.executable, "-m", "storm_queue", "verify", "--root", str(recorded)])
    assert code == 0 and b"sound: 5 line(s)" in out and b"verifying the log" not in out


def test_a_writer_appending_during_the_audit_is_no_false_alarm(recorded: Path, monkeypatch) -> None:
    """A request recorded between the audit's whole read and its read from the
    checkpoint changes the lane: the audit looks again rather than calling a
    sound checkpoint one that disagrees."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.directory.log import audit

    put_checkpoint(recorded, 3)
    path = str(recorded / "priority.log")
    real = reader.read
    appended = []

    def read_then_a_writer_appends(log_path, *args, **kwargs):
        out = real(log_path, *args, **kwargs)
        if kwargs.get("use_checkpoint") is False and not appended:
            appended.append(Storm(str(recorded)).bump("c", reason="meanwhile"))
        return out

    monkeypatch.setattr(reader, "read", read_then_a_writer_appends)
    result = audit.audit(path)
    assert appended and appended[0].outcome == "done"
    assert result.problem is None and result.checkpoint == "agrees", result.problem

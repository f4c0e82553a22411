"""The standard streams as a caller leaves them: closed (``>&-``, as cron
jobs discard output), a reader that stops reading (``| head``), a full disk
(``> /dev/full``). Each command still ends with its own exit code, or says
in words that its answer was not printed (exit 4); none records twice,
none writes into a storm file, none prints a traceback. Real processes:
the process's own streams are under test."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import PYTHON_M, clean_env, log_events, make_storm

QUEUE = "a 1\nb 2\n"


def cli(root, *args: str, close: tuple[int, ...] = (), stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    """``storm-queue ARGS --root ROOT`` with the descriptors ``close`` closed as it starts."""
    def closing() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run([*PYTHON_M, *args, "--root", str(root)], stdout=stdout, stderr=subprocess.PIPE,
                          env=clean_env(), timeout=60, preexec_fn=closing if close else None)


def recorded(root) -> list[tuple[str, str | None]]:
    """Each line's action (a refusal: ``refused``) and slug."""
    return [(e["action"], e.get("slug")) for e in log_events(root)]


@pytest.mark.parametrize("close", [(1,), (1, 2), (0, 1, 2)])
def test_closed_streams_leave_the_exit_code_the_request_s(tmp_path, close) -> None:
    root = make_storm(tmp_path, QUEUE)
    queue = (root / "queue.txt").read_bytes()
    assert cli(root, "bump", "b", close=close).returncode == 0
    assert cli(root, "bump", "nope", "--json", close=close).returncode == 2
    assert cli(root, "claim", "--holder", "r1", close=close).returncode == 0
    assert cli(root, "list", close=close).returncode == 0
    assert recorded(root) == [("bump", "b"), ("refused", "nope"), ("claim", "b")]
    assert (root / "queue.txt").read_bytes() == queue
    verify = cli(root, "verify")
    assert verify.returncode == 0, verify.stderr
    if 2 not in close:
        assert cli(root, "bump", "nope", close=close).stderr.startswith(b"storm-queue: refused (unknown_slug)")


def test_a_reader_that_stopped_reading_leaves_the_exit_code_the_request_s(tmp_path) -> None:
    root = make_storm(tmp_path, "".join(f"lane-{i} {i}\n" for i in range(1, 3000)))

    def closed_early(*args: str) -> tuple[int, bytes]:
        proc = subprocess.Popen([*PYTHON_M, *args, "--root", str(root)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=clean_env())
        proc.stdout.close()  # before it writes a byte
        err = proc.stderr.read()
        proc.stderr.close()
        return proc.wait(timeout=60), err

    assert closed_early("list") == (0, b"")
    assert closed_early("bump", "lane-7", "--json") == (0, b"")
    code, err = closed_early("bump", "nope", "--json")
    assert (code, err) == (2, b"")  # --json: the refusal is said on stdout alone
    assert closed_early("unbump", "lane-7") == (0, b"")
    assert recorded(root) == [("bump", "lane-7"), ("refused", "nope"), ("unbump", "lane-7")]


def test_stdout_on_a_full_disk_is_said_in_words(tmp_path) -> None:
    """/dev/full: every write fails with ENOSPC (Linux, as the rest of the suite)."""
    root = make_storm(tmp_path, QUEUE)
    for args in (("list",), ("list", "--json"), ("bump", "a"), ("log",)):
        with open("/dev/full", "w") as full:
            done = cli(root, *args, stdout=full)
        assert done.returncode == 4, (args, done.stderr)
        assert done.stderr.decode() == ("storm-queue: stdout could not be written (No space left on device): the "
                                        "answer was not all printed; what a request recorded stands (storm-queue log "
                                        "shows it)\n"), args
    assert recorded(root) == [("bump", "a")]


def test_a_stream_that_cannot_encode_a_character_gets_its_escape(tmp_path) -> None:
    root = make_storm(tmp_path, QUEUE)
    assert cli(root, "bump", "a", "--reason", "h\u00e9llo \u2603").returncode == 0
    done = subprocess.run([*PYTHON_M, "log", "--root", str(root)], capture_output=True, timeout=60,
                          env=clean_env(PYTHONIOENCODING="ascii"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b'reason "h\\xe9llo \\u2603"\n')

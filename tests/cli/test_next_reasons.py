"""Issue 33, item 10: the storm's own runner hears every reason. It runs
``decision="$(storm-queue next)"`` and logs what stdout said, so ``next``
says why on stdout at every exit but 0 (2, 3, 4, 5), and under the
operator's halt it answers ``halted`` and who halted the storm, when and
why, on one line: a runner that knows only run, review, wait and empty
logs that line as one it does not know, and waits, never "no pending lane
has all dependencies integrated"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env, make_storm, run_cli
from tests.pgserver import free_port


def one_reason(done: subprocess.CompletedProcess, outcome: str) -> str:
    """The one line ``next`` printed on stdout: ``OUTCOME: WORDS``, the words its stderr says."""
    assert done.stdout.endswith("\n") and done.stdout.count("\n") == 1, done.stdout
    assert done.stdout.startswith(f"{outcome}: "), done.stdout
    words = done.stdout[len(outcome) + 2:-1]
    assert words in done.stderr, (done.stdout, done.stderr)
    return words


def test_exit_2_a_storm_file_that_cannot_be_read_is_said_on_stdout(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    (root / "queue.txt").unlink()
    (root / "queue.txt").mkdir()
    done = run_cli(root, "next")
    assert done.returncode == 2
    assert "queue.txt is a directory" in one_reason(done, "error")


def test_exit_2_no_storm_is_said_on_stdout(tmp_path: Path) -> None:
    done = run_cli(tmp_path / "none", "next")
    assert done.returncode == 2 and "does not exist" in one_reason(done, "error")


def test_exit_3_is_said_on_stdout_as_before(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    (root / "priority.log").write_bytes(b"garbage\n")
    done = run_cli(root, "next")
    assert done.returncode == 3 and "the priority order is unknown" in one_reason(done, "unknown")


def test_exit_4_a_crash_is_said_on_stdout(tmp_path: Path, monkeypatch) -> None:
    from storm_queue.service.storm import Storm

    def broken(self):
        raise RuntimeError("the disk said\nsomething odd")

    monkeypatch.setattr(Storm, "next", broken)
    root = make_storm(tmp_path / "storm", "a 1\n")
    done = run_cli(root, "next")
    assert done.returncode == 4
    assert one_reason(done, "crashed") == "RuntimeError: the disk said\\x0asomething odd"  # one line, escaped
    assert "this is a bug" in done.stderr


def test_exit_5_an_unreachable_database_is_said_on_stdout_without_its_password() -> None:
    url = f"postgresql://op:sEcR-next@127.0.0.1:{free_port()}/storm?connect_timeout=5"
    done = run_cli(url, "next")
    assert done.returncode == 5, done.stderr
    words = one_reason(done, "error")
    assert "a retry is safe" in words and "sEcR" not in done.stdout + done.stderr
    assert "postgresql://op:***@127.0.0.1" in words


def test_with_json_stdout_is_the_one_document(tmp_path: Path) -> None:
    import json

    done = run_cli(tmp_path / "none", "next", "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["outcome"] == "error"


#: a runner written as the issue describes the storm's own (tools/storm-queue.sh): it logs what next
#: printed on a non-zero exit, else reads the verdict and knows run, review, wait and empty
RUNNER = r"""
decision="$("$@")"; rc=$?
if [ "$rc" != 0 ]; then echo "waiting: cannot decide what runs next (resolver exit $rc): ${decision:-the resolver did not answer}"; exit 0; fi
read -r verdict rest <<<"$decision"
case "$verdict" in
  empty) echo "queue empty" ;;
  review) echo "waiting for review: $rest" ;;
  wait) echo "waiting: no pending lane has all dependencies integrated (awaiting batch review: ${rest:-none})" ;;
  run) echo "start $rest" ;;
  *) echo "waiting: the resolver answered '$decision', which this runner does not know" ;;
esac
"""


def storm_runner_says(root: Path) -> str:
    """What such a runner logs for one decision of ``storm-queue next`` on ``root`` (a real process)."""
    done = subprocess.run(["bash", "-c", RUNNER, "runner", sys.executable, "-m", "storm_queue", "next",
                           "--root", str(root)], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_the_storms_own_runner_logs_the_halt_and_every_reason(tmp_path: Path) -> None:
    """A real process: the runner is a shell script calling the command line."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\n")
    assert storm_runner_says(root) == "start a 1"
    assert run_cli(root, "halt", "--reason", 'disk "full"\nagain').returncode == 0
    said = storm_runner_says(root)
    assert said.startswith("waiting: the resolver answered 'halted by operator:"), said
    assert said.endswith(""", reason "disk \\"full\\"\\x0aagain"', which this runner does not know"""), said
    assert "no pending lane" not in said
    assert run_cli(root, "resume", "--reason", "ok").returncode == 0
    (root / "queue.txt").unlink()
    (root / "queue.txt").mkdir()
    said = storm_runner_says(root)
    assert said.startswith("waiting: cannot decide what runs next (resolver exit 2): error: ") and \
        "queue.txt is a directory" in said, said

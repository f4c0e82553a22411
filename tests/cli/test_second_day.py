"""What an operator trips on after the first day (issue 20): a queue.txt
that is gone (item 2), and the files a Windows editor writes, with a byte
order mark and CRLF line endings (item 3). Directory storms: both are
about a directory's files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import log_events, make_storm, run_cli


def test_a_storm_whose_queue_txt_is_gone_is_not_empty(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert run_cli(root, "bump", "b").returncode == 0
    (root / "queue.txt").unlink()
    for args in (("next",), ("claim",), ("list",), ("list", "--json"), ("why", "a")):
        done = run_cli(root, *args)
        said = done.stdout + done.stderr
        assert done.returncode == 3, (args, said)
        assert "queue.txt does not exist" in said and "touch queue.txt" in said, args
        assert "empty\n" not in done.stdout and "next: empty" not in done.stdout, args
    lines = len(log_events(root))
    assert run_cli(root, "bump", "a").returncode == 3 and len(log_events(root)) == lines  # nothing recorded
    doctor = run_cli(root, "doctor", "--json")
    assert doctor.returncode == 1
    assert ("error", "queue_missing", "queue.txt") in [(f["severity"], f["code"], f["subject"])
                                                        for f in json.loads(doctor.stdout)["findings"]]
    lone = tmp_path / "lone"  # found from inside it too: its log makes it a storm
    lone.mkdir()
    for name in ("priority.log", ".priority.log.witness"):
        (lone / name).write_bytes((root / name).read_bytes())
    found = run_cli(None, "next", cwd=lone)
    assert found.returncode == 3 and "queue.txt does not exist" in found.stderr


def test_an_empty_queue_txt_is_an_empty_storm(tmp_path: Path) -> None:
    root = tmp_path / "new"
    assert run_cli(None, "init", str(root)).returncode == 0
    assert run_cli(root, "next").stdout == "empty\n"


def test_a_byte_order_mark_is_ignored_in_every_file_it_may_start(tmp_path: Path) -> None:
    bom = "\ufeff"
    root = make_storm(tmp_path / "storm", bom + "a 1\nb 2 a\nc 3 gone\n", toml=bom + '[priority]\nsources = ["bot"]\n')
    (root / "integrated.txt").write_text(bom + "a\n", encoding="utf-8")
    (root / "abandoned.txt").write_text(bom + "gone\n", encoding="utf-8")
    rows = {r["slug"]: r["state"] for r in json.loads(run_cli(root, "list", "--json").stdout)["rows"]}
    assert rows == {"b": "ready", "c": "blocked"}  # a integrated, gone abandoned, no line skipped
    assert json.loads(run_cli(root, "list", "--json").stdout)["skipped"] == []
    assert run_cli(root, "bump", "b", "--source", "bot").returncode == 0  # storm.toml's source declared
    assert run_cli(root, "doctor").returncode == 0


def test_add_and_push_keep_a_crlf_queue_txt_crlf(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "")
    (root / "queue.txt").write_bytes(b"a 1\r\nb 2 a\r\n")
    assert run_cli(root, "add", "c", "3").returncode == 0
    assert run_cli(root, "push", "d", "4", "--deps", "a").returncode == 0
    assert (root / "queue.txt").read_bytes() == b"a 1\r\nb 2 a\r\nc 3\r\nd 4 a\r\n"
    (root / "queue.txt").write_bytes(b"a 1\r\nb 2")  # no final line ending: the new line starts on a line of its own
    assert run_cli(root, "add", "e", "5").returncode == 0
    assert (root / "queue.txt").read_bytes() == b"a 1\r\nb 2\r\ne 5\r\n"
    plain = make_storm(tmp_path / "plain", "a 1\n")
    assert run_cli(plain, "add", "b", "2").returncode == 0
    assert (plain / "queue.txt").read_bytes() == b"a 1\nb 2\n"


def test_the_smaller_ones_say_what_a_user_expects(tmp_path: Path) -> None:
    """Issue 20, item 11, the parts of it about the command line's words."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    log_help = run_cli(None, "log", "--help").stdout
    assert "JSON lines" in log_help and "one JSON document" not in log_help
    assert "--root ROOT" in run_cli(None, "next", "--help").stdout
    gone = run_cli(tmp_path / "nowhere", "next")
    assert gone.returncode == 2 and "does not exist" in gone.stderr and "not a directory" not in gone.stderr
    halted = run_cli(root, "halt", "--reason", "freeze")
    assert "storm-queue resume --reason TEXT" in halted.stdout
    assert run_cli(root, "resume", "--reason", "thaw").returncode == 0
    assert run_cli(root, "settle", "b", "integrated").returncode == 0
    first = run_cli(root, "settle", "b", "integrated", "--key", "k1")  # a no-op: b is settled already
    again = run_cli(root, "settle", "b", "integrated", "--key", "k1")
    assert "nothing to do" in first.stdout and again.stdout.startswith("nothing changed: "), again.stdout
    assert "was recorded" not in again.stdout
    (root / "priority.log").write_bytes(b"not json\n")
    broken = run_cli(root, "next")
    assert broken.returncode == 3 and broken.stdout.startswith("unknown: the priority order is unknown")


def test_a_refusal_names_what_the_refused_command_would_have_done() -> None:
    from storm_queue.core.authority import decide
    from storm_queue.core.config import Declaration

    def words(verb: str) -> str:
        return decide(None, False, "guest", "op", "who owns queue.txt", Declaration(False), None, verb=verb).refusal.message

    assert words("claim").endswith("may claim a lane") and words("reset").endswith("may reset the priority log")
    assert words("bump").endswith("may change the priority lane")
    lane = decide("a", True, "op", "op", "who owns queue.txt", Declaration(False), None, verb="finish")
    assert lane.refusal.message.endswith("may not finish a lane")

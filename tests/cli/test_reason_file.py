"""``--reason-file FILE`` (``-``: standard input) wherever ``--reason`` is
taken, and a reason too long to keep (issue 20, item 9), on both stores."""

from __future__ import annotations

import json

import storm_queue.cli.app
from tests.conftest import run_main


def test_every_command_that_takes_a_reason_takes_a_reason_file() -> None:
    for name, command in storm_queue.cli.app.main.commands.items():
        params = {p.name for p in command.params}
        assert ("reason" in params) == ("reason_file" in params), name


def test_a_reason_from_a_file_or_standard_input_is_recorded(store, tmp_path) -> None:
    store.make("a 1\nb 2\n")
    why = tmp_path / "why.txt"
    why.write_text("the outage of 1 December\nsee the incident page\n", encoding="utf-8")
    assert store.cli("bump", "a", "--reason-file", str(why)).returncode == 0
    assert store.events()[-1]["reason"] == "the outage of 1 December\nsee the incident page"
    piped = run_main(["unbump", "a", "--reason-file", "-", "--root", store.root], stdin="over now\n".encode())
    assert piped.returncode == 0, piped.stderr
    assert store.events()[-1]["reason"] == "over now"
    both = store.cli("bump", "b", "--reason", "x", "--reason-file", str(why))
    assert both.returncode == 2 and "not both" in both.stderr
    missing = store.cli("bump", "b", "--reason-file", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and "cannot read it" in missing.stderr and "Traceback" not in missing.stderr


def test_a_reason_longer_than_4096_characters_is_refused_and_recorded_without_it(store, tmp_path) -> None:
    store.make("a 1\n")
    long = tmp_path / "long.txt"
    long.write_text("x" * 100_000, encoding="utf-8")
    seen = len(store.events())
    done = store.cli("bump", "a", "--reason-file", str(long), "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 2 and (doc["code"], doc["recorded"]) == ("reason_too_long", True), doc
    event = store.events()[-1]
    assert len(store.events()) == seen + 1 and event["code"] == "reason_too_long" and "reason" not in event
    assert len(json.dumps(event)) < 1000
    assert store.cli("bump", "a", "--reason", "y" * 4096).returncode == 0  # 4,096 is kept

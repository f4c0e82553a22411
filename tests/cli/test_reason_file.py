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


def test_a_named_file_larger_than_storm_queue_reads_is_refused_not_read_whole(store, tmp_path, monkeypatch) -> None:
    """``/dev/zero`` has no end: it was read until memory ran out (a
    MemoryError crash). A file past ``given.MOST`` bytes is refused, exit
    2, nothing recorded; one of exactly ``MOST`` is read."""
    from storm_queue import given

    monkeypatch.setattr(given, "MOST", 5000)
    store.make("a 1\n")
    seen = store.events()
    for args in (("bump", "a", "--reason-file", "/dev/zero"), ("add", "--from", "/dev/zero")):
        done = store.cli(*args)
        assert done.returncode == 2 and "more than 5,000 bytes" in done.stderr, (args, done.stderr)
    piped = run_main(["bump", "a", "--reason-file", "-", "--root", store.root], stdin=b"x" * 5001)
    assert piped.returncode == 2 and "more than 5,000 bytes" in piped.stderr
    assert store.events() == seen
    exact = tmp_path / "exact.txt"
    exact.write_text("y" * 4999 + "\n", encoding="utf-8")
    done = store.cli("bump", "a", "--reason-file", str(exact))  # read whole: then refused as any long reason is
    assert done.returncode == 2 and "a reason of 4,999 characters is longer than 4,096" in done.stderr, done.stderr

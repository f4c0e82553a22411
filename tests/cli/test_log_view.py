"""``storm-queue log`` (issue 3 item 2): the recorded requests, oldest
first, one line each, the filters, ``--json`` byte for byte, and damage."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from storm_queue.service.history import Filter, parse_since, walk
from tests.conftest import clean_env, log_events, run_cli, tree, write_log

QUEUE = "a 1\nb 2 a\nc 3\nfin 4\n"


def history(storm) -> Path:
    """Seven events: bump, refused (shape), refused (authority), push
    (appended), noop, unbump, refused (lookup)."""
    root = storm(QUEUE, finished=["fin"], toml='[priority]\nsources = ["bot"]\n')
    steps = [
        (("bump", "b", "--reason", "customer outage"), 0),
        (("bump", "x y"), 2),
        (("bump", "c", "--source", "evil"), 1),
        (("push", "z", "9", "--deps", "c", "--source", "bot"), 0),
        (("bump", "fin"), 0),
        (("unbump", "b", "--reason", "done with it"), 0),
        (("unbump", "c"), 2),
    ]
    for args, code in steps:
        assert run_cli(root, *args).returncode == code, args
    return root


def lines(root: Path, *args: str) -> list[str]:
    done = run_cli(root, "log", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def seqs(root: Path, *args: str) -> list[int]:
    return [int(line.split()[0]) for line in lines(root, *args)]


def test_one_line_per_event_oldest_first(storm) -> None:
    root = history(storm)
    events = log_events(root)
    before = tree(root, times=True)
    out = lines(root)
    assert tree(root, times=True) == before, "log writes nothing"
    assert len(out) == len(events) == 7
    for line, event in zip(out, events):
        assert line.split()[:3] == [str(event["seq"]), event["at"], event["by"]]
    assert out[0].endswith('bump b (issue 2) done; moved a b; reason "customer outage"')
    assert 'bump "x y" refused (invalid_slug): slug "x y" is not a name' in out[1]
    assert out[1].endswith("[cannot be done as asked]") and "[not authorised]" not in out[1]
    assert out[2].split()[2] == "source:evil" and "refused (undeclared_source)" in out[2] and "[not authorised]" in out[2]
    assert out[3].split()[2] == "source:bot"
    assert out[3].endswith("push z (issue 9) appended to queue.txt done; moved c z")
    assert "bump fin (issue 4) noop: fin has finished and awaits review" in out[4]
    assert out[5].endswith('unbump b done; removed a b; reason "done with it"')
    assert 'unbump "c" refused (needed_by_named)' in out[6] and out[6].endswith("[cannot be done as asked]")


def test_json_is_the_stored_bytes(storm) -> None:
    root = history(storm)
    raw = (root / "priority.log").read_bytes()
    done = run_cli(root, "log", "--json")
    assert done.returncode == 0
    assert done.stdout.encode() == raw
    stored = raw.splitlines(keepends=True)
    refused = run_cli(root, "log", "--json", "--refused")
    assert refused.stdout.encode() == b"".join(stored[i] for i in (1, 2, 6))


def test_filters(storm) -> None:
    root = history(storm)
    assert seqs(root, "--refused") == [2, 3, 7]
    assert seqs(root, "--action", "unbump") == [6, 7]
    assert seqs(root, "--action", "unbump", "--refused") == [7]
    assert seqs(root, "--action", "push", "--action", "unbump") == [4, 6, 7]
    assert seqs(root, "--slug", "a") == [1, 6]
    assert seqs(root, "--slug", "c") == [3, 4, 7]
    assert seqs(root, "--slug", "c", "--slug", "fin") == [3, 4, 5, 7]
    assert seqs(root, "--by", "bot") == [4]
    assert seqs(root, "--by", "source:evil") == [3]
    operator = log_events(root)[0]["by"]
    assert seqs(root, "--by", operator) == seqs(root, "--by", operator.split(":", 1)[1]) == [1, 2, 5, 6, 7]
    assert seqs(root, "--last", "2") == [6, 7]
    assert seqs(root, "--refused", "--last", "1") == [7]
    assert seqs(root, "--last", "0") == []
    assert seqs(root, "--last", "100") == list(range(1, 8))
    assert seqs(root, "--last", str(10**30)) == list(range(1, 8))  # more than any ring can hold: every event
    today = log_events(root)[0]["at"][:10]
    assert seqs(root, "--since", today) == list(range(1, 8))
    assert seqs(root, "--since", "2999-01-01") == []
    assert seqs(root, "--since", "2000-01-01T00:00:00Z") == list(range(1, 8))
    events = log_events(root)
    at5 = events[4]["at"]
    # every stored time has the same form, so text order is time order
    assert seqs(root, "--since", at5) == [e["seq"] for e in events if e["at"] >= at5]
    assert 5 in seqs(root, "--since", at5) and 1 not in seqs(root, "--since", at5)


@pytest.mark.parametrize("bad", ["yesterday", "2026-11-30T14:05", "2026-11-30T14:05:00", "2026-13-01", "30/11/2026", "", "1764500000"])
def test_since_refuses_other_forms_with_2(storm, bad: str) -> None:
    root = history(storm)
    done = run_cli(root, "log", "--since", bad)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "is not a time; give a date (2026-11-30, midnight UTC) or an RFC 3339 time" in done.stderr


def test_since_forms() -> None:
    utc = timezone.utc
    assert parse_since("2026-11-30") == datetime(2026, 11, 30, tzinfo=utc)
    assert parse_since("2026-11-30T14:05:00Z") == datetime(2026, 11, 30, 14, 5, tzinfo=utc)
    assert parse_since("2026-11-30 15:05:00.5+01:00") == datetime(2026, 11, 30, 14, 5, 0, 500000, tzinfo=utc)
    with pytest.raises(ValueError):
        parse_since("2026-02-30")


def test_damaged_log_shows_what_reads_then_exits_3(storm) -> None:
    root = history(storm)
    raw = (root / "priority.log").read_bytes().splitlines(keepends=True)
    (root / "priority.log").write_bytes(b"".join(raw[:4]) + b'{"v": 1, "garbage": true}\n' + b"".join(raw[5:]))
    done = run_cli(root, "log")
    assert done.returncode == 3
    assert [int(l.split()[0]) for l in done.stdout.splitlines()] == [1, 2, 3, 4]
    assert "line 5 is malformed" in done.stderr and "reset" in done.stderr
    as_json = run_cli(root, "log", "--json")
    assert as_json.returncode == 3
    out = as_json.stdout.encode().splitlines(keepends=True)
    assert out[:4] == raw[:4]
    assert json.loads(out[4])["outcome"] == "unknown" and len(out) == 5
    last = run_cli(root, "log", "--last", "2")
    assert last.returncode == 3 and [int(l.split()[0]) for l in last.stdout.splitlines()] == [3, 4]


def test_torn_tail_is_a_warning_not_damage(storm) -> None:
    root = history(storm)
    with open(root / "priority.log", "ab") as f:
        f.write(b'{"v":1,"seq":8')
    done = run_cli(root, "log")
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 7
    assert "torn write" in done.stderr


def test_a_fresh_storm_has_nothing_to_show(storm) -> None:
    root = storm(QUEUE)
    done = run_cli(root, "log")
    assert done.returncode == 0 and done.stdout == ""
    assert "recorded nothing yet" in done.stderr
    assert not (root / "priority.log").exists()


def test_walk_streams_and_keeps_only_the_last() -> None:
    """``walk`` hands lines on as the read goes (no list of the log), and with
    ``last`` holds no more than that many."""
    seen: list[int] = []
    events = [{"action": "bump", "seq": n, "at": "2026-11-30T00:00:00.000000Z", "by": "operator:o", "slug": "a"} for n in range(1, 1001)]

    def read(each):
        for event in events:
            each(b"", event)
            # what was emitted so far is exactly what was read so far
            assert seen == list(range(1, event["seq"] + 1))
        return "done"

    assert walk(read, Filter(), None, lambda line, ev: seen.append(ev["seq"])) == "done"
    tail: list[int] = []
    assert walk(lambda each: [each(b"", e) for e in events] and "ok", Filter(), 3, lambda line, ev: tail.append(ev["seq"])) == "ok"
    assert tail == [998, 999, 1000]


def test_env_untouched(storm) -> None:
    """A log reader is not a request: no lane process refusal, no record."""
    root = history(storm)
    done = run_cli(root, "log", env=clean_env(STORM_QUEUE_LANE="x"))
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 7
    assert len(log_events(root)) == 7


def bump_bodies(n: int):
    for i in range(n):
        yield {"action": "bump", "slug": "a", "issue": "1", "deps": [], "moved": [] if i else ["a"], "removed": [],
               "reason": f"reason number {i}"}


def test_a_reader_that_stops_reading_ends_the_log_quietly(storm) -> None:
    """``storm-queue log | head -1`` on a long log: exit 0, no crash report.
    A real process: the reader closes its pipe."""
    import subprocess
    import sys

    root = storm(QUEUE)
    assert write_log(root, bump_bodies(5000)) == 5000
    for extra in ((), ("--json",)):
        proc = subprocess.Popen([sys.executable, "-m", "storm_queue", "log", *extra, "--root", str(root)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
        assert err == b""
        assert (json.loads(first)["seq"] if extra else int(first.split()[0])) == 1


def test_a_long_log_filters_and_tails(storm) -> None:
    root = storm(QUEUE)
    write_log(root, bump_bodies(3000))
    out = lines(root, "--last", "2")
    assert [int(l.split()[0]) for l in out] == [2999, 3000]
    assert out[-1].endswith('reason "reason number 2999"')
    assert run_cli(root, "list", "--json").returncode == 0, "the written log replays"


def test_log_shows_every_line_though_a_checkpoint_exists(storm) -> None:
    """Commands fold from the checkpoint; the log view always reads (and
    checks) the whole log from its first line."""
    from storm_queue.store.directory.log import checkpoint

    root = storm(QUEUE)
    write_log(root, bump_bodies(checkpoint.EVERY + 5))
    assert run_cli(root, "bump", "b").returncode == 0
    assert Path(checkpoint.checkpoint_path(str(root / "priority.log"))).exists()
    out = lines(root)
    assert [int(l.split()[0]) for l in out] == list(range(1, checkpoint.EVERY + 7))
    assert run_cli(root, "log", "--json").stdout.encode() == (root / "priority.log").read_bytes()

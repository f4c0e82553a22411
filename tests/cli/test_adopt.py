"""``storm-queue adopt`` through the real command line (issue 12, item 1): a
log the earlier priority tool wrote (``tests/oldlog.py``, with refusals, a
reset as line 1, no-ops, bumps pulling dependencies, un-bumps with and
without ``removed``, a witness) is adopted, then listed, explained, bumped
and verified; before it, every command meeting that log answers exit 3
naming ``storm-queue adopt``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests import oldlog
from tests.conftest import log_events, make_storm, run_cli, tree

ADOPT_WAY = "storm-queue adopt --reason TEXT"


def old_storm(tmp_path: Path, lines=None, **kwargs) -> tuple[Path, bytes]:
    root = make_storm(tmp_path / "storm", oldlog.QUEUE)
    return root, oldlog.write(root, oldlog.SAMPLE if lines is None else lines, **kwargs)


def adopt(root: Path, *args: str) -> dict:
    done = run_cli(root, "adopt", "--reason", "moving to storm-queue", "--json", *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_before_adopt_every_command_meeting_the_old_log_answers_3_naming_adopt(tmp_path):
    root, _ = old_storm(tmp_path)
    before = tree(root, times=True)
    for args in (["list"], ["next"], ["why", "a"], ["verify"], ["log"]):
        done = run_cli(root, *args)
        assert done.returncode == 3, (args, done.stdout, done.stderr)
        said = done.stdout + done.stderr  # verify reports on stdout, the rest say it on stderr
        assert ADOPT_WAY in said and "earlier priority tool" in said, (args, said)
        assert "Traceback" not in done.stderr
    assert tree(root, times=True) == before  # readers wrote nothing
    for args in (["bump", "a"], ["push", "z", "9"], ["unbump", "b"], ["claim"]):
        done = run_cli(root, *args, "--json")
        assert done.returncode == 3, (args, done.stdout, done.stderr)
        assert ADOPT_WAY in done.stderr or ADOPT_WAY in done.stdout, (args, done.stdout, done.stderr)
    doctor = run_cli(root, "doctor")
    assert doctor.returncode == 1 and "(fix: take it over, keeping its order: storm-queue adopt --reason TEXT)" in doctor.stdout
    assert (root / "priority.log").read_bytes() == b"".join(oldlog.SAMPLE)


def test_adopt_keeps_the_old_log_and_the_lane_in_the_same_order_with_its_by_and_at(tmp_path):
    root, old = old_storm(tmp_path)
    old_witness = (root / ".priority.log.witness").read_bytes()
    doc = adopt(root)
    # the answer, as JSON
    assert (doc["outcome"], doc["action"], doc["code"], doc["recorded"], doc["by"]) == ("done", "adopt", None, True, "operator:root")
    adopted = doc["adopted"]
    kept = adopted["kept"]
    assert kept.startswith("priority.log.adopted-") and adopted["name"] == "priority.log"
    assert (adopted["sha256"], adopted["bytes"], adopted["lines"]) == (hashlib.sha256(old).hexdigest(), len(old), len(oldlog.SAMPLE))
    assert [(r["slug"], r["named"], r["by"], r["at"], r["for"]) for r in adopted["lane"]] == oldlog.SAMPLE_LANE
    # the old log, byte for byte, beside the new one; the old witness too
    assert (root / kept).read_bytes() == old
    assert (root / f".priority.log.witness.adopted-{kept.split('adopted-', 1)[1]}").read_bytes() == old_witness
    assert not (root / ".priority.log.adopting").exists()
    # the new log's line 1 starts the chain and carries what the answer said
    events = log_events(root)
    assert len(events) == 1
    first = events[0]
    assert (first["v"], first["seq"], first["prev"], first["action"], first["reason"]) == (1, 1, None, "adopt", "moving to storm-queue")
    assert {k: first[k] for k in adopted} == adopted
    witness = json.loads((root / ".priority.log.witness").read_text())
    assert (witness["seq"], witness["length"]) == (1, (root / "priority.log").stat().st_size)

    # list shows the same lane in the same order, each with its original by and at
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    lane = [r for r in listed["rows"] if r["prioritised"]]
    assert [(r["slug"], r["mark"]["by"], r["mark"]["at"]) for r in lane] == [(s, by, at) for s, _, by, at, _ in oldlog.SAMPLE_LANE]
    assert [r["slug"] for r in listed["rows"]][len(lane):] == ["e", "g"]
    # why cites the original request's by and at
    why = run_cli(root, "why", "a")
    assert why.returncode == 0
    assert "pulled forward for b by operator:alice at 2026-11-01T10:05:00Z" in why.stdout, why.stdout
    why = run_cli(root, "why", "f")
    assert "prioritised by name by operator:carol at 2026-11-01T10:15:00Z" in why.stdout, why.stdout
    why_json = json.loads(run_cli(root, "why", "d", "--json").stdout)
    assert why_json["named"] is True

    # every later request chains on; the whole log verifies
    bumped = run_cli(root, "bump", "e", "--json")
    assert bumped.returncode == 0 and json.loads(bumped.stdout)["moved"] == ["e"], bumped.stdout
    assert run_cli(root, "unbump", "f").returncode == 0
    events = log_events(root)
    assert [e["seq"] for e in events] == [1, 2, 3]
    lines = (root / "priority.log").read_bytes().splitlines(keepends=True)
    assert events[1]["prev"] == hashlib.sha256(lines[0]).hexdigest()
    verified = run_cli(root, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    assert [r["slug"] for r in listed["rows"] if r["prioritised"]] == ["a", "b", "c", "d", "e"]
    # the log view says what the adopt did
    shown = run_cli(root, "log")
    assert shown.returncode == 0 and "adopt: took over the earlier tool's priority.log" in shown.stdout


def test_adopt_as_text_says_the_lane_and_where_the_old_log_is(tmp_path):
    root, _ = old_storm(tmp_path)
    done = run_cli(root, "adopt", "--reason", "move")
    assert done.returncode == 0, done.stderr
    assert "the priority lane is a b c d f (3 of 5 named)" in done.stdout
    assert "priority.log.adopted-" in done.stdout
    assert "adopt by" in (root / "progress.log").read_text()


def test_a_log_without_a_witness_is_adopted(tmp_path):
    root, _ = old_storm(tmp_path, with_witness=False)
    doc = adopt(root)
    assert [r["slug"] for r in doc["adopted"]["lane"]] == ["a", "b", "c", "d", "f"]
    assert run_cli(root, "verify").returncode == 0


def test_adopt_of_a_log_already_storm_queues_or_of_none_is_a_recorded_noop(tmp_path):
    root = make_storm(tmp_path / "fresh", "a 1\n")
    doc = adopt(root)
    assert (doc["outcome"], doc["recorded"]) == ("noop", True)
    assert "nothing to adopt" in doc["message"]
    assert [e["action"] for e in log_events(root)] == ["adopt"] and log_events(root)[0]["noop"]
    assert run_cli(root, "bump", "a").returncode == 0
    doc = adopt(root)
    assert doc["outcome"] == "noop"
    events = log_events(root)
    assert [e["action"] for e in events] == ["adopt", "bump", "adopt"]
    assert events[2]["lane"] == [] and events[2]["name"] is None
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    assert [r["slug"] for r in listed["rows"] if r["prioritised"]] == ["a"]  # a no-op changes no lane
    # adopting twice: the second is a no-op that keeps the adopted lane
    root, _ = old_storm(tmp_path / "twice")
    adopt(root)
    assert adopt(root)["outcome"] == "noop"
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    assert [r["slug"] for r in listed["rows"] if r["prioritised"]] == ["a", "b", "c", "d", "f"]


@pytest.mark.parametrize("case", ["bad line", "reset not first", "shorter than witness", "missing with witness"])
def test_an_old_log_that_breaks_its_format_is_exit_3_naming_the_line_and_nothing_changes(tmp_path, case):
    lines = list(oldlog.SAMPLE)
    if case == "bad line":
        lines[4] = lines[4].replace(b"2026-11-01T10:08:00Z", b"2026-11-01 10:08")
    elif case == "reset not first":
        lines.insert(3, oldlog.reset("again", 0))
    root, data = old_storm(tmp_path, lines, length=len(b"".join(lines)) + (7 if case == "shorter than witness" else 0))
    if case == "missing with witness":
        (root / "priority.log").unlink()
    before = tree(root, times=True)
    done = run_cli(root, "adopt", "--reason", "move", "--json")
    assert done.returncode == 3, (done.stdout, done.stderr)
    words = {"bad line": "line 5: 'at'", "reset not first": "line 4: a reset is valid only as line 1",
             "shorter than witness": "shorter than", "missing with witness": "missing"}[case]
    assert words in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert json.loads(done.stdout)["exit"] == 3
    assert tree(root, times=True) == before  # not a file created, renamed or written


def test_adopt_is_the_operators_alone_and_needs_a_reason(tmp_path):
    root, old = old_storm(tmp_path)
    (root / "storm.toml").write_text('[priority]\nsources = ["bot"]\n')
    done = run_cli(root, "adopt", "--reason", "x", "--source", "bot", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["code"] == "operator_only", done.stdout
    for reason in ("", "  "):
        done = run_cli(root, "adopt", "--reason", reason, "--json")
        assert done.returncode == 2 and json.loads(done.stdout)["code"] == "blank_reason", done.stdout
    done = run_cli(root, "adopt", "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["code"] == "blank_reason"
    assert (root / "priority.log").read_bytes() == old and not list(root.glob("priority.log.adopted-*"))
    # on a storm already storm-queue's, the source's refusal is recorded
    adopt(root)
    done = run_cli(root, "adopt", "--reason", "x", "--source", "bot", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["recorded"] is True
    assert log_events(root)[-1]["code"] == "operator_only"


def test_outside_text_of_the_old_log_reaches_the_terminal_escaped(tmp_path):
    evil = "operator:\x1b[31mred\x07"
    root, _ = old_storm(tmp_path, [oldlog.bump("a", "1", [], ["a"], by=evil)])
    adopt(root)
    for args in (["list", "--plain"], ["why", "a"], ["log"]):
        done = run_cli(root, *args)
        assert done.returncode == 0 and "\x1b" not in done.stdout and "\x07" not in done.stdout, (args, done.stdout)
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    assert listed["rows"][0]["mark"]["by"] == evil


@pytest.mark.postgresql
def test_adopt_on_a_database_storm_is_a_recorded_noop(pg_url):
    assert run_cli(None, "init", pg_url).returncode == 0
    done = run_cli(pg_url, "adopt", "--reason", "move", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["outcome"], doc["recorded"]) == ("noop", True) and "nothing to adopt" in doc["message"]
    events = [json.loads(line) for line in run_cli(pg_url, "log", "--json").stdout.splitlines()]
    assert [e["action"] for e in events] == ["init", "adopt"] and events[-1]["noop"]


def test_a_dry_run_answers_the_lane_it_would_adopt_and_writes_nothing(tmp_path):
    root, old = old_storm(tmp_path)
    before = tree(root, times=True)
    done = run_cli(root, "adopt", "--reason", "move", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["outcome"], doc["recorded"], doc["dry_run"]) == ("done", False, True)
    assert doc["order"] == ["a", "b", "c", "d", "f", "e", "g"]
    assert [r["slug"] for r in doc["adopted"]["lane"]] == ["a", "b", "c", "d", "f"] and doc["adopted"]["kept"] is None
    text = run_cli(root, "adopt", "--reason", "move", "--dry-run")
    assert text.returncode == 0 and "run order after it: a b c d f e g" in text.stdout
    refused = run_cli(root, "adopt", "--reason", "", "--dry-run", "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout)["dry_run"] is True
    assert tree(root, times=True) == before
    adopt(root)
    doc = json.loads(run_cli(root, "adopt", "--reason", "move", "--dry-run", "--json").stdout)
    assert (doc["outcome"], doc["recorded"], doc["dry_run"]) == ("noop", False, True)
    assert len(log_events(root)) == 1

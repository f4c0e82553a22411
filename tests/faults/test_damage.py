"""A damaged priority log, through the real command line (contract section 4,
section 5): an unknown order is never guessed at, no request touches it, the
one provable unacknowledged write (a torn tail) is repaired by the next
writer, a killed writer leaves nothing worse than that, and ``reset`` is the
operator's way out."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storm_queue.service.storm import Storm
from storm_queue.store.directory.log import reader
from tests.conftest import clean_env, log_events, make_storm, run_cli

QUEUE = "a 1\nb 2 a\nc 3\nd 4\n"
LOG = "priority.log"
WITNESS = ".priority.log.witness"


def _storm_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A storm whose log holds four lines: bump b (moves a, b), bump c,
    unbump c, bump d."""
    root = make_storm(tmp_path / "storm", QUEUE)
    storm = Storm(str(root), env=_storm_env())
    for call in (lambda: storm.bump("b"), lambda: storm.bump("c"), lambda: storm.unbump("c"), lambda: storm.bump("d")):
        assert call().outcome == "done"
    assert len(log_events(root)) == 4
    return root


def files(root: Path) -> dict[str, bytes]:
    """Every file at the top of the storm, by name, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def chain_ok(root: Path) -> list[dict]:
    """Check seq, prev and the witness by hand; return the events."""
    raw = (root / LOG).read_bytes()
    lines = raw.splitlines(keepends=True)
    prev, events = None, []
    for number, line in enumerate(lines, start=1):
        assert line.endswith(b"\n")
        event = json.loads(line)
        assert (event["v"], event["seq"], event["prev"]) == (1, number, prev)
        prev = hashlib.sha256(line).hexdigest()
        events.append(event)
    witness = json.loads((root / WITNESS).read_bytes())
    assert (witness["log"], witness["length"], witness["seq"], witness["digest"]) == (LOG, len(raw), len(lines), prev)
    log = reader.read(str(root / LOG))
    assert log.torn == 0 and log.warnings == []
    return events


def _line_offsets(root: Path) -> list[int]:
    """The offset at which each line of the log starts, then its length."""
    raw = (root / LOG).read_bytes()
    offsets, at = [], 0
    for line in raw.splitlines(keepends=True):
        offsets.append(at)
        at += len(line)
    return offsets + [at]


def _flip(root: Path, offset: int) -> None:
    data = bytearray((root / LOG).read_bytes())
    data[offset] ^= 0x01
    (root / LOG).write_bytes(bytes(data))


def _flip_in_line(root: Path, number: int) -> None:
    """Flip a digit of the line's timestamp: the line stays valid JSON with
    a valid shape, so only the chain or the witness can tell."""
    offsets = _line_offsets(root)
    line = (root / LOG).read_bytes()[offsets[number - 1]:offsets[number]]
    at = line.index(b'"at":"') + len(b'"at":"') + 3  # a digit of the year
    _flip(root, offsets[number - 1] + at)


def _unknown_version(root: Path) -> None:
    """The last line says v 2; the chain and the witness are made to match,
    so the version is the only thing wrong."""
    raw = (root / LOG).read_bytes()
    lines = raw.splitlines(keepends=True)
    event = json.loads(lines[-1])
    event["v"] = 2
    lines[-1] = (json.dumps(event, separators=(",", ":")) + "\n").encode()
    data = b"".join(lines)
    (root / LOG).write_bytes(data)
    witness = json.loads((root / WITNESS).read_bytes())
    witness.update(length=len(data), digest=hashlib.sha256(lines[-1]).hexdigest())
    (root / WITNESS).write_text(json.dumps(witness) + "\n")


DAMAGES = {
    "log-deleted": lambda root: (root / LOG).unlink(),
    "log-truncated-at-a-line": lambda root: os.truncate(root / LOG, _line_offsets(root)[2]),
    "log-truncated-mid-line": lambda root: os.truncate(root / LOG, _line_offsets(root)[-1] - 7),
    "log-emptied": lambda root: os.truncate(root / LOG, 0),
    "byte-flipped-first-line": lambda root: _flip_in_line(root, 1),
    "byte-flipped-last-line": lambda root: _flip_in_line(root, 4),
    "byte-flipped-mid-log": lambda root: _flip(root, _line_offsets(root)[-1] // 2),
    "unknown-version": _unknown_version,
    "witness-deleted": lambda root: (root / WITNESS).unlink(),
    "witness-garbage": lambda root: (root / WITNESS).write_bytes(b"\x00not a witness {"),
    "witness-empty": lambda root: (root / WITNESS).write_bytes(b""),
    # JSON nested deeper than the parser goes (json raises RecursionError, not ValueError)
    "line-nested-too-deeply": lambda root: _append(root / LOG, b'{"v":1,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"),
    "witness-nested-too-deeply": lambda root: (root / WITNESS).write_bytes(b"[" * 100_000 + b"]" * 100_000),
}


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _assert_unknown(proc: subprocess.CompletedProcess, as_json: bool) -> None:
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert "storm-queue reset" in proc.stderr
    if as_json:
        doc = json.loads(proc.stdout)
        assert doc["outcome"] == "unknown"
        assert "storm-queue reset" in doc["message"]
    else:  # no decision, no listing: the order is unknown; next says why on stdout too, never a decision
        assert proc.stdout in ("", "unknown: " + proc.stderr.removeprefix("storm-queue: "))
        assert not proc.stdout.startswith(("run ", "wait", "review", "empty"))


# -- unknown order ------------------------------------------------------------


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_log_is_an_unknown_order_and_no_request_touches_it(root, damage):
    DAMAGES[damage](root)
    before = files(root)
    queue_before = (root / "queue.txt").read_bytes()

    for verb in ("list", "next"):
        _assert_unknown(run_cli(root, verb), as_json=False)
        _assert_unknown(run_cli(root, verb, "--json"), as_json=True)

    requests = [
        (("bump", "c", "--reason", "admissible"), None),
        (("bump", "b"), None),  # already prioritised
        (("unbump", "d"), None),
        (("unbump", "c"), None),  # would be refused: not prioritised
        (("push", "e", "5", "--deps", "a"), None),  # would append to queue.txt
        (("push", "c", "99"), None),  # would be refused: issue mismatch
        (("bump", "zzz"), None),  # would be refused: unknown slug
        (("bump", "c"), {"STORM_QUEUE_LANE": "x"}),  # would be refused: a lane process
        (("unbump", "b"), {"STORM_QUEUE_LANE": ""}),
        (("bump", "../x"), None),  # would be refused: invalid slug
        (("push", "e", "٣"), None),  # would be refused: invalid issue
        (("bump", "c", "--source", "nightly"), None),  # would be refused: undeclared source
    ]
    for n, (argv, extra) in enumerate(requests):
        env = clean_env(**extra) if extra else None
        as_json = n % 2 == 1
        _assert_unknown(run_cli(root, *argv, *(["--json"] if as_json else []), env=env), as_json=as_json)

    after = files(root)
    # nothing re-created, appended to, re-witnessed, or left beside it
    assert set(after) == set(before)
    for name in (LOG, WITNESS, "queue.txt"):
        assert after.get(name) == before.get(name), name
    assert (root / "queue.txt").read_bytes() == queue_before
    assert not any(p.name.startswith((LOG + ".torn", LOG + ".abandoned", WITNESS + ".")) for p in root.iterdir())


# -- torn tail ----------------------------------------------------------------

TORN = b'{"v":1,"seq":5,"at":"2026-01-01T00:0'


@pytest.mark.parametrize("writer", ["admitted", "refused"])
def test_torn_tail_is_ignored_by_readers_and_repaired_by_the_next_writer(root, writer):
    old = (root / LOG).read_bytes()
    old_witness = (root / WITNESS).read_bytes()
    with open(root / LOG, "ab") as f:
        f.write(TORN)

    listed = run_cli(root, "list")
    assert listed.returncode == 0, listed.stderr
    assert "torn" in listed.stderr
    doc = run_cli(root, "list", "--json")
    assert doc.returncode == 0
    listing = json.loads(doc.stdout)
    assert any("torn" in w for w in listing["warnings"])
    assert [r["slug"] for r in listing["rows"] if r["prioritised"]] == ["a", "b", "d"]
    nxt = run_cli(root, "next")
    assert nxt.returncode == 0
    assert nxt.stdout == "run a 1\n"
    assert "torn" in nxt.stderr
    nxt = run_cli(root, "next", "--json")
    assert nxt.returncode == 0
    assert any("torn" in w for w in json.loads(nxt.stdout)["warnings"])
    # readers wrote nothing to the log or the witness
    assert (root / LOG).read_bytes() == old + TORN
    assert (root / WITNESS).read_bytes() == old_witness

    if writer == "admitted":
        proc = run_cli(root, "bump", "c", "--reason", "after the tear")
        assert proc.returncode == 0, proc.stderr
    else:
        proc = run_cli(root, "unbump", "c", "--reason", "after the tear")
        assert proc.returncode == 2, proc.stderr

    sides = sorted(root.glob(LOG + ".torn-*"))
    assert len(sides) == 1
    assert sides[0].read_bytes() == TORN

    raw = (root / LOG).read_bytes()
    assert raw.startswith(old)
    new = [json.loads(line) for line in raw[len(old):].splitlines()]
    assert len(new) == 2
    repair, request = new
    assert repair["action"] == "repair"
    assert (repair["seq"], repair["torn"], repair["side"]) == (5, len(TORN), sides[0].name)
    assert repair["prev"] == hashlib.sha256(old.splitlines(keepends=True)[-1]).hexdigest()
    assert request["seq"] == 6
    assert request["reason"] == "after the tear"
    if writer == "admitted":
        assert (request["action"], request["slug"], request["moved"]) == ("bump", "c", ["c"])
    else:
        assert (request["action"], request["requested"], request["code"]) == ("refused", "unbump", "not_prioritised")
    chain_ok(root)

    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0
    assert json.loads(listed.stdout)["warnings"] == []


# -- killed writers -------------------------------------------------------------


def test_writers_killed_at_random_leave_a_readable_log(tmp_path):
    """Real processes: writers at once, killed with SIGKILL."""
    root = make_storm(tmp_path / "storm", "".join(f"l{i} {i}\n" for i in range(8)) + "m 9 l1,l2\n")
    rng = random.Random(20260101)
    env = clean_env()
    for round_ in range(4):
        procs = []
        for n in range(10):
            verb = rng.choice(["bump", "unbump"])
            slug = rng.choice(["l0", "l1", "l2", "l3", "l4", "m"])
            argv = [sys.executable, "-m", "storm_queue", verb, slug, "--reason", f"r{round_}-{n}", "--root", str(root)]
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # the writer started last is killed at once (alive for certain, however slow the machine is
        # to start the others), four of the others at random moments
        os.kill(procs[-1].pid, signal.SIGKILL)
        start = time.monotonic()
        for proc, delay in sorted(((p, rng.uniform(0.02, 0.4)) for p in rng.sample(procs[:-1], 4)), key=lambda v: v[1]):
            time.sleep(max(0.0, start + delay - time.monotonic()))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            rc = proc.wait(timeout=60)
            assert rc in (0, 2, -signal.SIGKILL), rc
        assert procs[-1].returncode == -signal.SIGKILL  # it was alive when killed: it died of the kill

        # the log reads: cleanly, or with nothing worse than an unacknowledged tail
        if (root / LOG).exists():
            log = reader.read(str(root / LOG))
            for w in log.warnings:
                assert "torn" in w or "after its witness" in w, w
        listed = run_cli(root, "list", "--json")
        assert listed.returncode == 0, listed.stderr

        # and the next request succeeds and leaves a log that verifies
        proc = run_cli(root, "bump", "l5", "--reason", f"after round {round_}")
        assert proc.returncode == 0, proc.stderr
        events = chain_ok(root)
        assert events[-1]["reason"] == f"after round {round_}"
        assert events[-1]["action"] == "bump"
        # each killed or finished writer's request is on the log at most once
        reasons = [e.get("reason") for e in events]
        assert len(reasons) == len(set(reasons))


# -- reset ----------------------------------------------------------------------


def test_reset_is_refused_and_recorded_while_the_log_reads(root):
    before = log_events(root)
    proc = run_cli(root, "reset", "--reason", "I think it is broken", "--json")
    assert proc.returncode == 2
    out = json.loads(proc.stdout)
    assert (out["outcome"], out["code"], out["recorded"]) == ("refused", "log_readable", True)
    events = log_events(root)
    assert events[:-1] == before
    last = events[-1]
    assert (last["action"], last["requested"], last["code"], last["reason"]) == ("refused", "reset", "log_readable", "I think it is broken")
    assert last["seq"] == len(before) + 1
    assert not list(root.glob("*abandoned*"))
    chain_ok(root)


def test_reset_with_a_blank_reason_is_refused(root):
    proc = run_cli(root, "reset", "--reason", "   ", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["code"] == "blank_reason"
    assert log_events(root)[-1]["code"] == "blank_reason"  # the log reads, so it is recorded
    chain_ok(root)

    DAMAGES["log-truncated-at-a-line"](root)
    before = files(root)
    for argv in (("reset", "--reason", ""), ("reset", "--reason", " \t "), ("reset",)):
        proc = run_cli(root, *argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        proc = run_cli(root, *argv, "--json")
        assert proc.returncode == 2
        out = json.loads(proc.stdout)
        assert (out["outcome"], out["code"], out["recorded"]) == ("refused", "blank_reason", False)
    assert files(root) == before


@pytest.mark.parametrize("declared", [False, True])
def test_reset_by_a_source_is_refused_with_1(root, declared):
    if declared:
        (root / "storm.toml").write_text('[priority]\nsources = ["x"]\n')
    DAMAGES["byte-flipped-mid-log"](root)
    before = files(root)
    proc = run_cli(root, "reset", "--reason", "lost", "--source", "x")
    assert proc.returncode == 1, proc.stderr
    proc = run_cli(root, "reset", "--reason", "lost", "--source", "x", "--json")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["outcome"] == "refused" and out["recorded"] is False
    # a declared source is still not the operator; an undeclared one is not even a source
    assert out["code"] in (("operator_only",) if declared else ("operator_only", "undeclared_source"))
    assert files(root) == before
    _assert_unknown(run_cli(root, "list"), as_json=False)


@pytest.mark.parametrize("damage", ["log-deleted", "log-truncated-mid-line", "byte-flipped-mid-log",
                                    "unknown-version", "witness-deleted", "witness-garbage"])
def test_operator_reset_starts_a_new_log_and_keeps_the_old_one(root, damage):
    DAMAGES[damage](root)
    old_log = (root / LOG).read_bytes() if (root / LOG).exists() else None
    old_witness = (root / WITNESS).read_bytes() if (root / WITNESS).exists() else None
    try:
        witnessed = json.loads(old_witness)["length"] if old_witness else 0
    except ValueError:
        witnessed = 0  # an unreadable witness witnesses nothing
    abandons = max(len(old_log or b""), witnessed)

    proc = run_cli(root, "reset", "--reason", "log lost in a disk move", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["outcome"], out["action"], out["recorded"]) == ("done", "reset", True)

    kept_logs = sorted(root.glob(LOG + ".abandoned-*"))
    kept_witnesses = sorted(root.glob(WITNESS + ".abandoned-*"))
    assert [p.read_bytes() for p in kept_logs] == ([old_log] if old_log is not None else [])
    assert [p.read_bytes() for p in kept_witnesses] == ([old_witness] if old_witness is not None else [])

    events = chain_ok(root)
    assert len(events) == 1
    first = events[0]
    assert (first["action"], first["seq"], first["prev"]) == ("reset", 1, None)
    assert first["reason"] == "log lost in a disk move"
    assert first["abandons"] == abandons
    assert first["by"] == f"operator:{pwd.getpwuid(os.getuid()).pw_name}"

    listed = run_cli(root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert not any(r["prioritised"] for r in doc["rows"])  # a new log: nothing is prioritised
    assert doc["decision"] == "run a 1"

    # and the storm takes requests again, on the new chain
    proc = run_cli(root, "bump", "c")
    assert proc.returncode == 0, proc.stderr
    events = chain_ok(root)
    assert [e["action"] for e in events] == ["reset", "bump"]
    # a second reset is refused: the new log reads
    assert run_cli(root, "reset", "--reason", "again").returncode == 2

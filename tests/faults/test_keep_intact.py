"""``reset --keep-intact`` (issue 20 item 4): a log that cannot be replayed
(damaged, or shorter than its witness) starts again from the longest
prefix that verifies from line 1. The new log holds those lines byte for
byte, then the reset line naming the file kept aside, the lines kept, the
last kept line's digest and the bytes lost; ``list`` and ``next`` then
show exactly what a storm whose log is just that prefix shows."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from storm_queue.service.storm import Storm
from tests.conftest import clean_env, log_events, make_storm, run_cli

QUEUE = "a 1\nb 2 a\nc 3\nd 4\ne 5\n"
LOG = "priority.log"
WITNESS = ".priority.log.witness"
CHECKPOINT = ".priority.log.checkpoint"
FROZEN = 1_796_000_000.0  # 2026-11-29: list and next are compared at one instant


def _history(storm: Storm, clock) -> None:
    """Lines of many kinds: bumps (with reasons), a lease taken, renewed,
    failed and taken again, an unbump, a halt and its end."""
    steps = [
        lambda: storm.bump("b", reason="customer outage"),
        lambda: storm.bump("c"),
        lambda: storm.claim(holder="runner-1", ttl=3600),
        lambda: storm.renew("a", 1, ttl=3600),
        lambda: storm.unbump("c"),
        lambda: storm.finish("a", 1, "failed", note="disk full"),
        lambda: storm.claim(holder="runner-2", ttl=3600),
        lambda: storm.bump("d", reason="second"),
        lambda: storm.halt("freeze"),
        lambda: storm.resume("thaw"),
        lambda: storm.bump("e"),
    ]
    for step in steps:
        clock.advance(1)
        out = step()
        assert out.outcome == "done", out.message


@pytest.fixture
def pristine(tmp_path: Path, clock) -> Path:
    """A storm whose log holds eleven lines of many kinds, left untouched."""
    root = make_storm(tmp_path / "pristine", QUEUE)
    storm = Storm(str(root), env=clean_env())
    _history(storm, clock)
    assert len(log_events(root)) == 11
    return root


def _lines(root: Path) -> list[bytes]:
    return (root / LOG).read_bytes().splitlines(keepends=True)


def _write(root: Path, lines: list[bytes]) -> None:
    (root / LOG).write_bytes(b"".join(lines))


def _flip_year(lines: list[bytes], k: int) -> list[bytes]:
    """Line ``k`` (1-based) with a digit of its year changed: still a line of
    the right shape, so only the chain or the witness tells."""
    at = lines[k - 1].index(b'"at":"') + len(b'"at":"') + 3
    line = bytearray(lines[k - 1])
    line[at] ^= 0x01
    return lines[:k - 1] + [bytes(line)] + lines[k:]


def _cut_mid(root: Path, k: int) -> None:
    lines = _lines(root)
    (root / LOG).write_bytes(b"".join(lines[:k - 1]) + lines[k - 1][:len(lines[k - 1]) // 2])


#: each damage, and how many lines of the eleven verify from line 1 after it
DAMAGES = {
    "truncated-mid-line-1": (lambda root: _cut_mid(root, 1), 0),
    "truncated-mid-line-4": (lambda root: _cut_mid(root, 4), 3),
    "truncated-mid-last-line": (lambda root: _cut_mid(root, 11), 10),
    "shorter-than-witness-at-a-line": (lambda root: _write(root, _lines(root)[:7]), 7),
    "changed-middle-line-2": (lambda root: _write(root, _flip_year(_lines(root), 2)), 1),
    "changed-middle-line-6": (lambda root: _write(root, _flip_year(_lines(root), 6)), 5),
    "changed-last-line": (lambda root: _write(root, _flip_year(_lines(root), 11)), 10),
    "line-removed": (lambda root: _write(root, _lines(root)[:5] + _lines(root)[6:]), 5),
    "garbage-line": (lambda root: _write(root, _lines(root)[:8] + [b"{not json\n"] + _lines(root)[8:]), 8),
    "witness-deleted": (lambda root: (root / WITNESS).unlink(), 11),
    "witness-garbage": (lambda root: (root / WITNESS).write_bytes(b"\x00not a witness {"), 11),
    "log-deleted": (lambda root: (root / LOG).unlink(), 0),
}


def _prefix_storm(pristine: Path, into: Path, kept: int) -> Path:
    """A copy of ``pristine`` whose log is its first ``kept`` lines, witnessed."""
    shutil.copytree(pristine, into)
    lines = _lines(pristine)[:kept]
    (into / CHECKPOINT).unlink(missing_ok=True)
    if not lines:
        (into / LOG).unlink()
        (into / WITNESS).unlink()
        return into
    _write(into, lines)
    witness = {"log": LOG, "length": sum(map(len, lines)), "seq": kept,
               "digest": hashlib.sha256(lines[-1]).hexdigest(), "at": "2026-11-29T00:00:00.000000Z"}
    (into / WITNESS).write_text(json.dumps(witness) + "\n")
    return into


def _seen(root: Path) -> tuple[dict, dict, str]:
    """What list --json, next --json and next say of the storm (its root aside)."""
    listed = run_cli(root, "list", "--json")
    nxt = run_cli(root, "next", "--json")
    plain = run_cli(root, "next")
    assert listed.returncode == 0 and nxt.returncode == 0, (listed.stderr, nxt.stderr)
    doc = json.loads(listed.stdout)
    doc.pop("root")
    return doc, json.loads(nxt.stdout), plain.stdout


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_keep_intact_starts_from_the_prefix_that_verifies(tmp_path, pristine, clock, damage) -> None:
    hurt, kept = DAMAGES[damage]
    old = _lines(pristine)
    root = tmp_path / "storm"
    shutil.copytree(pristine, root)
    hurt(root)
    damaged = (root / LOG).read_bytes() if (root / LOG).exists() else None
    try:
        witnessed = json.loads((root / WITNESS).read_bytes())["length"]
    except (OSError, ValueError):
        witnessed = 0
    assert run_cli(root, "list").returncode == 3  # the order is unknown

    clock._time = lambda: FROZEN
    done = run_cli(root, "reset", "--keep-intact", "--reason", "disk trouble", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["outcome"], out["action"], out["recorded"]) == ("done", "reset", True)

    events = log_events(root)
    new = _lines(root)
    assert new[:kept] == old[:kept], "the kept lines are re-recorded byte for byte"
    assert len(events) == kept + 1
    reset = events[-1]
    abandons = max(len(damaged or b""), witnessed)
    assert (reset["action"], reset["seq"], reset["reason"]) == ("reset", kept + 1, "disk trouble")
    assert reset["kept"] == kept
    assert reset["kept_digest"] == (hashlib.sha256(old[kept - 1]).hexdigest() if kept else None)
    assert reset["prev"] == reset["kept_digest"]
    assert reset["abandons"] == abandons
    assert reset["lost"] == abandons - sum(map(len, old[:kept]))
    if damaged is None:
        assert reset["abandoned"] is None
    else:
        assert (root / reset["abandoned"]).read_bytes() == damaged  # the old log, kept aside whole
        assert reset["abandoned"].startswith(LOG + ".abandoned-")
    assert str(kept) in out["message"] and f"{reset['lost']} bytes lost" in out["message"]

    verified = run_cli(root, "verify", "--json")
    assert verified.returncode == 0, verified.stdout
    assert json.loads(verified.stdout)["lines"] == kept + 1

    prefix = _prefix_storm(pristine, tmp_path / "prefix", kept)
    assert _seen(root) == _seen(prefix)
    assert Storm(str(root), env=clean_env()).listing().view.rows == Storm(str(prefix), env=clean_env()).listing().view.rows

    # the storm takes requests again, and a second reset finds nothing to reset
    assert run_cli(root, "bump", "c").returncode == 0
    assert log_events(root)[-1]["seq"] == kept + 2
    again = run_cli(root, "reset", "--keep-intact", "--reason", "again", "--json")
    assert again.returncode == 2 and json.loads(again.stdout)["code"] == "log_readable"


def test_the_prefix_keeps_its_leases_and_order(tmp_path, pristine, clock) -> None:
    """Cut inside line 9 (the halt): the prefix holds runner-2's lease on a
    and the lane b, a, d; the new log leases nothing twice and says so."""
    root = tmp_path / "storm"
    shutil.copytree(pristine, root)
    _cut_mid(root, 9)
    assert run_cli(root, "reset", "--keep-intact", "--reason", "cut short").returncode == 0
    doc = json.loads(run_cli(root, "list", "--json").stdout)
    rows = {r["slug"]: r for r in doc["rows"]}
    assert [r["slug"] for r in doc["rows"] if r["prioritised"]] == ["a", "b", "d"]
    assert rows["a"]["state"] == "running" and rows["a"]["lease"]["holder"] == "runner-2"
    assert rows["a"]["lease"]["token"] == 2 and rows["a"]["attempts"] == 2
    assert doc["halted"] is False  # the halt was on the line that was lost
    said = run_cli(root, "log").stdout.splitlines()[-1]
    assert "reset: a new log" in said and "kept its first 8 line(s)" in said and "bytes lost" in said


def test_a_token_of_the_lost_lines_is_never_handed_out_again(tmp_path, pristine) -> None:
    """Cut inside line 7 (runner-2's claim under token 2): that runner may
    still be at work, so no new claim gets token 2."""
    root = tmp_path / "storm"
    shutil.copytree(pristine, root)
    _cut_mid(root, 7)
    assert run_cli(root, "reset", "--keep-intact", "--reason", "cut short").returncode == 0
    reset = log_events(root)[-1]
    assert reset["kept"] == 6
    # its running marker (of the lost claim) taken back
    assert run_cli(root, "recover", "a", "--force", "--reason", "its claim was lost").returncode == 0
    claim = json.loads(run_cli(root, "claim", "--json").stdout)
    assert claim["slug"] == "a" and claim["token"] > reset["abandons"] > 2, claim


def test_without_keep_intact_reset_is_what_it_was(tmp_path, pristine) -> None:
    root = tmp_path / "storm"
    shutil.copytree(pristine, root)
    _cut_mid(root, 9)
    assert run_cli(root, "reset", "--reason", "cut short").returncode == 0
    (only,) = log_events(root)
    assert only["action"] == "reset" and only["seq"] == 1
    assert not {"kept", "kept_digest", "lost", "abandoned"} & set(only)
    assert not any(r["prioritised"] for r in json.loads(run_cli(root, "list", "--json").stdout)["rows"])


def test_keep_intact_past_a_checkpoint(tmp_path, clock) -> None:
    """A log long enough to have a checkpoint, damaged after it. The old
    checkpoint is set aside with the log; the new log's, once one is
    written, agrees with its lines. Damage before the checkpoint does not
    stop a read (readers start from the checkpoint: only verify sees it);
    with the checkpoint removed, as docs/reliability.md says, it does, and
    the reset keeps what is before it."""
    from storm_queue.store.directory.log.checkpoint import EVERY

    pristine = make_storm(tmp_path / "pristine", QUEUE)
    storm = Storm(str(pristine), env=clean_env())
    for n in range(EVERY + 8):
        clock.advance(1)
        slug = "cde"[n // 2 % 3]
        assert (storm.bump(slug) if n % 2 == 0 else storm.unbump(slug)).outcome == "done"
    assert (pristine / CHECKPOINT).exists()
    total = len(_lines(pristine))
    for k in (5, EVERY + 3, total - 1):
        root = tmp_path / f"storm-{k}"
        shutil.copytree(pristine, root)
        _write(root, _flip_year(_lines(root), k))
        if k < EVERY:
            assert run_cli(root, "list").returncode == 0 and run_cli(root, "verify").returncode != 0
            (root / CHECKPOINT).unlink()
        assert run_cli(root, "reset", "--keep-intact", "--reason", "flipped").returncode == 0
        assert log_events(root)[-1]["kept"] == k - 1
        audit = json.loads(run_cli(root, "verify", "--json").stdout)
        assert audit["sound"], audit
        assert audit["checkpoint"]["state"] == ("agrees" if k > EVERY else "absent"), audit
        prefix = _prefix_storm(pristine, tmp_path / f"prefix-{k}", k - 1)
        clock._time = lambda: FROZEN
        assert _seen(root) == _seen(prefix)


def test_keep_intact_asks_what_reset_asks(tmp_path, pristine) -> None:
    """Operator only, a reason, and only when the log cannot be replayed."""
    root = tmp_path / "storm"
    shutil.copytree(pristine, root)
    readable = run_cli(root, "reset", "--keep-intact", "--reason", "why not", "--json")
    assert readable.returncode == 2 and json.loads(readable.stdout)["code"] == "log_readable"
    _cut_mid(root, 4)
    before = sorted(p.name for p in root.iterdir())
    blank = run_cli(root, "reset", "--keep-intact", "--json")
    assert blank.returncode == 2 and json.loads(blank.stdout)["code"] == "blank_reason"
    source = run_cli(root, "reset", "--keep-intact", "--reason", "x", "--source", "bot", "--json")
    assert source.returncode == 1
    assert sorted(p.name for p in root.iterdir()) == before

"""``reset`` names what it loses (issue 33, item 5): ``reset --keep-intact``
names each lost line (its number, seq, action and slug; a torn or
unparseable line, its number and that it could not be read), in words and
in ``--json``; ``--dry-run`` on both forms prints what would be kept and
lost and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_storm, run_cli, tree

QUEUE = "a 1\nb 2\nc 3\nd 4\ne 5\n"
LOG = "priority.log"


def answer(done) -> dict:
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def bumped(tmp_path: Path) -> Path:
    """Five bumps, one a line: a, b, c, d, e."""
    root = make_storm(tmp_path / "storm", QUEUE)
    for slug in "abcde":
        assert run_cli(root, "bump", slug, "--reason", f"why {slug}").returncode == 0
    return root


def change_line(root: Path, number: int) -> None:
    """Change line NUMBER in place, still a well-formed event: the next line no longer chains to it."""
    lines = (root / LOG).read_bytes().splitlines(keepends=True)
    lines[number - 1] = lines[number - 1].replace(b'"reason":', b'"note":"forged","reason":')
    (root / LOG).write_bytes(b"".join(lines))


def test_keep_intact_names_the_bumps_that_leave_the_priority_lane(tmp_path) -> None:
    """Line 3 changed: lines 1 and 2 verify; the bumps of c, d and e are lost,
    and the operator reads which."""
    root = bumped(tmp_path)
    change_line(root, 3)
    assert run_cli(root, "list").returncode == 3
    done = run_cli(root, "reset", "--keep-intact", "--reason", "line 3 was changed", "--json")
    doc = answer(done)
    assert done.returncode == 0 and doc["recorded"] is True, doc
    assert doc["kept"] == 2 and doc["missing"] is None
    assert doc["lost"] == [{"line": n, "readable": True, "seq": n, "action": "bump", "slug": slug}
                           for n, slug in ((3, "c"), (4, "d"), (5, "e"))]
    assert json.loads(run_cli(root, "list", "--json").stdout)["rows"][0]["slug"] == "a"
    assert [r["slug"] for r in json.loads(run_cli(root, "list", "--json").stdout)["rows"] if r["prioritised"]] == ["a", "b"]


def test_the_words_name_each_lost_line_too(tmp_path) -> None:
    root = bumped(tmp_path)
    change_line(root, 3)
    done = run_cli(root, "reset", "--keep-intact", "--reason", "line 3 was changed")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("started a new log from the 2 line(s) of the old one that verify from line 1")
    assert lines[1:] == ["kept: lines 1 to 2", "lost: line 3 (seq 3): bump c", "lost: line 4 (seq 4): bump d",
                         "lost: line 5 (seq 5): bump e"]


def test_a_torn_tail_and_a_line_that_is_no_event_are_named_as_unreadable(tmp_path) -> None:
    root = bumped(tmp_path)
    with open(root / LOG, "ab") as f:
        f.write(b'{"v": 1, "this": "is no event"}\n\x1b[31mgarbage\n{"v":1,"seq":8,"act')
    doc = answer(run_cli(root, "reset", "--keep-intact", "--reason", "garbage appended", "--json"))
    assert doc["kept"] == 5
    assert [(x["line"], x["readable"]) for x in doc["lost"]] == [(6, False), (7, False), (8, False)]
    assert doc["lost"][0]["why"].startswith("not an event") and doc["lost"][2]["why"].startswith("torn: ")
    words = run_cli(make_twin(tmp_path), "reset", "--keep-intact", "--reason", "garbage appended").stdout
    assert "lost: line 7: could not be read (not an event: not JSON" in words
    assert "\x1b" not in words  # outside text escaped
    assert "lost: line 8: could not be read (torn: " in words


def make_twin(tmp_path: Path) -> Path:
    """Another storm damaged as the one before it (for the words)."""
    root = bumped(tmp_path / "twin")
    with open(root / LOG, "ab") as f:
        f.write(b'{"v": 1, "this": "is no event"}\n\x1b[31mgarbage\n{"v":1,"seq":8,"act')
    return root


def test_lines_gone_from_a_log_cut_short_are_named_by_number(tmp_path) -> None:
    root = bumped(tmp_path)
    lines = (root / LOG).read_bytes().splitlines(keepends=True)
    (root / LOG).write_bytes(b"".join(lines[:3]) + lines[3][:20])  # lines 4 and 5 gone, part of 4 left
    doc = answer(run_cli(root, "reset", "--keep-intact", "--reason", "cut short", "--json"))
    assert doc["kept"] == 3 and doc["missing"] == {"from": 4, "to": 5}
    assert [(x["line"], x["readable"]) for x in doc["lost"]] == [(4, False)]
    again = bumped(tmp_path / "again")
    (again / LOG).write_bytes(b"".join(lines[:3]))
    words = run_cli(again, "reset", "--keep-intact", "--reason", "cut short").stdout
    assert "lost: lines 4 to 5: gone from the file (its witness recorded 5 lines)" in words


@pytest.mark.parametrize("keep", [True, False], ids=["keep-intact", "plain"])
def test_a_dry_run_says_what_would_be_kept_and_lost_and_writes_nothing(tmp_path, keep) -> None:
    root = bumped(tmp_path)
    change_line(root, 4)
    flags = ["--keep-intact"] if keep else []
    before = tree(root, times=True)
    done = run_cli(root, "reset", *flags, "--dry-run", "--reason", "look first", "--json")
    doc = answer(done)
    assert done.returncode == 0, doc
    assert (doc["dry_run"], doc["recorded"], doc["outcome"]) == (True, False, "done")
    kept = 3 if keep else 0
    assert doc["kept"] == kept
    assert [(x["line"], x["action"], x["slug"]) for x in doc["lost"]] == [
        (n, "bump", "abcde"[n - 1]) for n in range(kept + 1, 6)]
    assert doc["order"] == (["a", "b", "c", "d", "e"])
    words = run_cli(root, "reset", *flags, "--dry-run", "--reason", "look first").stdout.splitlines()
    assert words[0].endswith("(dry run: nothing recorded)") and words[0].startswith("would start a new log")
    assert words[1] == ("kept: lines 1 to 3" if keep else "kept: no line")
    assert words[2] == f"lost: line {kept + 1} (seq {kept + 1}): bump {'abcde'[kept]}"
    assert tree(root, times=True) == before  # nothing written, not even the lock
    real = answer(run_cli(root, "reset", *flags, "--reason", "now", "--json"))
    assert (real["kept"], real["lost"]) == (doc["kept"], doc["lost"])  # the dry run said what the reset did


def test_a_dry_run_of_a_log_that_replays_is_refused_as_the_reset_is(tmp_path) -> None:
    root = bumped(tmp_path)
    before = tree(root, times=True)
    for flags in ([], ["--keep-intact"]):
        doc = answer(run_cli(root, "reset", *flags, "--dry-run", "--reason", "x", "--json"))
        assert (doc["code"], doc["recorded"], doc["dry_run"]) == ("log_readable", False, True)
    assert run_cli(root, "reset", "--dry-run", "--reason", " ").returncode == 2  # blank_reason, as without --dry-run
    assert tree(root, times=True) == before


def test_more_lost_lines_than_the_words_show_are_counted(tmp_path) -> None:
    root = make_storm(tmp_path / "storm", "".join(f"l{n} {n}\n" for n in range(30)))
    for n in range(30):
        assert run_cli(root, "bump", f"l{n}").returncode == 0
    change_line_at = (root / LOG).read_bytes().splitlines(keepends=True)
    change_line_at[1] = change_line_at[1].replace(b'"moved":', b'"note":"x","moved":')
    (root / LOG).write_bytes(b"".join(change_line_at))
    done = run_cli(root, "reset", "--keep-intact", "--dry-run", "--reason", "x")
    lines = done.stdout.splitlines()
    assert sum(line.startswith("lost: line ") for line in lines) == 20
    assert "lost: 9 more line(s) (--json names every one)" in lines
    doc = answer(run_cli(root, "reset", "--keep-intact", "--dry-run", "--reason", "x", "--json"))
    assert doc["kept"] == 1 and len(doc["lost"]) == 29

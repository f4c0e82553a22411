"""``--dry-run`` on push, bump and unbump (issue 3 item 4): the request's
own path up to the record, nothing written, the same answer and exit code."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest

from tests.cli.test_authority import run_forked, storm_dir  # noqa: F401 -- storm_dir is a fixture
from tests.conftest import log_events, run_cli, tree

QUEUE = "a 1\nb 2 a\nc 3\nd 4 c\nfin 5\ngone 6 zz\n"


def order(root: Path) -> list[str]:
    return [r["slug"] for r in json.loads(run_cli(root, "list", "--json").stdout)["rows"]]


def primed(storm) -> Path:
    root = storm(QUEUE, finished=["fin"])
    assert run_cli(root, "bump", "d").returncode == 0
    return root


REQUESTS = [
    ("bump", "b", "--reason", "soon"),
    ("push", "z", "9", "--deps", "b,c"),
    ("push", "c", "3"),
    ("unbump", "d"),
    ("bump", "fin"),  # a recorded no-op when real
    ("bump", "c"),  # already in the lane
]


@pytest.mark.parametrize("args", REQUESTS, ids=[" ".join(a) for a in REQUESTS])
def test_a_dry_run_writes_nothing_and_predicts_the_request(storm, args) -> None:
    root = primed(storm)
    before = tree(root, times=True)
    dry = run_cli(root, *args, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert tree(root, times=True) == before, "a dry run writes nothing, not even the lock"
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] is True and doc["recorded"] is False
    assert doc["message"].endswith("(dry run: nothing recorded)")
    text = run_cli(root, *args, "--dry-run")
    assert text.returncode == 0 and "dry run: nothing recorded" in text.stdout
    assert text.stdout.splitlines()[-1] == "run order after it: " + " ".join(doc["order"])
    assert tree(root, times=True) == before
    real = run_cli(root, *args, "--json")
    assert real.returncode == 0, real.stderr
    done = json.loads(real.stdout)
    assert done["recorded"] is True and "dry_run" not in done and "order" not in done
    for key in ("outcome", "code", "action", "slug", "by", "moved", "already", "removed"):
        assert done[key] == doc[key], key
    if args[0] == "push":
        assert done["appended"] == doc["appended"]
    assert order(root) == doc["order"]


REFUSED = [
    (("bump", "nosuch"), 2, "unknown_slug"),
    (("bump", "../x"), 2, "invalid_slug"),
    (("push", "z", "x1"), 2, "invalid_issue"),
    (("bump", "gone"), 2, "dependency_unknown"),
    (("unbump", "c"), 2, "needed_by_named"),
    (("unbump", "b"), 2, "not_prioritised"),
    (("push", "c", "4"), 2, "issue_mismatch"),
    (("bump", "a", "--source", "bot"), 1, "undeclared_source"),
]


@pytest.mark.parametrize("args,code,refusal", REFUSED, ids=[r[2] + " " + r[0][0] for r in REFUSED])
def test_a_refused_dry_run_exits_as_the_request_would(storm, args, code, refusal) -> None:
    root = primed(storm)
    before = tree(root, times=True)
    dry = run_cli(root, *args, "--dry-run", "--json")
    assert dry.returncode == code
    doc = json.loads(dry.stdout)
    assert (doc["outcome"], doc["code"], doc["recorded"], doc["dry_run"], doc["order"]) == ("refused", refusal, False, True, None)
    text = run_cli(root, *args, "--dry-run")
    assert text.returncode == code and text.stdout == ""
    assert f"refused ({refusal})" in text.stderr and "(dry run: nothing recorded)" in text.stderr
    assert tree(root, times=True) == before
    real = run_cli(root, *args, "--json")
    assert real.returncode == code and json.loads(real.stdout)["code"] == refusal
    assert log_events(root)[-1]["code"] == refusal


def test_a_lane_process_dry_run_is_refused(storm) -> None:
    from tests.conftest import clean_env

    root = primed(storm)
    before = tree(root, times=True)
    dry = run_cli(root, "bump", "a", "--dry-run", env=clean_env(STORM_QUEUE_LANE="x"))
    assert dry.returncode == 1 and "lane_process" in dry.stderr
    assert tree(root, times=True) == before


def test_a_dry_run_takes_no_lock(storm) -> None:
    """A writer holds the lock: the real request waits and gives up (5), the
    dry run answers at once."""
    root = primed(storm)
    with open(root / "priority.log.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        dry = run_cli(root, "bump", "b", "--dry-run", "--wait", "0")
        real = run_cli(root, "bump", "b", "--wait", "0")
    assert dry.returncode == 0 and "b is prioritised" in dry.stdout
    assert real.returncode == 5


def test_a_dry_run_on_an_unknown_order_is_3(storm) -> None:
    root = primed(storm)
    (root / "priority.log").write_bytes(b"{}\n")
    before = tree(root, times=True)
    dry = run_cli(root, "bump", "b", "--dry-run", "--json")
    assert dry.returncode == 3 and json.loads(dry.stdout)["outcome"] == "unknown"
    assert tree(root, times=True) == before


def test_a_stranger_dry_run_is_refused_with_1(storm_dir) -> None:  # noqa: F811
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    before = tree(root, times=True)
    ran = run_forked(root, "bump", "a", "--dry-run", "--json")
    assert ran.returncode == 1
    doc = json.loads(ran.stdout)
    assert doc["code"] == "not_operator" and doc["dry_run"] is True and doc["recorded"] is False
    assert tree(root, times=True) == before


def test_the_library_dry_run(storm) -> None:
    """``Storm.bump(..., dry_run=True)``, in-process, as docs/python-api.md shows it."""
    from storm_queue import Storm

    root = primed(storm)
    before = tree(root, times=True)
    s = Storm.find(str(root))
    out = s.bump("b", reason="soon", dry_run=True)
    assert (out.outcome, out.recorded, out.dry_run, out.moved, out.exit_code) == ("done", False, True, ["a", "b"], 0)
    assert out.order == ["c", "d", "a", "b", "fin", "gone"]
    refused = s.unbump("c", dry_run=True)
    assert (refused.code, refused.exit_code, refused.recorded, refused.order) == ("needed_by_named", 2, False, None)
    assert tree(root, times=True) == before
    assert s.bump("b", reason="soon").moved == out.moved
    assert [r.slug for r in s.listing().view.rows] == out.order

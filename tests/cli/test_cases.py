"""The worked examples of ../shared/design/cases.json (copied into
tests/data/cases.json), each run through the real command line, on a
directory storm and on a database storm alike (one test, two stores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.stores import DIRECTORY_ONLY, open_store

CASES = json.loads((Path(__file__).resolve().parent.parent / "data" / "cases.json").read_text())["cases"]


def _directory_only(case: dict) -> bool:
    return any(case.get(k) for k in DIRECTORY_ONLY) or any(k in step for step in case["steps"] for k in DIRECTORY_ONLY)


PARAMS = [pytest.param(case, "directory", id=f"directory-{case['name']}") for case in CASES] + [
    pytest.param(case, "database", id=f"database-{case['name']}", marks=pytest.mark.postgresql)
    for case in CASES if not _directory_only(case)]


@pytest.fixture
def under_test(request, tmp_path: Path):
    return open_store(request.node.callspec.params["kind"], request, tmp_path)


def test_every_case_that_a_database_can_hold_runs_there_too() -> None:
    held = [c["name"] for c in CASES if not _directory_only(c)]
    assert len(held) >= 24, held  # only running markers without a lease stay on directories


def _apply_step(storm, step: dict, run) -> None:
    if "edit_queue" in step:
        storm.edit_queue(step["edit_queue"])
    storm.settle(step.get("settle", []))
    storm.finish(step.get("finish", []))
    for slug in step.get("run", []):
        assert run(slug), f"{slug} could not be made running"


def _marked(storm):
    """A lane made running on a directory: its running marker."""
    def run(slug: str) -> bool:
        marks = storm.path / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "running").write_text("{}\n")
        return True
    return run


@pytest.mark.parametrize("case, kind", PARAMS)
def test_case(under_test, case: dict, kind: str) -> None:
    storm = under_test
    if kind == "directory":
        from tests.conftest import make_storm

        make_storm(storm.path, case["queue"], integrated=case.get("integrated", ()), abandoned=case.get("abandoned", ()),
                   finished=case.get("finished", ()), running=case.get("running", ()),
                   unattended=case.get("unattended", False), toml=case.get("toml"))
    else:
        storm.make(case["queue"], integrated=case.get("integrated", ()), abandoned=case.get("abandoned", ()),
                   finished=case.get("finished", ()), toml=case.get("toml"), unattended=case.get("unattended", False))
    play(storm, case, kind, _marked(storm) if kind == "directory" else None)
    listing = storm.cli("list", "--json")
    assert listing.returncode == 0, listing.stderr
    doc = json.loads(listing.stdout)
    assert [r["slug"] for r in doc["rows"]] == case["order"]
    assert [r["slug"] for r in doc["rows"] if r["prioritised"]] == case["prioritised"]
    assert doc["decision"] == case["next"]
    nxt = storm.cli("next")
    assert nxt.returncode == 0 and nxt.stdout == case["next"] + "\n"


def play(storm, case: dict, kind: str, run) -> None:
    """The case's ``steps`` on ``storm`` (made from the case), each request
    asked through the command line as the operator (unless the step says
    otherwise) and its record checked against the step's; ``run(slug)``
    makes a lane running (true when it did)."""
    for step in case["steps"]:
        if "do" not in step:
            _apply_step(storm, step, run)
            continue
        before = storm.events()
        done = storm.cli(*step["do"], "--json", env=clean_env(**step.get("env", {})))
        assert done.returncode == step["exit"], (step, done.stdout, done.stderr)
        answer = json.loads(done.stdout)
        after = storm.events()
        appended = len(after) - len(before)
        assert appended == (1 if step.get("appended", True) else 0), step
        event = after[-1]
        assert answer["recorded"] is True
        if "action" in step:
            assert event["action"] == step["action"]
        for field in ("moved", "removed", "code"):
            if field in step:
                assert event[field] == step[field], (field, event)
        if "by" in step:
            by = step["by"]
            assert event["by"] == by if kind == "directory" or not by.startswith("operator:") else event["by"].startswith("operator:")
        if "noop" in step:
            assert ("noop" in event) is step["noop"]
        if "names" in step:
            for name in step["names"]:
                assert name in event["message"]
    if "queue_after" in case:
        from storm_queue.core.queuetext import parse

        if kind == "directory":
            assert (storm.path / "queue.txt").read_text() == case["queue_after"]
        assert storm.lanes() == [lane.slug for lane in parse(case["queue_after"]).lanes]

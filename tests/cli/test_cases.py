"""The worked examples of ../shared/design/cases.json (copied into
tests/data/cases.json), each run through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import clean_env, log_events, make_storm, run_cli

CASES = json.loads((Path(__file__).resolve().parent.parent / "data" / "cases.json").read_text())["cases"]


def _apply_step(root: Path, step: dict) -> None:
    if "edit_queue" in step:
        (root / "queue.txt").write_text(step["edit_queue"])
    for slug in step.get("settle", []):
        with open(root / "integrated.txt", "a") as f:
            f.write(slug + "\n")
    for key, name in (("finish", "result.json"), ("run", "running")):
        for slug in step.get(key, []):
            marks = root / "lanes" / slug / ".qwenstorm"
            marks.mkdir(parents=True, exist_ok=True)
            (marks / name).write_text("{}\n")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(tmp_path: Path, case: dict) -> None:
    root = make_storm(
        tmp_path / "storm", case["queue"],
        integrated=case.get("integrated", ()), abandoned=case.get("abandoned", ()),
        finished=case.get("finished", ()), running=case.get("running", ()),
        unattended=case.get("unattended", False), toml=case.get("toml"),
    )
    for step in case["steps"]:
        if "do" not in step:
            _apply_step(root, step)
            continue
        before = log_events(root)
        done = run_cli(root, *step["do"], "--json", env=clean_env(**step.get("env", {})))
        assert done.returncode == step["exit"], (step, done.stdout, done.stderr)
        answer = json.loads(done.stdout)
        after = log_events(root)
        appended = len(after) - len(before)
        assert appended == (1 if step.get("appended", True) else 0), step
        event = after[-1]
        assert answer["recorded"] is True
        if "action" in step:
            assert event["action"] == step["action"]
        for field in ("moved", "removed", "code", "by"):
            if field in step:
                assert event[field] == step[field], (field, event)
        if "noop" in step:
            assert ("noop" in event) is step["noop"]
        if "names" in step:
            for name in step["names"]:
                assert name in event["message"]
    if "queue_after" in case:
        assert (root / "queue.txt").read_text() == case["queue_after"]
    listing = run_cli(root, "list", "--json")
    assert listing.returncode == 0, listing.stderr
    doc = json.loads(listing.stdout)
    assert [r["slug"] for r in doc["rows"]] == case["order"]
    assert [r["slug"] for r in doc["rows"] if r["prioritised"]] == case["prioritised"]
    assert doc["decision"] == case["next"]
    nxt = run_cli(root, "next")
    assert nxt.returncode == 0 and nxt.stdout == case["next"] + "\n"

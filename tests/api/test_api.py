"""The Python API, driven directly (no subprocess): open a storm, read the
plan, push, bump, unbump, with typed results and typed errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import storm_queue
from storm_queue import Busy, Listing, NoStorm, Outcome, RecordFailed, Refused, Row, Storm, StormError, StormUnreadable, UnknownOrder
from tests.conftest import log_events, make_storm

QUEUE = "schema 12\napi 13 schema\nauth 14\nbilling 17 auth,api\ndocs 20\n"
TOML = '[priority]\nsources = ["nightly-triage"]\n'


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
    out.update(extra)
    return out


@pytest.fixture
def storm(tmp_path) -> Storm:
    root = make_storm(tmp_path / "s", QUEUE, integrated=["schema"], toml=TOML)
    return Storm.find(str(root), env=env())


def test_the_public_names_are_the_documented_ones():
    assert sorted(storm_queue.__all__) == sorted(
        ["Storm", "Listing", "Outcome", "Row", "StormError", "UnknownOrder", "NoStorm", "Busy", "RecordFailed",
         "StormUnreadable", "BadArgument", "Refused", "Lease", "NothingLeased"])
    for name in storm_queue.__all__:
        assert getattr(storm_queue, name).__name__ == name
    for error in (UnknownOrder, NoStorm, Busy, RecordFailed, StormUnreadable, Refused):
        assert issubclass(error, StormError)
    assert (NoStorm.exit_code, StormUnreadable.exit_code, UnknownOrder.exit_code, RecordFailed.exit_code,
            Busy.exit_code) == (2, 2, 3, 4, 5)


def test_open_and_read_the_plan(storm, tmp_path):
    listing = storm.listing()
    assert isinstance(listing, Listing)
    assert listing.root == storm.root
    assert listing.decision == "run api 13"
    rows = listing.view.rows
    assert all(isinstance(r, Row) for r in rows)
    assert [(r.position, r.slug, r.state, r.prioritised) for r in rows] == [
        (1, "api", "ready", False), (2, "auth", "ready", False), (3, "billing", "waiting", False),
        (4, "docs", "ready", False)]
    assert rows[2].waits_on == ("auth", "api")
    assert [r.slug for r in listing.view.settled] == ["schema"]
    assert listing.skipped == () and listing.warnings == []
    # Storm.find with no root searches upwards from the working directory, or takes $STORM_QUEUE_ROOT
    assert Storm.find(env=env(STORM_QUEUE_ROOT=storm.root)).root == storm.root
    cwd = os.getcwd()
    os.chdir(storm.root)
    try:
        assert Storm.find(env=env()).root == storm.root
    finally:
        os.chdir(cwd)


def test_push_bump_unbump_return_typed_outcomes_and_are_recorded(storm):
    out = storm.bump("billing", reason="customer outage")
    assert isinstance(out, Outcome)
    assert (out.outcome, out.action, out.slug, out.code, out.exit_code) == ("done", "bump", "billing", None, 0)
    assert out.moved == ["api", "auth", "billing"] and out.removed == [] and out.recorded
    assert out.by.startswith("operator:")
    assert out.check() is out
    assert storm.listing().decision == "run api 13"

    pushed = storm.push("hotfix", "31", deps=("docs",), source="nightly-triage")
    assert (pushed.outcome, pushed.appended, pushed.moved, pushed.by) == ("done", True, ["docs", "hotfix"], "source:nightly-triage")
    assert "hotfix 31 docs" in open(os.path.join(storm.root, "queue.txt")).read()
    assert storm.push("hotfix", "31").outcome == "done"  # queued: prioritised as it is, keeps its place
    assert [r.slug for r in storm.listing().view.rows if r.prioritised] == ["api", "auth", "billing", "docs", "hotfix"]

    undone = storm.unbump("billing")
    assert (undone.outcome, undone.removed) == ("done", ["api", "auth", "billing"])
    assert [e["action"] for e in log_events(Path(storm.root))] == [
        "bump", "push", "push", "unbump"]


def test_a_refusal_is_an_outcome_and_check_raises_it_typed(storm):
    out = storm.unbump("docs", reason="not there")
    assert (out.outcome, out.code, out.exit_code, out.recorded) == ("refused", "not_prioritised", 2, True)
    with pytest.raises(Refused) as caught:
        out.check()
    assert caught.value.code == "not_prioritised" and caught.value.exit_code == 2 and caught.value.recorded
    assert "not_prioritised" in str(caught.value)

    stranger = storm.bump("docs", source="github-label")
    assert (stranger.code, stranger.exit_code) == ("undeclared_source", 1)
    lane = Storm.find(storm.root, env=env(STORM_QUEUE_LANE="")).bump("docs")
    assert (lane.code, lane.exit_code, lane.by) == ("lane_process", 1, 'lane:""')
    assert storm.bump("../x").code == "invalid_slug"
    assert storm.push("z", "٣").code == "invalid_issue"
    assert storm.bump("nope").code == "unknown_slug"
    events = log_events(Path(storm.root))
    assert [e["code"] for e in events] == ["not_prioritised", "undeclared_source", "lane_process", "invalid_slug",
                                           "invalid_issue", "unknown_slug"]


def test_errors_are_raised_typed(storm, tmp_path):
    with pytest.raises(NoStorm):
        Storm.find(str(tmp_path / "missing"), env=env())
    empty = tmp_path / "empty"
    empty.mkdir()
    cwd = os.getcwd()
    os.chdir(empty)
    try:
        with pytest.raises(NoStorm):
            Storm.find(env=env())
    finally:
        os.chdir(cwd)

    assert storm.bump("docs").outcome == "done"
    log = os.path.join(storm.root, "priority.log")
    with open(log, "r+b") as f:
        f.seek(10)
        f.write(b"X")
    with pytest.raises(UnknownOrder) as caught:
        storm.listing()
    assert caught.value.exit_code == 3 and "storm-queue reset" in str(caught.value)
    with pytest.raises(UnknownOrder):
        storm.bump("api")


def test_a_held_lock_is_busy(storm):
    from storm_queue.store.directory.log.lock import held

    hurried = Storm.find(storm.root, env=env(), wait=0.0)
    with held(os.path.join(storm.root, "priority.log"), 1.0, may_create=True):
        with pytest.raises(Busy) as caught:
            hurried.bump("docs")
    assert caught.value.exit_code == 5
    assert log_events(Path(storm.root)) == []
    assert hurried.bump("docs").outcome == "done"


def test_an_unreadable_storm_file_is_typed(storm):
    os.unlink(os.path.join(storm.root, "integrated.txt"))
    os.symlink("/etc/hostname", os.path.join(storm.root, "integrated.txt"))
    with pytest.raises(StormUnreadable) as caught:
        storm.listing()
    assert caught.value.exit_code == 2 and "symbolic link" in str(caught.value)


def test_a_root_may_be_a_path(tmp_path):
    """A Python caller's root is as often a ``pathlib.Path`` as a str (it
    raised AttributeError, 'PosixPath' object has no attribute 'startswith');
    bytes are refused in words."""
    root = make_storm(tmp_path / "s", "a 1\nb 2\n")
    assert list(Storm.find(root).bump("b").check().moved) == ["b"]
    assert Storm(root).next()[0].decision == "run b 2"
    assert [e["slug"] for e in log_events(root)] == ["b"]
    with pytest.raises(TypeError, match="not bytes"):
        Storm.find(os.fsencode(root))


def test_a_lone_surrogate_in_a_python_callers_text_is_recorded_visibly(store):
    """A reason, key or note holding a surrogate no byte stands for
    ("\\ud800") raised UnicodeEncodeError on a directory storm and was
    refused (not_carried) on a database storm: both record it as the
    visible escape, and the log stays sound."""
    from tests.conftest import clean_env

    store.make("a 1\nb 2\n", toml="[runner]\nttl = 300\n")
    storm = Storm.find(store.root, env=clean_env())
    try:
        assert storm.bump("b", reason="why \ud800", key="k").outcome == "done"
        token = storm.claim(holder="r").token
        assert storm.finish("b", token, "ok", note="\udfff end").outcome == "done"
    finally:
        storm.close()
    events = {e["action"]: e for e in store.events()}
    assert events["bump"]["reason"] == "why \\ud800" and events["finish"]["note"] == "\\udfff end"
    assert store.cli("verify").returncode == 0


def test_storm_opens_whatever_its_root_names_as_find_does(store, tmp_path, monkeypatch):
    """``Storm()`` with no root (its signature's default) raised a bare
    TypeError at its first request; ``Storm(DIR)`` of a directory that is
    no storm, or of no directory at all, answered exit 3 ("the priority
    order is unknown", which tells a runner to stop for the operator) and
    ``Storm(URL)`` took a database's URL for a directory. ``Storm(root)``
    is now ``Storm.find(root)``: either store, the storm the environment
    or the working directory names, ``NoStorm`` (exit 2) for no storm."""
    from tests.conftest import clean_env

    store.make("a 1\nb 2\n")
    assert Storm(store.root, env=clean_env()).next()[0].decision == "run a 1"
    assert Storm(env={**clean_env(), "STORM_QUEUE_ROOT": store.root}).next()[0].decision == "run a 1"
    if store.kind == "directory":
        monkeypatch.chdir(store.root)
        assert Storm(env=clean_env()).root == store.root
    for root in (tmp_path / "none", tmp_path / "empty", tmp_path / "file"):
        if root.name == "empty":
            root.mkdir()
        elif root.name == "file":
            root.write_text("a 1\n")
        with pytest.raises(NoStorm) as none:
            Storm(root, env=clean_env())
        assert none.value.exit_code == 2

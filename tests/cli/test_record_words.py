"""Issue 12 items 2 and 6, through the real command line: ``result.json``
as the storm's tools read it (every one this tool writes carries
``completed``), and the reviewer's and operator's words in the record
(``why`` says who unparked a lane, when and why; a lane kept in the
priority lane for another names the lane that needs it now, not the one
that first pulled it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import log_events, make_storm, run_cli
from tests.stores import DatabaseStorm, DirectoryStorm


def ok(root, *args: str) -> str:
    done = run_cli(root, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def result(root: Path, slug: str) -> dict:
    return json.loads((root / "lanes" / slug / ".qwenstorm" / "result.json").read_text())


# -- item 2: result.json ------------------------------------------------------


def test_the_blocked_mark_says_not_completed_and_names_the_first_abandoned_dependency(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "x 1 ok,gone2,gone1\ny 2\n", integrated=["ok"], abandoned=["gone1", "gone2"])
    assert ok(root, "next") == "run y 2\n"
    body = result(root, "x")
    # the first abandoned dependency its queue.txt line names, as a string, then every one in line order
    assert (body["completed"], body["blocked_on"], body["blocked_on_all"]) == (False, "gone2", ["gone2", "gone1"])
    assert (body["status"], body["by"]) == ("blocked", "storm-queue next")


def test_finish_ok_writes_completed_true_and_a_failure_writes_no_completed_result(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml="[runner]\nslots = 2\nattempts = 1\n")
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    assert ok(root, "claim", "--holder", "r2") == "run b 2 1\n"
    ok(root, "finish", "a", "--token", "1", "--result", "ok")
    body = result(root, "a")
    assert (body["completed"], body["status"], body["token"], body["holder"]) == (True, "ok", 1, "r1")
    ok(root, "finish", "b", "--token", "1", "--result", "failed")  # its last attempt: quarantined, never finished
    assert not (root / "lanes" / "b" / ".qwenstorm" / "result.json").exists()
    states = {r["slug"]: r["state"] for r in json.loads(ok(root, "list", "--json"))["rows"]}
    assert states == {"a": "finished", "b": "quarantined"}


@pytest.mark.parametrize("body", ['{"completed": true}\n', '{"completed": false, "blocked_on": "x"}\n', "{}\n"])
def test_a_lanes_own_result_json_still_means_finished_awaiting_review(tmp_path: Path, body: str) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    marks = root / "lanes" / "a" / ".qwenstorm"
    marks.mkdir(parents=True)
    (marks / "result.json").write_text(body)
    assert ok(root, "next") == "review a\n"
    row = json.loads(ok(root, "list", "--json"))["rows"][0]
    assert (row["slug"], row["state"], row["status"]) == ("a", "finished", "finished, awaits review")
    assert (marks / "result.json").read_text() == body  # never rewritten


@pytest.mark.postgresql
def test_a_database_storms_result_rows_carry_completed(pg_server, pg_url) -> None:
    from storm_queue.store.postgres import driver

    storm = DatabaseStorm(pg_url)
    storm.make("gone 0\nx 1 gone\na 2\n", abandoned=["gone"])
    assert storm.cli("next").stdout == "run a 2\n"
    storm._sql("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, 'abandoned', 'then')", [("x",)])  # reviewed
    assert storm.cli("claim", "--holder", "r1").stdout == "run a 2 1\n"
    assert storm.cli("finish", "a", "--token", "1", "--result", "ok").returncode == 0
    with driver.connect(pg_url) as conn:
        rows = dict(conn.execute("SELECT slug, body FROM storm_queue.result").fetchall())
    assert (rows["x"]["completed"], rows["x"]["blocked_on"], rows["x"]["blocked_on_all"]) == (False, "gone", ["gone"])
    assert (rows["a"]["completed"], rows["a"]["status"], rows["a"]["token"]) == (True, "ok", 1)


# -- item 6: who unparked a lane; the lane that needs a lane now ---------------


def test_why_says_who_unparked_a_lane_when_and_why(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n", toml="[runner]\nattempts = 1\n")
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    ok(root, "finish", "a", "--token", "1", "--result", "failed")
    before = json.loads(ok(root, "why", "a", "--json"))
    assert (before["state"], before["unparked"]) == ("quarantined", None)
    ok(root, "unpark", "a", "--reason", 'disk "replaced"\x1b[2J')
    line = log_events(root)[-1]
    assert line["action"] == "unpark"
    why = json.loads(ok(root, "why", "a", "--json"))
    assert why["unparked"] == {"by": line["by"], "at": line["at"], "reason": 'disk "replaced"\x1b[2J', "seq": line["seq"]}
    text = ok(root, "why", "a")
    said = [ln for ln in text.splitlines() if ln.startswith("unparked: ")]
    assert said == [f"unparked: by {line['by']} at {line['at']} (unpark #{line['seq']}), "
                    'reason "disk \\"replaced\\"\\x1b[2J"'], text
    # it stays in the record after the lane runs again
    assert ok(root, "claim", "--holder", "r2") == "run a 1 2\n"
    assert json.loads(ok(root, "why", "a", "--json"))["unparked"]["seq"] == line["seq"]


@pytest.fixture(params=["directory", pytest.param("database", marks=pytest.mark.postgresql)])
def under_test(request, tmp_path: Path):
    return DirectoryStorm(tmp_path) if request.param == "directory" else DatabaseStorm(request.getfixturevalue("pg_url"))


def test_a_lane_kept_for_another_names_the_lane_that_needs_it_now(under_test) -> None:
    s = under_test
    s.make("schema 1\napi 2 schema\nbilling 3 api\nui 4 api\n")
    for args in (("bump", "billing"), ("bump", "ui")):
        assert s.cli(*args).returncode == 0
    first = {ln.split()[2]: ln for ln in s.cli("list", "--plain").stdout.splitlines()[2:]}
    assert first["api"].endswith("pulled forward for billing")  # billing pulled it, and still needs it
    assert s.cli("unbump", "billing").returncode == 0
    rows = {ln.split()[2]: ln for ln in s.cli("list", "--plain").stdout.splitlines()[2:]}
    for slug in ("schema", "api"):
        assert rows[slug].endswith("; kept for ui") and "billing" not in rows[slug], rows[slug]
    why = s.cli("why", "api").stdout
    assert "in the priority lane, kept for ui by " in why and "needed by prioritised: ui" in why
    assert "billing" not in why, why
    doc = json.loads(s.cli("why", "api", "--json").stdout)
    assert (doc["needed_by"], doc["mark"]["slug"]) == (["ui"], "billing")  # the record still says who pulled it

"""waive and the starving lane through the real command line (issue 12
items 4 and 5), on both stores: a directory storm and a database storm
(which starts its own throwaway PostgreSQL server). Real times: the
starving lane waits ``starving_after = "1s"`` for real."""

from __future__ import annotations

import json

import pytest

from tests.stores import DatabaseStorm, DirectoryStorm

BOT = '[priority]\nsources = ["bot"]\n'


@pytest.fixture(params=["directory", "database"])
def kind(request):
    return request.param


@pytest.fixture
def under_test(kind, tmp_path, request):
    return DirectoryStorm(tmp_path) if kind == "directory" else DatabaseStorm(request.getfixturevalue("pg_url"))


def answer(storm, *args: str, code: int = 0) -> dict:
    done = storm.cli(*args, "--json")
    assert done.returncode == code, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def order(storm) -> list[str]:
    return [r["slug"] for r in answer(storm, "list")["rows"]]


def test_waive_lets_a_lane_run_is_recorded_shown_by_why_and_undone(under_test):
    storm = under_test
    storm.make("schema 1\napi 2 schema\nui 3 api\n", toml=BOT)
    answer(storm, "bump", "ui", "--reason", "go")
    assert order(storm)[:3] == ["schema", "api", "ui"]
    # a dry run answers and records nothing
    before = len(storm.events())
    rehearsed = answer(storm, "waive", "ui", "api", "--reason", "api ships later", "--dry-run")
    assert rehearsed["dry_run"] is True and rehearsed["order"][0] == "ui" and len(storm.events()) == before

    done = answer(storm, "waive", "ui", "api", "--reason", "api ships later")
    assert (done["outcome"], done["recorded"], done["removed"]) == ("done", True, ["schema", "api"])
    event = storm.events()[-1]
    assert {k: event[k] for k in ("action", "slug", "dep", "undo", "reason", "by")} == {
        "action": "waive", "slug": "ui", "dep": "api", "undo": False, "reason": "api ships later", "by": event["by"]}
    assert event["by"].startswith("operator:")
    listed = answer(storm, "list")
    assert listed["decision"] == "run ui 3" and [r["slug"] for r in listed["rows"]] == ["ui", "schema", "api"]
    why = answer(storm, "why", "ui")
    assert why["state"] == "ready" and why["deps"][0]["waived"] is True
    assert [(w["dep"], w["by"], w["reason"], w["seq"]) for w in why["waivers"]] == [
        ("api", event["by"], "api ships later", event["seq"])]
    text = storm.cli("why", "ui").stdout
    assert f"waiver: api waived by {event['by']} at {event['at']}" in text and 'reason "api ships later"' in text

    # waiving it again is a recorded no-op; so is undoing a waiver that does not exist
    again = answer(storm, "waive", "ui", "api", "--reason", "again")
    assert (again["outcome"], again["recorded"]) == ("noop", True) and storm.events()[-1]["noop"]
    # what ui does not depend on is refused, recorded
    refused = answer(storm, "waive", "ui", "schema", "--reason", "r", code=2)
    assert refused["code"] == "not_a_dependency" and storm.events()[-1]["code"] == "not_a_dependency"
    # the operator's alone, and with a reason
    assert answer(storm, "waive", "ui", "api", "--reason", "r", "--source", "bot", code=1)["code"] == "operator_only"
    assert answer(storm, "waive", "ui", "api", "--reason", " ", code=2)["code"] == "blank_reason"

    undone = answer(storm, "waive", "ui", "api", "--undo", "--reason", "api is needed after all")
    assert undone["outcome"] == "done" and undone["moved"] == ["schema", "api"]
    assert answer(storm, "why", "ui")["waivers"] == [] and answer(storm, "list")["decision"] == "run schema 1"
    assert answer(storm, "waive", "ui", "api", "--undo", "--reason", "r")["outcome"] == "noop"
    assert answer(storm, "verify")["sound"] is True


def test_a_waived_abandoned_dependency_no_longer_blocks_even_once_next_marked_it(under_test):
    storm = under_test
    storm.make("api 1\nui 2 api\nother 3\n", abandoned=["api"])
    assert storm.cli("next").stdout == "run other 3\n"  # and ui, met first, is marked blocked
    assert [r["state"] for r in answer(storm, "list")["rows"] if r["slug"] == "ui"] == ["finished"]
    done = answer(storm, "waive", "ui", "api", "--reason", "api was dropped; ui stands alone")
    assert "blocked mark" in done["message"]
    rows = {r["slug"]: r for r in answer(storm, "list")["rows"]}
    assert rows["ui"]["state"] == "ready"
    assert storm.cli("next").stdout == "run ui 2\n"
    claimed = answer(storm, "claim", "--holder", "r1")
    assert claimed["decision"] == "run ui 2 1"


def test_a_starving_lane_is_marked_by_list_and_doctor_and_the_order_stays(under_test, kind, clock):
    storm = under_test
    storm.make("a 1\nb 2\nc 3\n", toml='[priority]\nstarving_after = "1s"\n')
    answer(storm, "bump", "c", "--reason", "hot")
    assert answer(storm, "claim", "--holder", "r1")["decision"] == "run c 3 1"
    answer(storm, "finish", "c", "--token", "1", "--result", "ok")
    clock.advance(1.2)
    listed = answer(storm, "list")
    rows = {r["slug"]: r for r in listed["rows"]}
    assert [r["slug"] for r in listed["rows"]] == ["c", "a", "b"] and listed["decision"] == "review c"
    assert listed["starving_after"] == 1
    for slug in ("a", "b"):
        assert rows[slug]["passed_over"] == 1 and rows[slug]["starving"] is True
        assert rows[slug]["ready_since"] is not None and rows[slug]["ready_since"] < storm.events()[-1]["at"]
    assert (rows["c"]["ready_since"], rows["c"]["passed_over"], rows["c"]["starving"]) == (None, 0, False)
    plain = storm.cli("list", "--plain").stdout
    assert plain.count("starving: ready since") == 2, plain
    if kind == "directory":  # doctor examines a directory storm's files
        done = storm.cli("doctor", "--json")
        assert done.returncode == 1
        found = [(f["code"], f["subject"]) for f in json.loads(done.stdout)["findings"]]
        assert found == [("starving", "a"), ("starving", "b")], found


def test_without_starving_after_nothing_is_starving_and_a_new_lane_was_passed_over_by_nothing(under_test, kind):
    storm = under_test
    storm.make("a 1\nb 2\n")
    assert answer(storm, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    rows = {r["slug"]: r for r in answer(storm, "list")["rows"]}
    assert (rows["b"]["passed_over"], rows["b"]["starving"]) == (1, False)
    answer(storm, "add", "late", "9")  # ready since it was added, after the claim
    rows = {r["slug"]: r for r in answer(storm, "list")["rows"]}
    # b's line was written by hand: on a directory it dates from queue.txt's last change (the add's
    # append), later than the truth and never earlier; a database records every lane it holds
    assert rows["b"]["passed_over"] == (0 if kind == "directory" else 1)
    assert rows["late"]["passed_over"] == 0 and rows["late"]["ready_since"] == storm.events()[-1]["at"]
    assert rows["a"]["ready_since"] is None  # running


def test_a_malformed_starving_after_is_the_usual_declaration_error(tmp_path):
    storm = DirectoryStorm(tmp_path)
    storm.make("a 1\n", toml='[priority]\nstarving_after = "soon"\n')
    refused = answer(storm, "bump", "a", code=1)
    assert refused["code"] == "declaration_unreadable" and "starving_after" in refused["message"]
    assert any("starving_after" in w for w in answer(storm, "list")["warnings"])
    done = storm.cli("doctor", "--json")
    assert ("declaration_unreadable", "storm.toml") in [(f["code"], f["subject"]) for f in json.loads(done.stdout)["findings"]]


def test_a_database_state_row_of_an_earlier_format_is_folded_again_from_the_log(pg_server, pg_url):
    """An upgrade leaves a state row of the format before waivers: it is not
    damage; the log is folded from its first line and the next request
    rewrites the row."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    storm = DatabaseStorm(pg_url)
    storm.make("api 1\nui 2 api\n")
    answer(storm, "waive", "ui", "api", "--reason", "r")
    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as conn:
        body = json.loads(conn.execute("SELECT body FROM storm_queue.state").fetchone()[0])
        conn.execute("UPDATE storm_queue.state SET body = %s", (json.dumps({**body, "v": body["v"] - 1}),))
    rows = {r["slug"]: r for r in answer(storm, "list")["rows"]}
    assert rows["ui"]["state"] == "ready"  # the waiver, folded again from the log
    answer(storm, "bump", "ui")
    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as conn:
        from storm_queue.core.statebody import FORMAT

        assert json.loads(conn.execute("SELECT body FROM storm_queue.state").fetchone()[0])["v"] == FORMAT
    assert answer(storm, "verify")["sound"] is True

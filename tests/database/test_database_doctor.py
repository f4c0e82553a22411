"""``storm-queue doctor`` on a database storm: the log and the state row,
the declaration, leases and quarantine, the grant and the event table's
triggers; the output shape and exit codes of doctor on a directory."""

from __future__ import annotations

import json

import pytest

from tests.conftest import clean_env, make_storm, run_cli

pytestmark = pytest.mark.postgresql


def ok(url: str, *args: str) -> dict:
    done = run_cli(url, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def doctor(url: str, *args: str) -> tuple[int, dict]:
    done = run_cli(url, "doctor", "--json", *args)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def codes(report: dict) -> list[tuple[str, str, str]]:
    return [(f["severity"], f["code"], f["subject"]) for f in report["findings"]]


def admin(pg_server, url: str):
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    return pg_server.admin(conninfo_to_dict(url)["dbname"])


@pytest.fixture
def db(pg_url: str) -> str:
    assert run_cli(None, "init", pg_url).returncode == 0
    for slug, issue in (("a", "1"), ("b", "2")):
        ok(pg_url, "add", slug, issue)
    ok(pg_url, "bump", "b", "--reason", "first")
    return pg_url


def test_a_sound_storm_has_no_findings_in_the_shape_of_a_directory_s_report(db, tmp_path) -> None:
    rc, report = doctor(db)
    assert rc == 0 and report["clean"] is True and report["findings"] == [], report
    plain = run_cli(db, "doctor")
    assert plain.returncode == 0 and plain.stdout.startswith("no findings: the storm at postgresql://")
    make_storm(tmp_path / "storm", "a 1\n")
    done = run_cli(tmp_path / "storm", "doctor", "--json")
    assert done.returncode == 0 and set(json.loads(done.stdout)) == set(report)


def test_a_role_other_than_the_operator_s_that_may_write_is_an_error(pg_server, db, pg_role) -> None:
    reader, writer, member = pg_role(), pg_role(), pg_role()
    with admin(pg_server, db) as conn:
        conn.execute(f"GRANT USAGE ON SCHEMA storm_queue TO {reader}, {writer}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA storm_queue TO {reader}, {writer}")
        assert doctor(db)[0] == 0  # readers, as many-hosts.md grants them, are sound
        conn.execute(f"GRANT INSERT ON storm_queue.lane TO {writer}")
        conn.execute(f"GRANT USAGE ON SEQUENCE storm_queue.lane_pos_seq TO {writer}")
        conn.execute("GRANT DELETE ON storm_queue.settled TO PUBLIC")
        operator = conn.execute("SELECT operator FROM storm_queue.storm").fetchone()[0]
        conn.execute(f"GRANT {operator} TO {member}")
    rc, report = doctor(db)
    assert rc == 1 and report["errors"] == 4 and report["warnings"] == 0, report
    found = report["findings"]
    assert [(f["code"], f["subject"]) for f in found] == [
        ("exposed", "storm_queue.settled"), ("exposed", "storm_queue.lane"),
        ("exposed", "storm_queue.lane_pos_seq"), ("exposed", "storm_queue")], found
    assert "PUBLIC" in found[0]["message"] and found[0]["fix"] == "REVOKE DELETE ON storm_queue.settled FROM PUBLIC"
    assert writer in found[1]["message"] and found[1]["fix"] == f"REVOKE INSERT ON storm_queue.lane FROM {writer}"
    assert found[3]["fix"] == f"REVOKE {operator} FROM {member}"
    text = run_cli(db, "doctor")
    assert text.returncode == 1 and len(text.stdout.splitlines()) == 4 and text.stdout.startswith("error   exposed ")
    assert "4 error(s), 0 warning(s)" in text.stderr


def test_a_table_another_role_owns_is_an_error(pg_server, db, pg_role) -> None:
    other = pg_role()
    with admin(pg_server, db) as conn:
        conn.execute(f"ALTER TABLE storm_queue.result OWNER TO {other}")
    rc, report = doctor(db)
    assert rc == 1 and codes(report) == [("error", "exposed", "storm_queue.result"),
                                         ("error", "unreadable", "storm_queue")], report  # nor may the operator read it
    assert report["findings"][0]["fix"].startswith("ALTER TABLE storm_queue.result OWNER TO ")


@pytest.mark.parametrize("harm, why", [
    ("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only", "is disabled"),
    ("DROP TRIGGER event_no_truncate ON storm_queue.event", "is missing"),
    ("ALTER TABLE storm_queue.event ENABLE REPLICA TRIGGER event_append_only", "replica"),
    ("CREATE OR REPLACE FUNCTION storm_queue.append_only() RETURNS trigger LANGUAGE plpgsql AS "
     "$$ BEGIN RETURN NEW; END $$", "body"),
])
def test_an_event_table_that_is_no_longer_append_only_is_an_error(pg_server, db, harm, why) -> None:
    with admin(pg_server, db) as conn:
        conn.execute(harm)
    rc, report = doctor(db)
    assert rc == 1, report
    assert {c for c in codes(report)} == {("error", "not_append_only", "storm_queue.event")}, report
    assert all(why in f["message"] for f in report["findings"]), report


def test_a_state_row_that_is_not_the_fold_of_the_log_and_a_broken_chain(pg_server, db) -> None:
    from storm_queue.core.statebody import dump_state, load_state
    from storm_queue.core.records import replace

    with admin(pg_server, db) as conn:
        body = conn.execute("SELECT body FROM storm_queue.state").fetchone()[0]
        conn.execute("UPDATE storm_queue.state SET body = %s", (dump_state(replace(load_state(body), named=("zz",))),))
    rc, report = doctor(db)
    assert rc == 1 and codes(report) == [("error", "state_disagrees", "storm_queue.state")], report
    with admin(pg_server, db) as conn:
        conn.execute("UPDATE storm_queue.state SET body = %s", (body,))
        conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only")
        conn.execute("UPDATE storm_queue.event SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                     "'\"add\"', '\"add\",\"note\":\"forged\"'), 'UTF8') WHERE seq = 2")
        conn.execute("ALTER TABLE storm_queue.event ENABLE TRIGGER event_append_only")
    rc, report = doctor(db)  # line 2 changed: the first wrong line
    assert rc == 1 and ("error", "unknown_order", "storm_queue.event:2") in codes(report), report


def test_a_declaration_requests_refuse_and_an_unknown_key(pg_server, db, tmp_path) -> None:
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nslots = 2\n[colour]\nsky = 'blue'\n")
    ok(db, "declare", str(toml))
    rc, report = doctor(db)
    assert rc == 1 and codes(report) == [("warning", "unknown_key", "declaration")], report
    with admin(pg_server, db) as conn:  # what declare would refuse, written past it
        conn.execute("UPDATE storm_queue.storm SET declaration = '[priority]\nsources = \"cron\"\n'")
    rc, report = doctor(db)
    assert rc == 1 and codes(report) == [("error", "declaration_unreadable", "declaration")], report
    assert "storm-queue declare" in report["findings"][0]["fix"]


def test_an_orphaned_lease_a_long_lease_and_a_quarantined_lane(db, tmp_path, clock) -> None:
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nslots = 3\nattempts = 1\nttl_min = 1\n")
    ok(db, "declare", str(toml))
    ok(db, "push", "c", "3")
    from storm_queue.service.storm import Storm

    runner = Storm.find(db, env=clean_env())  # in process, on a clock that stands still: b's lease outlives the
    clock.stand_still()                      # next claims (which would take it back), however slow the machine
    try:
        assert runner.claim(holder="h1", ttl=3).slug == "b"
        assert runner.claim(holder="h2", ttl=3600).slug == "c"
        assert runner.claim(holder="h3", ttl=3600).slug == "a"
        assert runner.finish("a", 1, "failed").outcome == "done"  # its one attempt spent: quarantined
    finally:
        runner.close()
    clock.advance(3.5)  # b's lease is past, c's is not (the storm's clock stands still with this process's)
    moved = ("warning", "clock_moved", "storm_queue.clock")
    rc, report = doctor(db)
    assert rc == 1 and codes(report) == [moved, ("warning", "quarantined", "a"), ("warning", "orphaned_lease", "b")], report
    assert "stands still" in report["findings"][0]["message"]
    rc, report = doctor(db, "--running-hours", "0.0001")
    assert codes(report) == [moved, ("warning", "long_running", "c"), ("warning", "quarantined", "a"),
                             ("warning", "orphaned_lease", "b")], report
    assert report["running_hours"] == 0.0001 and "h2" in report["findings"][1]["message"]


def test_no_storm_and_a_role_that_may_not_read_answer_exit_2(pg_server, pg_database, db, pg_role) -> None:
    empty = run_cli(pg_database(), "doctor")
    assert empty.returncode == 2 and "holds no storm" in empty.stderr and "Traceback" not in empty.stderr
    stranger = run_cli(pg_server.url_as(db, pg_role()), "doctor")
    assert stranger.returncode == 2 and "storm-queue grant reader" in stranger.stderr and "Traceback" not in stranger.stderr

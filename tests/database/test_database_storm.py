"""A storm in PostgreSQL, through the real command line: init, declare,
add, settle, the lane requests, runners, the grant, log and verify."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import PYTHON_M, clean_env, run_cli

pytestmark = pytest.mark.postgresql


def cli(url: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_cli(url, *args, env=env)


def ok(url: str, *args: str) -> dict:
    done = cli(url, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def events(pg_server, url: str) -> list[dict]:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(url)["dbname"]) as conn:
        rows = conn.execute("SELECT line FROM storm_queue.event ORDER BY seq").fetchall()
    return [json.loads(bytes(r[0])) for r in rows]


@pytest.fixture
def db(pg_url: str) -> str:
    done = run_cli(None, "init", pg_url)
    assert done.returncode == 0, done.stderr
    return pg_url


def test_init_records_line_one_and_the_connecting_role_is_the_operator(pg_server, pg_url) -> None:
    done = run_cli(None, "init", pg_url, "--json")
    assert done.returncode == 0, done.stderr
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    role = conninfo_to_dict(pg_url)["user"]
    assert json.loads(done.stdout)["operator"] == role
    (first,) = events(pg_server, pg_url)
    assert (first["seq"], first["action"], first["prev"], first["operator"], first["by"]) == (1, "init", None, role, f"operator:{role}")
    again = run_cli(None, "init", pg_url)
    assert again.returncode == 2 and "already holds a storm" in again.stderr
    assert len(events(pg_server, pg_url)) == 1


def test_an_init_that_waited_for_another_is_refused_as_any_second_init(pg_server, pg_url) -> None:
    """Two inits at once: the second waits on the schema's name until the
    first commits, then meets the catalog's own unique key (not
    DuplicateSchema). It is refused as a second init is (exit 2, nothing
    changed), not a crash (exit 4). The first is a transaction of the
    owner's that creates the schema and waits until the second waits on
    it (a real process: it must wait while this one commits)."""
    import time

    from storm_queue.store.postgres import driver
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    dbname = conninfo_to_dict(pg_url)["dbname"]
    first = driver.connect(pg_url)
    first.execute("BEGIN")
    first.execute("CREATE SCHEMA storm_queue")
    second = subprocess.Popen([*PYTHON_M, "init", pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=clean_env())
    try:
        deadline = time.monotonic() + 60
        with pg_server.admin() as admin:
            while not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                                    "wait_event_type = 'Lock'", (dbname,)).fetchone()[0]:
                assert time.monotonic() < deadline and second.poll() is None, second.poll()
                time.sleep(0.02)
        first.execute("COMMIT")
        out, err = second.communicate(timeout=60)
    finally:
        second.kill()
        second.wait(timeout=60)
        first.close()
    assert second.returncode == 2, err
    assert err.startswith(f"storm-queue: the database {dbname} (") and err.endswith(
        ") already holds a storm (schema storm_queue); nothing was changed\n"), err


def test_add_bump_claim_finish_settle_through_the_request_path(pg_server, db) -> None:
    for slug, issue, deps in (("schema", "12", None), ("api", "13", "schema"), ("docs", "14", None)):
        out = ok(db, "add", slug, issue, *(["--deps", deps] if deps else []))
        assert out["outcome"] == "done" and out["appended"] is True
    assert ok(db, "add", "api", "13")["outcome"] == "noop"
    assert cli(db, "next").stdout == "run schema 12\n"
    out = ok(db, "bump", "docs", "--reason", "outage")
    assert out["moved"] == ["docs"]
    assert cli(db, "next").stdout == "run docs 14\n"
    listing = ok(db, "list")
    assert [r["slug"] for r in listing["rows"]][:3] == ["docs", "schema", "api"]
    claim = ok(db, "claim", "--holder", "host-7")
    assert claim["decision"] == "run docs 14 1" and claim["token"] == 1
    assert cli(db, "claim", "--holder", "host-8").stdout == "wait\n"  # one slot
    assert cli(db, "finish", "docs", "--token", "2", "--result", "ok").returncode == 2  # stale_fence
    assert ok(db, "finish", "docs", "--token", "1", "--result", "ok")["outcome"] == "done"
    assert cli(db, "next").stdout == "review docs\n"
    assert ok(db, "settle", "docs", "integrated")["outcome"] == "done"
    assert cli(db, "next").stdout == "run schema 12\n"
    assert ok(db, "settle", "docs", "integrated")["outcome"] == "noop"
    actions = [e["action"] for e in events(pg_server, db)]
    assert actions == ["init", "add", "add", "add", "add", "bump", "claim", "refused", "finish", "settle", "settle"]
    audit = ok(db, "verify")
    assert audit["sound"] is True and audit["lines"] == len(actions)
    shown = cli(db, "log")
    assert shown.returncode == 0 and "bump docs" in shown.stdout and 'reason "outage"' in shown.stdout


def test_settle_of_a_leased_lane_is_refused_unless_forced(pg_server, db) -> None:
    ok(db, "add", "a", "1")
    ok(db, "claim", "--holder", "h")
    refused = cli(db, "settle", "a", "abandoned", "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout)["code"] == "lane_running"
    forced = ok(db, "settle", "a", "abandoned", "--force")
    assert forced["outcome"] == "done"
    assert [e["action"] for e in events(pg_server, db)][-3:] == ["refused", "expire", "settle"]
    assert cli(db, "next").stdout == "empty\n"


def test_declare_admits_a_source_and_a_malformed_file_changes_nothing(pg_server, db, tmp_path) -> None:
    ok(db, "add", "a", "1")
    undeclared = cli(db, "bump", "a", "--source", "cron", "--json")
    assert undeclared.returncode == 1 and json.loads(undeclared.stdout)["code"] == "undeclared_source"
    good = tmp_path / "storm.toml"
    good.write_text('[priority]\nsources = ["cron"]\n[runner]\nslots = 2\n')
    assert ok(db, "declare", str(good))["outcome"] == "done"
    assert ok(db, "declare", str(good))["outcome"] == "noop"
    declared = [e for e in events(pg_server, db) if e["action"] == "declare"]
    assert declared[0]["declaration"] == {"priority": {"sources": ["cron"]}, "runner": {"slots": 2}}
    assert ok(db, "bump", "a", "--source", "cron")["by"] == "source:cron"
    bad = tmp_path / "bad.toml"
    bad.write_text("[priority\n")
    before = events(pg_server, db)
    done = cli(db, "declare", str(bad))
    assert done.returncode == 2 and "nothing was declared" in done.stderr
    assert events(pg_server, db) == before
    # TOML a log line cannot carry: a number JSON has not, a NUL (the server's insert check would refuse the line)
    for text, said in (("[doctor]\nrunning_hours = inf\n", '"doctor.running_hours" is inf'),
                       ('x = [1, {a = nan}]\n', '"x.1.a" is nan'), ('[doctor]\nnote = "a\\u0000b"\n', '"doctor.note" holds a NUL'),
                       ('"k\\u0000" = 1\n', "a key holds a NUL")):
        bad.write_text(text)
        done = cli(db, "declare", str(bad))
        assert done.returncode == 2 and said in done.stderr and "nothing was declared" in done.stderr, done.stderr
    assert events(pg_server, db) == before


def test_declare_on_a_directory_storm_says_storm_toml_is_the_declaration(tmp_path) -> None:
    root = tmp_path / "storm"
    root.mkdir()
    (root / "queue.txt").write_text("a 1\n")
    (tmp_path / "x.toml").write_text("")
    done = run_cli(root, "declare", str(tmp_path / "x.toml"))
    assert done.returncode == 2 and "storm.toml" in done.stderr


def test_a_stranger_role_is_refused_and_the_storm_unchanged(pg_server, db, pg_role) -> None:
    ok(db, "add", "a", "1")
    stranger = pg_server.url_as(db, pg_role())
    before = events(pg_server, db)
    done = cli(stranger, "bump", "a", "--json")
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer["code"] == "not_operator" and answer["recorded"] is False
    assert events(pg_server, db) == before
    reading = cli(stranger, "list")
    assert reading.returncode == 2 and "storm-queue grant reader" in reading.stderr and "Traceback" not in reading.stderr


def test_the_event_table_refuses_update_delete_and_truncate_even_from_the_operator(pg_server, db) -> None:
    from storm_queue.store.postgres import driver

    with driver.connect(db) as conn:
        for sql in ("UPDATE storm_queue.event SET line = line", "DELETE FROM storm_queue.event",
                    "TRUNCATE storm_queue.event"):
            with pytest.raises(driver.errors.InsufficientPrivilege):
                conn.execute(sql)
    assert len(events(pg_server, db)) == 1


def test_a_wrong_url_is_a_clear_refusal_without_the_password(pg_server, db) -> None:
    bad = pg_server.url_as(db, "nobody_here", password="s3cret-pw")
    done = cli(bad, "list")
    assert done.returncode == 2 and "cannot connect" in done.stderr
    assert "s3cret-pw" not in done.stderr + done.stdout and "Traceback" not in done.stderr
    unreachable = cli("postgresql://op:s3cret-pw@127.0.0.1:1/storm", "bump", "a", "--json")  # not a refusal: exit 5
    assert unreachable.returncode == 5 and "s3cret-pw" not in unreachable.stderr + unreachable.stdout
    assert json.loads(unreachable.stdout)["recorded"] is False and "a retry is safe" in unreachable.stderr


def test_many_claimers_at_once_take_the_first_lanes_each_once(pg_server, db, tmp_path) -> None:
    """Real processes: five claimers at once, from threads."""
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nslots = 5\n")
    ok(db, "declare", str(toml))
    for n in range(8):
        ok(db, "add", f"l{n}", str(n))

    def claim(n: int) -> str:
        return run_cli(db, "claim", "--holder", f"h{n}", process=True).stdout.strip()

    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(claim, range(5)))
    taken = sorted(a.split()[1] for a in answers)
    assert taken == [f"l{n}" for n in range(5)], answers
    assert all(a.endswith(" 1") for a in answers)
    assert cli(db, "claim").stdout == "wait\n"
    assert ok(db, "verify")["sound"] is True


def test_the_log_json_is_the_same_lines_a_directory_storm_writes(pg_server, db, tmp_path) -> None:
    root = tmp_path / "storm"
    root.mkdir()
    (root / "queue.txt").write_text("")
    steps = [("add", "a", "1"), ("add", "b", "2", "--deps", "a"), ("bump", "b", "--reason", "r"),
             ("unbump", "b"), ("push", "c", "3"), ("bump", "zz")]
    for step in steps:
        assert cli(db, *step).returncode == run_cli(root, *step).returncode
    def strip(lines: list[dict]) -> list[dict]:
        return [{k: v for k, v in e.items() if k not in ("at", "by", "prev")} for e in lines]
    from tests.conftest import log_events
    assert strip(events(pg_server, db)[1:]) == [dict(e, seq=e["seq"] + 1) for e in strip(log_events(root))]


def test_why_list_and_reset_answer_a_database_storm(db) -> None:
    ok(db, "add", "schema", "12")
    ok(db, "add", "api", "13", "--deps", "schema")
    ok(db, "bump", "api", "--reason", "outage")
    why = cli(db, "why", "schema")
    assert why.returncode == 0 and "api" in why.stdout
    plain = cli(db, "list", "--plain")
    rows = [line.split()[:3] for line in plain.stdout.splitlines() if not line.split()[0].endswith(":")]
    assert plain.returncode == 0 and rows == [["1", "*", "schema"], ["2", "*", "api"]], plain.stdout
    reset = cli(db, "reset", "--reason", "x", "--json")
    assert reset.returncode == 2 and json.loads(reset.stdout)["code"] == "log_readable"


def test_reset_of_a_database_log_that_cannot_be_read_says_it_cannot(pg_server, db) -> None:
    """A state row that cannot be read is an unknown order (exit 3); reset
    cannot set a database's rows aside, and says so (exit 2), changing nothing."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    ok(db, "add", "a", "1")
    with pg_server.admin(conninfo_to_dict(db)["dbname"]) as conn:
        conn.execute("UPDATE storm_queue.state SET body = 'not a state'")
    assert cli(db, "list").returncode == 3
    before = events(pg_server, db)
    for keep in ((), ("--keep-intact",)):  # issue 20 item 4: a database's rows are never set aside, kept or not
        reset = cli(db, "reset", *keep, "--reason", "start again")
        assert reset.returncode == 2, reset.stderr
        assert "verify names the first bad line" in reset.stderr and "Traceback" not in reset.stderr
        assert events(pg_server, db) == before


def test_next_marks_a_lane_blocked_in_a_row_not_a_file(pg_server, db, tmp_path) -> None:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    ok(db, "add", "base", "1")
    ok(db, "add", "top", "2", "--deps", "base")
    ok(db, "add", "other", "3")
    ok(db, "settle", "base", "abandoned")
    assert cli(db, "next").stdout == "run other 3\n"
    with pg_server.admin(conninfo_to_dict(db)["dbname"]) as conn:
        (body,), = conn.execute("SELECT body FROM storm_queue.result WHERE slug = 'top'").fetchall()
    assert body["completed"] is False and body["status"] == "blocked"
    assert body["blocked_on"] == "base" and body["blocked_on_all"] == ["base"]
    assert "top" not in [p.name for p in tmp_path.rglob("*")]


def test_verify_finds_a_changed_line_and_a_state_row_that_is_not_the_replay(pg_server, db) -> None:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    ok(db, "add", "a", "1")
    ok(db, "bump", "a")
    assert ok(db, "verify")["checkpoint"]["state"] == "agrees"
    from storm_queue.core.statebody import dump_state, load_state
    from storm_queue.core.records import replace

    with pg_server.admin(conninfo_to_dict(db)["dbname"]) as conn:
        conn.execute("UPDATE storm_queue.state SET body = (SELECT body FROM storm_queue.state)")  # unchanged: still sound
        body = conn.execute("SELECT body FROM storm_queue.state").fetchone()[0]
        # the body (the state at line body_seq, which the lines after it fold on) names a lane the log never did
        forged_state = replace(load_state(body), named=("b",))
        conn.execute("UPDATE storm_queue.state SET body = %s", (dump_state(forged_state),))
    forged = cli(db, "verify", "--json")
    assert forged.returncode == 3 and "state row" in json.loads(forged.stdout)["problem"]["what"]
    with pg_server.admin(conninfo_to_dict(db)["dbname"]) as conn:  # a superuser can drop the trigger: the chain still tells
        conn.execute("UPDATE storm_queue.state SET body = %s", (body,))
        assert cli(db, "verify").returncode == 0
        conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only")
        conn.execute("UPDATE storm_queue.event SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                     "'\"reason\"', '\"reasons\"'), 'UTF8') WHERE seq = 2")
        conn.execute("UPDATE storm_queue.event SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                     "'\"add\"', '\"add\",\"note\":\"forged\"'), 'UTF8') WHERE seq = 2")
    damaged = json.loads(cli(db, "verify", "--json").stdout)
    # line 2 changed: the first wrong line is 2, whose content no longer matches what line 3 chains to
    assert damaged["problem"]["line"] == 2 and "line 2 was changed" in damaged["problem"]["what"], damaged


def test_migrate_carries_a_directory_storm_and_the_directory_then_refuses_requests(pg_server, pg_url, tmp_path) -> None:
    from tests.conftest import log_events, make_storm

    root = make_storm(tmp_path / "storm", "schema 12\napi 13 schema\ndocs 14\n", integrated=["old"],
                      toml='[priority]\nsources = ["cron"]\n')
    for step in (("bump", "api", "--reason", "outage"), ("claim", "--holder", "h1"), ("add", "extra", "15"),
                 ("bump", "docs", "--source", "cron")):
        assert run_cli(root, *step).returncode == 0, step
    lines_before = (root / "priority.log").read_bytes()
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    done = run_cli(None, "migrate", str(root), pg_url, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["lines"] == len(lines_before.splitlines())
    # every line with its seq and chain, so verify on the database checks from line 1
    stored = events(pg_server, pg_url)
    assert [json.dumps(e, separators=(",", ":")) for e in stored] == [
        json.dumps(json.loads(line), separators=(",", ":")) for line in lines_before.splitlines()]
    assert ok(pg_url, "verify")["sound"] is True
    moved = json.loads(run_cli(pg_url, "list", "--json").stdout)
    assert [(r["slug"], r["state"], r["prioritised"]) for r in moved["rows"]] == [
        (r["slug"], r["state"], r["prioritised"]) for r in listed["rows"]]
    assert ok(pg_url, "bump", "docs", "--source", "cron")["outcome"] != "refused"  # the declaration came along
    # the directory's last line names where it went; requests there are refused, reads work
    last = log_events(root)[-1]
    assert last["action"] == "migrate" and "storm_" in last["to"]
    refused = run_cli(root, "bump", "docs")
    assert refused.returncode == 2 and "moved to" in refused.stderr
    assert len(log_events(root)) == len(lines_before.splitlines()) + 1
    assert run_cli(root, "list").returncode == 0 and run_cli(root, "verify").returncode == 0
    again = run_cli(None, "migrate", str(root), pg_url)
    assert again.returncode == 2


def test_after_a_migrate_the_directory_sends_no_runner_to_work_and_its_readers_say_where_it_went(
        pg_server, pg_database, tmp_path) -> None:
    """One live storm after a move (issue 22, item 3): on the directory,
    ``next`` and ``claim`` exit 3 naming the URL without its password and
    never say ``run``; ``list``, ``why``, ``log`` and ``doctor`` first say
    where the storm went; writes are refused (exit 2) as before."""
    from tests.conftest import log_events, make_storm

    url = pg_database()
    secret = url + ("&" if "?" in url else "?") + "password=hunter2"  # trust auth: never asked for, never shown
    root = make_storm(tmp_path / "storm", "a 1\nb 2\nd 4\n")
    assert run_cli(root, "bump", "d", "--reason", "first").returncode == 0
    assert run_cli(None, "migrate", str(root), secret).returncode == 0
    lines = len(log_events(root))
    for ask in (("next",), ("next", "--json"), ("claim", "--holder", "late-runner"), ("claim", "--json")):
        done = run_cli(root, *ask)
        said = done.stdout + done.stderr
        assert done.returncode == 3, (ask, said)
        assert "run " not in done.stdout and "hunter2" not in said and "moved to postgresql://" in said, (ask, said)
    for ask in (("list",), ("list", "--json"), ("why", "d"), ("log",), ("doctor",)):
        done = run_cli(root, *ask)
        first = done.stderr.splitlines()[0] if done.stderr else ""
        assert first.startswith("storm-queue: this storm moved to postgresql://"), (ask, done.stderr)
        assert "hunter2" not in done.stdout + done.stderr
    for ask in (("bump", "a"), ("renew", "d", "--token", "1"), ("halt", "--reason", "x")):
        done = run_cli(root, *ask)
        assert done.returncode == 2 and "moved to" in done.stderr, (ask, done.stderr)
    assert len(log_events(root)) == lines  # nothing recorded on the directory
    assert cli(url, "next").stdout == "run d 4\n"  # the database runs the lanes


def test_migrate_carries_a_directory_never_requested_on(pg_server, pg_url, tmp_path) -> None:
    """Issue 22, item 4: lanes in queue.txt order, the ledgers and the
    declaration, from a directory whose log has no line yet (or no file)."""
    from tests.conftest import log_events, make_storm

    root = make_storm(tmp_path / "storm", "zeta 9\nalpha 1 old\nmid 5\n", integrated=["old"], abandoned=["gone"],
                      toml='[priority]\nsources = ["cron"]\n')
    assert not (root / "priority.log").exists()
    listed = json.loads(run_cli(root, "list", "--json").stdout)
    done = run_cli(None, "migrate", str(root), pg_url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["lines"], report["lanes"]) == (0, 3), report
    there = json.loads(run_cli(pg_url, "list", "--json").stdout)
    assert [(r["slug"], r["issue"], r["deps"], r["state"]) for r in there["rows"]] == [
        (r["slug"], r["issue"], r["deps"], r["state"]) for r in listed["rows"]]
    assert [r["slug"] for r in there["rows"]] == ["zeta", "alpha", "mid"]
    assert there["decision"] == listed["decision"] == "run zeta 9"
    assert ok(pg_url, "bump", "mid", "--source", "cron")["outcome"] == "done"  # the declaration came along
    assert ok(pg_url, "settle", "gone", "abandoned")["outcome"] == "noop"  # the ledgers came along
    assert ok(pg_url, "verify")["sound"] is True
    (line,) = log_events(root)
    assert (line["seq"], line["action"]) == (1, "migrate")
    assert run_cli(root, "verify").returncode == 0


def test_migrate_carries_unattended_as_the_declared_key_and_says_so(pg_server, pg_url, tmp_path) -> None:
    """A directory's UNATTENDED file becomes ``[runner] unattended = true`` in
    the database's declaration (every other key as it was), and both the
    migrate's report and the directory's last line say it was carried."""
    import tomllib

    from storm_queue.ops.migrate import CARRIED_UNATTENDED
    from tests.conftest import log_events, make_storm

    toml = '[priority]\nsources = ["cron"]\n\n[runner]\nslots = 2\n'
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", finished=["a"], unattended=True, toml=toml)
    assert run_cli(root, "bump", "b").returncode == 0
    assert run_cli(root, "unbump", "b").returncode == 0
    assert run_cli(root, "next").stdout == "run b 2\n"  # a awaits a batch review: it holds nothing
    done = run_cli(None, "migrate", str(root), pg_url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["carried"] == [CARRIED_UNATTENDED]
    assert not any("UNATTENDED" in what for what in report["not_carried"]), report
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as conn:
        text, sha = conn.execute("SELECT declaration, declaration_sha256 FROM storm_queue.storm").fetchone()
    assert tomllib.loads(text) == {"priority": {"sources": ["cron"]}, "runner": {"slots": 2, "unattended": True}}
    assert "UNATTENDED" in text  # a comment in it says where the key came from
    import hashlib

    assert sha == hashlib.sha256(text.encode()).hexdigest()
    # the database storm is unattended, as the directory was: the finished lane waits for review
    assert cli(pg_url, "next").stdout == "run b 2\n"
    assert ok(pg_url, "claim", "--holder", "h")["decision"] == "run b 2 1"
    last = log_events(root)[-1]
    assert (last["action"], last["carried"]) == ("migrate", [CARRIED_UNATTENDED])
    shown = run_cli(root, "log").stdout.splitlines()[-1]
    assert shown.endswith(f"; this log ends here; carried {CARRIED_UNATTENDED}"), shown
    assert run_cli(root, "verify").returncode == 0


def test_migrate_says_in_words_what_it_carried_and_refuses_a_runner_table_it_cannot_add_to(pg_server, pg_database,
                                                                                          tmp_path) -> None:
    from storm_queue.ops.migrate import CARRIED_UNATTENDED
    from tests.conftest import log_events, make_storm

    root = make_storm(tmp_path / "plain", "a 1\n", unattended=True)  # no storm.toml: the key makes one
    assert run_cli(root, "bump", "a").returncode == 0
    url = pg_database()
    done = run_cli(None, "migrate", str(root), url)
    assert done.returncode == 0, done.stderr
    assert f"carried: {CARRIED_UNATTENDED}\n" in done.stdout + done.stderr
    assert "not carried" not in done.stderr
    assert json.loads(cli(url, "why", "a", "--json").stdout)["state"] == "ready"
    # an inline [runner] table leaves no safe place for the key: refused, nothing migrated anywhere
    root = make_storm(tmp_path / "inline", "a 1\n", unattended=True, toml="runner = { slots = 2 }\n")
    assert run_cli(root, "bump", "a").returncode == 0
    before = log_events(root)
    url = pg_database()
    refused = run_cli(None, "migrate", str(root), url)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "unattended = true" in refused.stderr and "nothing was migrated" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert log_events(root) == before
    assert cli(url, "list").returncode == 2  # no storm in that database


def test_with_unattended_adds_the_key_keeping_every_other() -> None:
    import tomllib

    from storm_queue.ops.migrate import with_unattended

    for text in (None, "", '[priority]\nsources = ["cron"]', '[runner]\nslots = 2\n\n[priority]\nsources = []\n',
                 "[runner] # r\nunattended = false # was\nttl = 60\n"):
        out = with_unattended(text)
        want = tomllib.loads(text or "")
        want.setdefault("runner", {})["unattended"] = True
        assert tomllib.loads(out) == want, (text, out)
        assert "UNATTENDED" in out
    for text in ("runner = { slots = 2 }\n", "runner.slots = 2\n", "not toml [[", "[runner]\nunattended = 3\n"):
        assert with_unattended(text) is None, text


def test_a_long_lived_storm_object_folds_on_what_other_writers_recorded(pg_server, db) -> None:
    """One Storm object (one connection) across many requests sees every
    line another writer appends, whether it folds them on or, far behind,
    reads the state row again; the state row's body is never more than
    STATE_EVERY lines behind the log, and verify agrees with it."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    from storm_queue.store.postgres import store as database
    from storm_queue.service.storm import Storm

    for slug, issue in (("a", "1"), ("b", "2"), ("c", "3")):
        ok(db, "add", slug, issue)
    runner, other = Storm.find(db, env=clean_env()), Storm.find(db, env=clean_env())
    assert runner.claim(holder="runner").decision == "run a 1 1"
    assert other.bump("c").outcome == "done"  # a line the runner has not seen
    assert runner.listing().view.decision == "run c 3"
    assert runner.unbump("c").outcome == "done"  # it knows c is prioritised: it folded the other's line on
    for i in range(database.FOLD_AT_MOST + 3):  # so far behind that the runner reads the state row again
        assert (other.bump if i % 2 == 0 else other.unbump)("b").outcome == "done"
    assert runner.unbump("b").outcome == "done"  # the last of those bumped b
    assert runner.finish("a", 1, "ok").outcome == "done"
    with pg_server.admin(conninfo_to_dict(db)["dbname"]) as conn:
        seq, body_seq, top = conn.execute("SELECT seq, body_seq, (SELECT max(seq) FROM storm_queue.event) "
                                          "FROM storm_queue.state").fetchone()
    assert seq == top and 0 <= seq - body_seq < database.STATE_EVERY, (seq, body_seq)
    audit = ok(db, "verify")
    assert audit["sound"] and audit["checkpoint"] == {"state": "agrees", "line": body_seq, "why": None}, audit
    assert [e["slug"] for e in events(pg_server, db) if e["action"] in ("claim", "finish")] == ["a", "a"]

"""A runner role and a reader role (issue 22, item 2; issue 30): what the
operator grants, what a granted role may and may not do, and that it
cannot change the storm behind the tool's back (no table privilege; the
functions it may execute take a request's typed arguments and decide and
write it themselves: sql/functions/serve_*.sql)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.postgresql

TABLES = ("storm", "lane", "settled", "result", "event", "state", "version", "member")


def answer(url: str, *args: str, code: int = 0) -> dict:
    done = run_cli(url, *args, "--json")
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}


def events(pg_server, url: str) -> list[dict]:
    with pg_server.admin(dbname(url)) as conn:
        return [json.loads(bytes(r[0])) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]


def dbname(url: str) -> str:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    return conninfo_to_dict(url)["dbname"]


def rows(pg_server, url: str) -> dict[str, list]:
    with pg_server.admin(dbname(url)) as conn:
        return {t: conn.execute(f"SELECT * FROM storm_queue.{t} ORDER BY 1").fetchall()  # reviewed: our table names
                for t in ("lane", "settled", "result", "storm", "member")}


@pytest.fixture
def db(pg_url: str, tmp_path) -> str:
    assert run_cli(None, "init", pg_url).returncode == 0
    toml = tmp_path / "storm.toml"
    toml.write_text("[priority]\nsources = [\"cron\"]\n\n[runner]\nttl_min = 1\nslots = 2\nunattended = true\n")
    for args in (("add", "a", "1"), ("add", "b", "2"), ("add", "c", "3"), ("declare", str(toml))):
        assert run_cli(pg_url, *args).returncode == 0, args
    return pg_url


def test_a_runner_runs_lanes_and_its_every_other_request_is_refused(pg_server, db, pg_role, tmp_path):
    """A runner's claim, renew, finish, release and recover are served and
    recorded by the server, refusals included (a source, naming a lane to
    recover); its every other request is refused ``not_operator`` and, as
    a reader's or a stranger's, not recorded: the server records for a
    runner only what it serves (the runner composes no line)."""
    role = pg_role(prefix="runner")
    runner = pg_server.url_as(db, role)
    assert answer(runner, "claim", code=1)["code"] == "not_operator"  # not yet granted: a stranger
    done = answer(db, "grant", "runner", role, "--reason", "host r1")
    assert (done["outcome"], done["recorded"]) == ("done", True)
    assert answer(db, "grant", "runner", role)["outcome"] == "noop"
    grant = [e for e in events(pg_server, db) if e["action"] == "grant"]
    assert [(e["kind"], e["role"], e.get("noop") is None) for e in grant] == [("runner", role, True), ("runner", role, False)]

    claimed = answer(runner, "claim", "--holder", "r1")
    assert claimed["decision"] == "run a 1 1" and claimed["by"] == f"runner:{role}"
    assert answer(runner, "renew", "a", "--token", "1")["outcome"] == "done"
    assert answer(runner, "finish", "a", "--token", "1", "--result", "ok", "--note", "built")["outcome"] == "done"
    with pg_server.admin(dbname(db)) as conn:
        body = conn.execute("SELECT body FROM storm_queue.result WHERE slug = 'a'").fetchone()[0]
    assert (body["completed"], body["token"], body["note"]) == (True, 1, "built")
    assert answer(runner, "claim", "--holder", "r1")["decision"] == "run b 2 1"
    assert [e["by"] for e in events(pg_server, db)[-4:]] == [f"runner:{role}"] * 4
    for args in (("list",), ("next",), ("why", "b"), ("log",), ("verify",)):
        assert run_cli(runner, *args).returncode == 0, args
    assert run_cli(runner, "doctor").returncode in (0, 1)

    before, seen = rows(pg_server, db), len(events(pg_server, db))
    toml = tmp_path / "other.toml"
    toml.write_text("[runner]\nslots = 9\n")
    served = [("recover", "b"), ("claim", "--source", "cron"), ("recover", "b", "--force", "--reason", "x")]
    refused = [("bump", "c"), ("unbump", "c"), ("push", "z", "9"), ("add", "z", "9"), ("settle", "c", "integrated"),
               ("halt", "--reason", "x"), ("resume", "--reason", "x"), ("waive", "c", "a", "--reason", "x"),
               ("unpark", "c", "--reason", "x"), ("schedule", "c", "--not-before", "+1h"), ("reset", "--reason", "x"),
               ("declare", str(toml)), ("grant", "runner", role), ("revoke", "runner", role),
               ("bump", "c", "--source", "cron"), ("cancel", "b", "--reason", "x"), ("hold", "c", "--reason", "x"),
               ("unhold", "c", "--reason", "x")]
    for args in served + refused:
        doc = answer(runner, *args, code=1)
        assert (doc["outcome"], doc["code"], doc["recorded"], doc["by"]) == (
            "refused", "not_operator", args in served, f"runner:{role}"), (args, doc)
    upgrade = run_cli(None, "upgrade", runner, "--json")
    assert upgrade.returncode == 1 and json.loads(upgrade.stdout)["code"] == "not_operator"
    after = events(pg_server, db)[seen:]
    assert [(e["action"], e["requested"], e["code"], e["by"]) for e in after] == [
        ("refused", args[0], "not_operator", f"runner:{role}") for args in served]
    assert rows(pg_server, db) == before  # the storm otherwise unchanged
    assert json.loads(run_cli(db, "verify", "--json").stdout)["sound"] is True

    # revoked: its claim is refused, as any role's never granted is
    assert answer(db, "revoke", "runner", role)["outcome"] == "done"
    assert answer(db, "revoke", "runner", role)["outcome"] == "noop"
    assert answer(runner, "claim", code=1)["code"] == "not_operator"
    never = pg_server.url_as(db, pg_role())
    assert answer(never, "claim", code=1)["code"] == "not_operator"


def test_a_runner_holds_no_write_privilege_and_executes_only_its_serving_functions(pg_server, db, pg_role):
    from storm_queue.store.postgres import driver

    role = pg_role(prefix="runner")
    answer(db, "grant", "runner", role)
    with pg_server.admin(dbname(db)) as conn:
        for table in TABLES:
            for privilege in ("INSERT", "UPDATE", "DELETE", "TRUNCATE"):
                assert not conn.execute("SELECT has_table_privilege(%s, %s, %s)",
                                        (role, f"storm_queue.{table}", privilege)).fetchone()[0], (table, privilege)
        executes = conn.execute(
            "SELECT p.proname, p.prosecdef, p.proconfig, pg_get_userbyid(p.proowner) FROM pg_proc p "
            "WHERE p.pronamespace = 'storm_queue'::regnamespace AND has_function_privilege(%s, p.oid, 'EXECUTE') "
            "ORDER BY 1", (role,)).fetchall()
        seq = conn.execute("SELECT seq FROM storm_queue.state").fetchone()[0]
    assert [name for name, *_ in executes] == ["serve_claim", "serve_decided", "serve_finish", "serve_finish_claim",
                                               "serve_recover", "serve_release", "serve_renew"]
    assert {(definer, tuple(config), owner) for _, definer, config, owner in executes} == {
        (True, ("search_path=pg_catalog, pg_temp", "standard_conforming_strings=on"),
         dbname(db).replace("storm_", "op_"))}  # the operator's, their literals read as written
    from storm_queue.core.framing import frame

    with driver.connect(pg_server.url_as(db, role)) as conn:
        line = frame([{"action": "renew", "slug": "c", "token": 9, "ttl": 60, "expires": "2026-12-02T00:01:00.000000Z"}],
                     seq, None, "2026-12-02T00:00:00.000000Z", f"runner:{role}")[0][1]
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", (seq + 1, line))
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("UPDATE storm_queue.state SET seq = seq")
        for function in ("runner_append", "runner_mark_blocked"):  # gone: nothing takes a runner's line or body
            with pytest.raises(driver.errors.UndefinedFunction):
                conn.execute(f"SELECT storm_queue.{function}(%s, '[]')", ([line],))
    assert [e["seq"] for e in events(pg_server, db)][-1] == seq  # nothing was written


def test_an_upgrade_grants_every_runner_role_the_serving_functions_of_its_tree(pg_server, db, pg_role):
    """A runner granted before a serving function existed (serve_finish_claim
    came with schema version 12) may ask it once the operator upgrades."""
    role = pg_role(prefix="runner")
    answer(db, "grant", "runner", role)
    with pg_server.admin(dbname(db)) as conn:  # as a storm at version 11 left its runner: no EXECUTE on the new one
        conn.execute("DROP FUNCTION storm_queue.serve_finish_claim(text, numeric, text, text, text, text, numeric, "
                     "text, text, text, text, integer, text)")
        conn.execute("UPDATE storm_queue.version SET version = 11")
    runner = pg_server.url_as(db, role)
    assert "upgrade" in answer(runner, "claim", code=2)["message"]  # a storm older than the tree: upgraded first
    assert answer(db, "upgrade")["outcome"] == "done"
    assert answer(runner, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    both = answer(runner, "finish", "a", "--token", "1", "--result", "ok", "--then-claim", "--holder", "r1")
    assert (both["finish"]["outcome"], both["claim"]["decision"]) == ("done", "run b 2 1")
    assert [e["action"] for e in events(pg_server, db)[-2:]] == ["finish", "claim"]


def test_a_runner_recovers_an_expired_lease(pg_server, db, pg_role, clock):
    role = pg_role(prefix="runner")
    answer(db, "grant", "runner", role)
    runner = pg_server.url_as(db, role)
    assert answer(runner, "claim", "--holder", "lost", "--ttl", "1")["decision"] == "run a 1 1"
    clock.advance(2.5)
    done = answer(runner, "recover")
    assert done["outcome"] == "done" and "took back a" in done["message"] and done["by"] == f"runner:{role}"
    assert answer(runner, "claim", "--holder", "r2", "--ttl", "60")["decision"] == "run a 1 2"


def test_a_reader_reads_and_nothing_more(pg_server, db, pg_role):
    role = pg_role(prefix="reader")
    reader = pg_server.url_as(db, role)
    assert run_cli(reader, "list").returncode == 2  # not yet granted: may not read
    assert answer(db, "grant", "reader", role)["outcome"] == "done"
    assert run_cli(reader, "list").returncode == 0 and run_cli(reader, "log").returncode == 0
    assert answer(reader, "claim", code=1)["recorded"] is False  # a reader records nothing
    assert answer(db, "revoke", "reader", role)["outcome"] == "done"
    assert run_cli(reader, "list").returncode == 2


def test_granting_a_role_the_server_does_not_know_is_exit_2(pg_server, db):
    doc = answer(db, "grant", "runner", "no_such_role", code=2)
    assert (doc["code"], doc["recorded"]) == ("unknown_role", True)
    assert "CREATE ROLE" in doc["message"]
    revoked = answer(db, "revoke", "reader", "no_such_role", code=2)
    assert revoked["code"] == "unknown_role" and "nothing to revoke" in revoked["message"], revoked


def test_granting_the_operators_own_role_is_refused_and_leaves_its_tables_its_own(db):
    """A grant revokes a member's rights on the storm's own tables: given
    the operator's role, it took the operator's own (exit 4, a plpgsql
    traceback, rolled back). It is refused, recorded, and the storm
    writes on."""
    from storm_queue.store.postgres.driver import conninfo

    operator = conninfo(db)["user"]
    for kind in ("runner", "reader"):
        doc = answer(db, "grant", kind, operator, code=2)
        assert (doc["code"], doc["recorded"]) == ("operator_role", True), doc
    assert answer(db, "add", "after", "9")["outcome"] == "done"
    assert answer(db, "verify")["sound"] is True


def test_grant_on_a_directory_storm_says_it_takes_a_database(tmp_path):
    from tests.conftest import make_storm

    root = make_storm(tmp_path / "storm", "a 1\n")
    done = run_cli(root, "grant", "runner", "someone")
    assert done.returncode == 2 and "directory storm" in done.stderr


def test_a_runner_releases_its_lease_but_may_not_cancel_or_force_a_recover(pg_server, db, pg_role):
    """Issue 20 item 6: release is the holder's request, as renew and
    finish are, so a runner role may make it (the server serves it);
    cancel and recover --force are the operator's (cancel: or a source's):
    a runner's cancel is refused unrecorded, its recover --force refused
    by the server, recorded."""
    role = pg_role(prefix="runner")
    answer(db, "grant", "runner", role)
    runner = pg_server.url_as(db, role)
    assert answer(runner, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    done = answer(runner, "release", "a", "--token", "1", "--reason", "SIGTERM")
    assert (done["outcome"], done["by"]) == ("done", f"runner:{role}")
    assert events(pg_server, db)[-1]["action"] == "release"
    assert answer(runner, "claim", "--holder", "r1")["decision"] == "run a 1 2"
    for args, recorded in ((("cancel", "b", "--reason", "x"), False), (("recover", "a", "--force", "--reason", "x"), True)):
        doc = answer(runner, *args, code=1)
        assert (doc["code"], doc["recorded"]) == ("not_operator", recorded), args
    assert answer(db, "recover", "a", "--force", "--reason", "r1 is gone")["outcome"] == "done"
    assert answer(runner, "renew", "a", "--token", "2", code=2)["code"] == "stale_fence"
    assert answer(db, "cancel", "b", "--reason", "not wanted")["outcome"] == "done"
    assert json.loads(run_cli(db, "verify", "--json").stdout)["sound"] is True


def test_whoami_names_each_role_as_the_storm_judges_it(pg_server, db, pg_role):
    """``whoami`` (issue 33, item 1) on a database storm: the operator, a
    declared source, a runner role (which may not settle), a reader role
    and a role never granted, each as every request of theirs is judged;
    nothing is recorded."""
    runner, reader, stranger = (pg_role(prefix=p) for p in ("runner", "reader", "stranger"))
    answer(db, "grant", "runner", runner)
    answer(db, "grant", "reader", reader)
    seen = len(events(pg_server, db))
    operator = answer(db, "whoami")
    assert operator["by"] == f"operator:{dbname(db).replace('storm_', 'op_')}"
    assert (operator["operator"], operator["settles"], operator["refused"]) == (True, True, None)
    cron = answer(db, "whoami", "--source", "cron")
    assert (cron["by"], cron["operator"], cron["settles"], cron["refused"]["code"]) == (
        "source:cron", False, True, "operator_only")
    as_runner = answer(pg_server.url_as(db, runner), "whoami")
    assert (as_runner["by"], as_runner["operator"], as_runner["settles"], as_runner["may"]) == (
        f"runner:{runner}", False, False, ["claim", "renew", "finish", "release", "recover"])
    assert as_runner["refused"]["code"] == "not_operator" and "is a runner of this storm" in as_runner["refused"]["message"]
    as_reader = answer(pg_server.url_as(db, reader), "whoami")
    assert (as_reader["by"], as_reader["settles"], as_reader["may"]) == (f"reader:{reader}", False, [])
    assert "is a reader of this storm" in as_reader["refused"]["message"]
    assert answer(pg_server.url_as(db, reader), "claim", code=1)["by"] == f"reader:{reader}"  # as the request path says
    as_stranger = answer(pg_server.url_as(db, stranger), "whoami")
    assert (as_stranger["by"], as_stranger["may"], as_stranger["refused"]["code"]) == (
        f"account:{stranger}", [], "not_operator")
    words = run_cli(pg_server.url_as(db, runner), "whoami").stdout.splitlines()
    assert words[:2] == [f"runner:{runner}", "may: claim renew finish release recover"], words
    assert len(events(pg_server, db)) == seen  # whoami records nothing


def test_a_ttl_that_is_not_a_whole_number_is_a_type_error_never_the_servers(pg_server, db, pg_role):
    """The TTL of a claim, a renew and a finish --then-claim's claim that
    is not an int (1.5, True) is the Python API's TypeError, for the
    operator and a runner alike, before anything reaches the server: the
    server's own parameter check is never what answers, nothing is
    recorded (tests/api/test_runner_api.py holds both stores to it)."""
    from storm_queue import Storm

    role = pg_role(prefix="runner")
    answer(db, "grant", "runner", role)
    for url in (db, pg_server.url_as(db, role)):
        storm = Storm.find(url)
        try:
            token = int(storm.claim(holder="r1").decision.split()[3])
            for ttl in (1.5, True):
                before = events(pg_server, db)
                for call in (lambda: storm.finish("a", token, "ok", then_claim=True, holder="r1", ttl=ttl),
                             lambda: storm.claim(holder="r1", ttl=ttl), lambda: storm.renew("a", token, ttl=ttl)):
                    with pytest.raises(TypeError, match="expected a TTL in whole seconds"):
                        call()
                assert events(pg_server, db) == before
            assert storm.release("a", token).outcome == "done"
        finally:
            storm.close()

"""A database storm is never reset, and no message advises it (issue 33,
item 5, the lead's choice): ``reset``, ``reset --keep-intact`` and their
``--dry-run`` answer exit 2, naming why, changing nothing; on a damaged
database log, the exit-3 messages, ``verify``, ``doctor`` (text and
``--json``) say what the operator does instead (``verify`` names the line;
the database's backup restores it), never ``reset``."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.postgresql

RESET_FORMS = [(), ("--keep-intact",), ("--dry-run",), ("--keep-intact", "--dry-run")]


def events(pg_server, url: str) -> list[bytes]:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(url)["dbname"]) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq").fetchall()]


def no_advice_to_reset(done) -> None:
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    assert "storm-queue reset" not in said and "reset --" not in said, said


@pytest.fixture
def db(pg_url: str) -> str:
    assert run_cli(None, "init", pg_url).returncode == 0
    for args in (("add", "a", "1"), ("add", "b", "2"), ("bump", "b", "--reason", "first"), ("bump", "a")):
        assert run_cli(pg_url, *args).returncode == 0, args
    return pg_url


def damage(pg_server, url: str, how: str) -> None:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(url)["dbname"]) as conn:
        if how == "state":
            conn.execute("UPDATE storm_queue.state SET body = 'not a state'")
        else:  # a line changed in place: the chain breaks at the line after it
            conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only")
            conn.execute("UPDATE storm_queue.event SET line = convert_to(replace(convert_from(line, 'UTF8'), "
                         "'\"reason\"', '\"note\":\"forged\",\"reason\"'), 'UTF8') WHERE seq = 4")
            conn.execute("UPDATE storm_queue.state SET body_seq = 0, body = (SELECT body FROM storm_queue.state)")


@pytest.mark.parametrize("how", ["state", "chain"])
def test_a_damaged_database_log_is_never_reset_and_nothing_advises_it(pg_server, db, how) -> None:
    damage(pg_server, db, how)
    before = events(pg_server, db)
    for form in RESET_FORMS:
        done = run_cli(db, "reset", *form, "--reason", "start again", "--json")
        doc = json.loads(done.stdout)
        assert done.returncode == 2, (form, doc)
        assert "never set aside or begun anew" in doc["message"] and "backup restores it" in doc["message"], doc
        assert events(pg_server, db) == before, form
        words = run_cli(db, "reset", *form, "--reason", "start again")
        assert words.returncode == 2 and "database's backup restores it" in words.stderr, words.stderr
    for ask in (("next",), ("list",), ("list", "--json"), ("why", "a"), ("verify",), ("verify", "--json"),
                ("doctor",), ("doctor", "--json"), ("bump", "a")):
        done = run_cli(db, *ask)
        no_advice_to_reset(done)
        assert done.returncode in (1, 2, 3), (ask, done.returncode, done.stdout, done.stderr)
    said = run_cli(db, "next")
    assert said.returncode == 3 and "the operator restores the database from its backup" in said.stdout + said.stderr
    if how == "chain":
        verify = run_cli(db, "verify")
        assert verify.returncode == 3 and "restores the database from its backup" in verify.stdout, verify.stdout
    assert events(pg_server, db) == before


def test_a_dry_run_on_a_sound_database_log_is_refused_as_reset_is(pg_server, db) -> None:
    before = events(pg_server, db)
    for form in (("--dry-run",), ("--keep-intact", "--dry-run")):
        doc = json.loads(run_cli(db, "reset", *form, "--reason", "x", "--json").stdout)
        assert (doc["code"], doc["recorded"], doc["dry_run"]) == ("log_readable", False, True)
    assert events(pg_server, db) == before

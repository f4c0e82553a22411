"""A long-lived ``Storm`` of a Python runner on a database storm (issue 32,
item 4): it keeps one connection from request to request (100 requests
of a runner's kinds, served and read: one connection made), and when the
server ended that connection while it was idle, the next request opens a
new one before it sends anything, and succeeds (``store.Database.conn``,
``connect.alive``)."""

from __future__ import annotations

import pytest

from storm_queue import Storm
from tests.conftest import clean_env
from tests.database.test_database_faults import backend_gone, dbname, events, ok

pytestmark = pytest.mark.postgresql

TOML = "[runner]\nttl = 600\nttl_min = 1\nslots = 1\n"


@pytest.fixture
def db(pg_url: str, tmp_path) -> str:
    from tests.stores import DatabaseStorm

    DatabaseStorm(pg_url, tmp_path / "lanes").make("".join(f"l{n} {n}\n" for n in range(1, 21)), toml=TOML,
                                                   unattended=True)
    return pg_url


def counted(monkeypatch) -> list[str]:
    """Every connection the store's driver opens from now on (its URL), listed."""
    from storm_queue.store.postgres import driver

    made: list[str] = []
    real = driver.connect

    def connect(url, *args, **kwargs):
        made.append(url)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(driver, "connect", connect)
    return made


def test_a_long_lived_storm_makes_one_connection_over_100_requests(db, monkeypatch):
    made = counted(monkeypatch)
    storm = Storm.find(db, env=clean_env())
    try:
        asked = 0
        for n in range(1, 21):  # 20 lanes x (claim, renew, tenure, finish, listing) = 100
            lane = storm.claim(holder="runner", ttl=60).check()
            assert lane.decision == f"run l{n} {n} 1", lane.decision
            storm.renew(lane.slug, lane.token, 60).check()
            assert storm.tenure(lane.slug, lane.token).ended is None
            storm.finish(lane.slug, lane.token, "ok").check()
            assert [row.slug for row in storm.listing().view.rows if row.state == "finished"] == [
                f"l{k}" for k in range(1, n + 1)]
            asked += 5
        assert asked == 100
        assert storm.claim(holder="runner").decision.startswith("wait")  # every lane finished, awaiting review
    finally:
        storm.close()
    assert made == [db], f"{len(made)} connections over 100 requests"
    assert sum(e["action"] == "finish" for e in events_of(db)) == 20


def events_of(url: str) -> list[dict]:
    from tests.stores import DatabaseStorm

    return DatabaseStorm(url).events()


@pytest.mark.parametrize("between", ["claim-renew", "renew-finish"])
def test_a_connection_the_server_ended_between_two_calls_is_made_again_and_the_second_succeeds(
        pg_server, db, monkeypatch, between):
    made = counted(monkeypatch)
    storm = Storm.find(db, env=clean_env())
    try:
        lane = storm.claim(holder="runner", ttl=60).check()
        if between == "renew-finish":
            storm.renew(lane.slug, lane.token).check()
        pid = storm.store.conn.info.backend_pid
        with pg_server.admin(dbname(db)) as watcher:
            assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
            backend_gone(watcher, pid)
        second = (storm.renew(lane.slug, lane.token) if between == "claim-renew"
                  else storm.finish(lane.slug, lane.token, "ok"))
        assert second.outcome == "done" and second.recorded, second.to_json()
        assert storm.store.conn.info.backend_pid != pid
    finally:
        storm.close()
    assert made.count(db) == 2  # the first, and the one made again (the other: the watcher's)
    mine = [e["action"] for e in events(pg_server, db) if e.get("slug") == "l1"]
    assert mine == (["claim", "renew"] if between == "claim-renew" else ["claim", "renew", "finish"])


def test_a_lease_block_spans_a_connection_the_server_ended(pg_server, db):
    """The block's own connection ends while it runs: its finish opens a new one."""
    storm = Storm.find(db, env=clean_env())
    try:
        with storm.lease(holder="runner", ttl=60) as lane:
            pid = storm.store.conn.info.backend_pid
            with pg_server.admin(dbname(db)) as watcher:
                assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
                backend_gone(watcher, pid)
        assert lane.finished is not None and lane.finished.outcome == "done"
    finally:
        storm.close()
    assert ok(db, "lease", "l1", "--token", "1")["ended"] == "finished"

"""A long-lived database storm object reads only the lane, settled and
result rows changed since its last read (storm_queue/store/postgres/rows.py). Whatever
changes them (another storm object's request, a hand edit, a delete, a
lane moved by hand), its snapshot stays the one a fresh object reads."""

from __future__ import annotations

import pytest

from storm_queue.service.storm import Storm
from storm_queue.store.postgres.store import Database
from tests.conftest import run_cli

pytestmark = pytest.mark.postgresql


@pytest.fixture
def db(pg_url: str) -> str:
    done = run_cli(None, "init", pg_url)
    assert done.returncode == 0, done.stderr
    return pg_url


def seen(storm: Storm) -> tuple:
    """What the snapshot of ``storm`` holds of the rows, read now."""
    store = storm.store
    with store.conn.transaction():
        log = store._load()
    snap = store.snapshot(log)
    led = snap.ledgers
    return ([(s, q.issue, q.deps) for s, q in snap.lanes.items()], sorted(led.integrated), sorted(led.abandoned),
            sorted(led.finished), store._rows.results)


def fresh(url: str) -> tuple:
    storm = Storm(store=Database(url))
    try:
        return seen(storm)
    finally:
        storm.close()


def test_a_long_lived_storm_reads_only_changed_rows_and_sees_every_change(db: str) -> None:
    long = Storm(store=Database(db))
    other = Storm(store=Database(db))
    try:
        for slug, issue in (("a", "1"), ("b", "2"), ("c", "3")):
            assert other.add(slug, issue).outcome == "done"
        assert seen(long) == fresh(db) and [s for s, _, _ in seen(long)[0]] == ["a", "b", "c"]
        first = long.store._rows.seen
        assert seen(long) == fresh(db) and long.store._rows.seen == first  # nothing changed: nothing read

        claim = other.claim(holder="h")
        assert claim.decision.startswith("run a 1 ")
        assert other.finish("a", claim.token, "ok").outcome == "done"
        assert seen(long) == fresh(db) and long.store._rows.results == {"a": claim.token}
        assert other.settle("a", "integrated").outcome == "done"
        assert other.add("d", "4", deps=("a",)).outcome == "done"
        assert seen(long) == fresh(db) and long.store._rows.seen > first

        with other.store.conn.transaction():  # hand edits: a lane moved to the front, a ledger changed, a result replaced
            other.store.conn.execute("UPDATE storm_queue.lane SET pos = -1 WHERE slug = 'c'")
            other.store.conn.execute("UPDATE storm_queue.settled SET ledger = 'abandoned' WHERE slug = 'a'")
            other.store.conn.execute("UPDATE storm_queue.result SET body = '{\"token\": 7}' WHERE slug = 'a'")
        assert seen(long) == fresh(db)
        assert [s for s, _, _ in seen(long)[0]] == ["c", "a", "b", "d"] and seen(long)[2] == ["a"]
        assert long.store._rows.results == {"a": 7}

        gone = long.store._rows.gone
        with other.store.conn.transaction():  # a row deleted, a slug renamed: every row is read again
            other.store.conn.execute("DELETE FROM storm_queue.result WHERE slug = 'a'")
        assert seen(long) == fresh(db) and long.store._rows.gone == gone + 1 and long.store._rows.results == {}
        with other.store.conn.transaction():
            other.store.conn.execute("UPDATE storm_queue.lane SET slug = 'e' WHERE slug = 'b'")
        assert seen(long) == fresh(db) and "b" not in dict((s, i) for s, i, _ in seen(long)[0])
        with other.store.conn.transaction():
            other.store.conn.execute("TRUNCATE storm_queue.settled")
        assert seen(long) == fresh(db) and seen(long)[1:3] == ([], [])
        assert long.claim(holder="h2").decision.startswith("run c 3 ")  # requests decide on the same rows
    finally:
        long.store.close()
        other.store.close()

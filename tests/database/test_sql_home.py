"""The server's code in one home (issue 31, item 1): sql/schema.sql makes a
new storm as it is now (no migration replayed), sql/functions/ holds each
server function once, and an upgrade (tables and data by the migrations,
the functions applied again, the ones the tree no longer defines dropped)
carries a storm any earlier storm-queue made to the same catalog: the
release before the schema recorded a version (5cbddde: version 0) and the
last commit before the squash (c073d25: version 9), each from ``git
archive`` in a venv of its own, as test_upgrade.py does."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import run_cli
from tests.database.test_upgrade import new, old, release_python, version_table

pytestmark = pytest.mark.postgresql

#: the storm-queue whose schema 0009.sql's squash carried (version 9: functions in migrations 0005 to 0009)
BEFORE_SQUASH = "c073d25"
#: the release before the schema recorded its version (version 0)
FIRST = "5cbddde"


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, str]:
    """A python running each earlier storm-queue, by commit."""
    return {commit: release_python(commit, tmp_path_factory.mktemp(f"release-{commit}"))
            for commit in (FIRST, BEFORE_SQUASH)}


def dumped(pg_server, url: str) -> list[str]:
    """``pg_dump --schema-only`` of the storm's schema, grants, owners,
    comments and triggers included; the database's name and pg_dump's
    ``\\restrict`` nonce aside."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    info = conninfo_to_dict(url)
    done = subprocess.run([str(pg_server.bindir / "pg_dump"), "--schema-only", pg_server.admin_url(info["dbname"])],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    owner = info["user"]
    return [line.replace(owner, "OPERATOR") for line in done.stdout.splitlines()
            if not line.startswith(("\\restrict", "\\unrestrict"))]


def granted(python: str | None, url: str, runner: str, reader: str) -> None:
    """The same runner and reader roles granted on the storm, by the storm-queue at ``python`` (None: this one)."""
    for kind, role in (("runner", runner), ("reader", reader)):
        if python is None:
            assert json.loads(new(url, "grant", kind, role, "--json").stdout)["outcome"] == "done"
        else:
            old(python, "grant", kind, role, "--root", url)


def worked(python: str | None, url: str) -> None:
    """Lanes, a bump, a lease and a finish, by the storm-queue at ``python`` (None: this one)."""
    for args in (("add", "a", "1"), ("add", "b", "2", "--deps", "a"), ("add", "c", "3"), ("bump", "c"),
                 ("claim", "--holder", "h1", "--ttl", "3600"), ("finish", "c", "--token", "1", "--result", "ok"),
                 ("claim", "--holder", "h1", "--ttl", "3600")):
        if python is None:
            new(url, *args)
        else:
            old(python, *args, "--root", url)


def test_a_new_storm_and_storms_upgraded_from_version_0_and_9_have_one_catalog(
        pg_server, pg_database, pg_role, releases) -> None:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    from storm_queue.store.postgres.queries import schema_version

    runner, reader = pg_role(prefix="runner"), pg_role(prefix="reader")
    fresh, first, squashed = pg_database(), pg_database(), pg_database()
    new(None, "init", fresh)
    old(releases[FIRST], "init", first)
    old(releases[BEFORE_SQUASH], "init", squashed)
    assert version_table(pg_server, first) is None and version_table(pg_server, squashed) == 9
    worked(None, fresh)
    worked(releases[FIRST], first)
    worked(releases[BEFORE_SQUASH], squashed)
    granted(None, fresh, runner, reader)
    granted(releases[BEFORE_SQUASH], squashed, runner, reader)  # (version 0 had no roles: granted once upgraded)
    before = {url: json.loads(new(url, "list", "--json").stdout)["rows"] for url in (first, squashed)}
    for url, was in ((first, 0), (squashed, 9)):
        done = json.loads(new(None, "upgrade", url, "--json").stdout)
        assert (done["outcome"], done["recorded"]) == ("done", True), done
        assert version_table(pg_server, url) == schema_version() > 9
        assert f"upgrade: the schema from version {was} to {schema_version()}" in new(url, "log").stdout
        assert json.loads(new(url, "list", "--json").stdout)["rows"] == before[url]  # served as it was
        assert json.loads(new(url, "verify", "--json").stdout)["sound"] is True
    granted(None, first, runner, reader)
    assert dumped(pg_server, first) == dumped(pg_server, fresh)
    assert dumped(pg_server, squashed) == dumped(pg_server, fresh)
    # the functions the tree defines, and no other; none PUBLIC's; every one with a fixed search_path
    with pg_server.admin(conninfo_to_dict(squashed)["dbname"]) as conn:
        rows = conn.execute("SELECT p.proname, p.proconfig, p.proacl::text[] FROM pg_proc p "
                            "WHERE p.pronamespace = 'storm_queue'::regnamespace ORDER BY 1").fetchall()
    from storm_queue.store.postgres.queries import function_names

    assert [r[0] for r in rows] == function_names()
    assert all(r[1] is not None and r[1][0] == "search_path=pg_catalog, pg_temp" for r in rows), [
        r[0] for r in rows if r[1] is None]
    assert not [r[0] for r in rows if any(a.startswith("=") for a in r[2] or ["=X/PUBLIC"])]
    # each storm serves its runner after the upgrade, alike (c finished: the operator reviews it first)
    for url in (fresh, first, squashed):
        as_runner = run_cli(pg_server.url_as(url, runner), "claim", "--holder", "r1", "--json")
        assert as_runner.returncode == 0 and json.loads(as_runner.stdout)["decision"] == "review c", as_runner.stdout


def test_upgrade_drops_a_function_the_tree_no_longer_defines_and_applies_the_trees_again(pg_server, pg_url) -> None:
    """Functions are code: whatever a storm's functions became (one the tree
    no longer defines, one edited by hand), an upgrade leaves it the tree's.
    A storm at a version no release made (1 to 8) is refused, unchanged."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    from storm_queue.store.postgres.queries import schema_version

    new(None, "init", pg_url)
    new(pg_url, "add", "a", "1")
    name = conninfo_to_dict(pg_url)["dbname"]
    with pg_server.admin(name) as conn:
        conn.execute("CREATE FUNCTION storm_queue.gone_now() RETURNS integer LANGUAGE sql RETURN 1")
        conn.execute("CREATE OR REPLACE FUNCTION storm_queue.stamp(p_t double precision) RETURNS text LANGUAGE sql "
                     "STABLE RETURN 'edited'")
        conn.execute("UPDATE storm_queue.version SET version = 9")
    assert json.loads(new(None, "upgrade", pg_url, "--json").stdout)["outcome"] == "done"
    with pg_server.admin(name) as conn:
        assert conn.execute("SELECT to_regproc('storm_queue.gone_now')").fetchone()[0] is None
        assert conn.execute("SELECT storm_queue.stamp(0)").fetchone()[0] == "1970-01-01T00:00:00.000000Z"
        conn.execute("UPDATE storm_queue.version SET version = 5")
    refused = new(None, "upgrade", pg_url, code=2)
    assert "schema version 5" in refused.stderr and "development build" in refused.stderr, refused.stderr
    assert version_table(pg_server, pg_url) == 5 != schema_version()

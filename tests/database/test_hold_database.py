"""Issue 33 item 3, the database half: a hold survives everything a halt
survives on a database storm too. A ``migrate`` carries a directory
storm's hold (the lane stays held there, and the server's claim passes it
over); an ``upgrade`` (from the previous schema version, and at the current
one, which re-derives the server's tables from the log) keeps it; the
server's tables hold the hold as the Python fold of the log does (verify).
The command-line behaviour on both stores is tests/cli/test_hold.py; the
served claim against the core's, with holds drawn, tests/database/test_served.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_storm, run_cli

pytestmark = pytest.mark.postgresql


def ok(url, *args: str) -> dict:
    done = run_cli(url, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def states(url) -> dict[str, str]:
    return {row["slug"]: row["state"] for row in ok(url, "list")["rows"]}


def held_row(pg_server, url: str, slug: str) -> tuple:
    """The hold the server folded for ``slug``: (seq, by, reason), or Nones."""
    from psycopg.conninfo import conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(url)["dbname"]) as conn:
        row = conn.execute("SELECT held_seq, held_by, held_reason FROM storm_queue.run WHERE slug = %s", (slug,)).fetchone()
    return tuple(row) if row else (None, None, None)


def test_migrate_carries_a_hold_and_the_servers_claim_passes_the_held_lane_over(pg_server, pg_url, tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nc 3\n", toml="[runner]\nslots = 2\n")
    held = ok(root, "hold", "a", "--reason", "flaky host")
    assert held["outcome"] == "done"
    assert ok(root, "bump", "a")["outcome"] == "done"  # in the priority lane, held
    assert run_cli(None, "migrate", str(root), pg_url).returncode == 0
    assert states(pg_url) == {"a": "held", "b": "waiting", "c": "ready"}
    seq, by, reason = held_row(pg_server, pg_url, "a")
    assert (by, reason) == (held["by"], "flaky host") and seq is not None
    assert ok(pg_url, "verify")["sound"] is True  # the server's runs are the log's, the hold with them
    why = run_cli(pg_url, "why", "a")
    assert "held by" in why.stdout and "flaky host" in why.stdout, why.stdout
    assert run_cli(pg_url, "claim", "--holder", "r1").stdout == "run c 3 1\n"  # a passed over, b waits on it
    assert run_cli(pg_url, "claim", "--holder", "r1").stdout == "wait\n"
    assert ok(pg_url, "unhold", "a", "--reason", "host fixed")["outcome"] == "done"
    assert held_row(pg_server, pg_url, "a") == (None, None, None)
    assert run_cli(pg_url, "claim", "--holder", "r1").stdout == "run a 1 1\n"


def test_a_hold_survives_an_upgrade_from_the_previous_version_and_a_rederive(pg_server, pg_url) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from storm_queue.store.postgres.queries import schema_version

    assert run_cli(None, "init", pg_url).returncode == 0
    for args in (("add", "a", "1"), ("add", "b", "2"), ("hold", "a", "--reason", "not yet")):
        ok(pg_url, *args)
    before = held_row(pg_server, pg_url, "a")
    assert before[0] is not None
    name = conninfo_to_dict(pg_url)["dbname"]
    with pg_server.admin(name) as conn:  # the storm as the previous version left it: its tables re-derived below
        conn.execute("UPDATE storm_queue.version SET version = %s", (schema_version() - 1,))
    assert ok(None, "upgrade", pg_url)["outcome"] == "done"
    assert held_row(pg_server, pg_url, "a") == before and states(pg_url)["a"] == "held"
    with pg_server.admin(name) as conn:  # a hand edit withdraws the tables; an upgrade at this version re-derives them
        conn.execute("UPDATE storm_queue.run SET held_seq = NULL, held_by = NULL, held_reason = NULL WHERE slug = 'a'")
    withdrawn = run_cli(pg_url, "verify", "--json")
    assert withdrawn.returncode == 3 and json.loads(withdrawn.stdout)["sound"] is False, withdrawn.stdout
    assert ok(None, "upgrade", pg_url)["outcome"] == "done"
    assert held_row(pg_server, pg_url, "a") == before
    assert ok(pg_url, "verify")["sound"] is True
    assert run_cli(pg_url, "claim", "--holder", "r1").stdout == "run b 2 1\n"

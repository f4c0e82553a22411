"""One refusal vocabulary (issue 6 item 8): every refusal the tool can
produce has a stable snake_case code, listed in ``storm_queue.core.exit_codes``
(and from there in docs/exit-codes.md, see tests/unit/test_docs.py), and this file
makes the tool produce each one.

``SCENARIOS`` maps every code to a function that builds a storm and makes
the tool refuse with exactly that code: through the real command line with
``--json`` wherever the command line can produce it, as the real uid 65534
for ``not_operator`` (and for ``storm_unwritable``, in a storm that account
owns but cannot write), and through the Python API only for the two codes
the command line checks as a usage error (``invalid_token``,
``invalid_result``). A code with no scenario is unasserted; a scenario with
no code is a refusal outside the vocabulary: both fail.

Each scenario runs on a directory storm and on a database storm (a fresh
database; ``make`` returns its URL), so both stores give the same code and
exit code, but where the refusal is about what only one store has
(``DIRECTORY_ONLY``, ``DATABASE_ONLY``)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

import pytest

from storm_queue.core import exit_codes
from storm_queue.ops.grants import grant
from storm_queue.service.storm import Storm
from tests.cli.test_authority import NOBODY, chown_tree, json_of, run_forked, storm_dir  # noqa: F401 -- a fixture
from tests.conftest import clean_env, log_events, run_cli

#: a storm factory: ``make(queue, toml=None, abandoned=())`` returns a root another account can reach
Make = Callable[..., Path]
#: what a scenario returns: the process's exit code and its one JSON document
Answer = tuple[int, dict]

BOT = '[priority]\nsources = ["bot"]\n'


def cli(root: Path, *args: str, env: dict[str, str] | None = None) -> Answer:
    """Run the real CLI with --json; its exit code and its JSON document."""
    done = run_cli(root, *args, "--json", env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def ok(root: Path, *args: str) -> str:
    """A setup step that must be admitted; returns its stdout."""
    done = run_cli(root, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def api(out) -> Answer:
    """An answer of the Python API, as the command line would give it."""
    return out.exit_code, out.to_json()


def claimed(make: Make, toml: str | None = None) -> Path:
    """A storm whose lane ``a`` is leased under token 1."""
    root = make("a 1\nb 2\n", toml=toml)
    assert ok(root, "claim", "--holder", "r1").strip() == "run a 1 1"
    return root


# -- authority -----------------------------------------------------------------


def _lane_process(make: Make) -> Answer:
    return cli(make("a 1\n"), "bump", "a", env=clean_env(STORM_QUEUE_LANE="a"))


def _not_operator(make: Make) -> Answer:
    ran = run_forked(make("a 1\n"), "bump", "a", "--json")
    return ran.returncode, json_of(ran)


def _declaration_unreadable(make: Make) -> Answer:
    return cli(make("a 1\n", toml="[priority]\nsources = 3\n"), "bump", "a")


def _declaration_unreadable_runner(make: Make) -> Answer:
    return cli(make("a 1\n", toml="[runner]\nslots = 0\n"), "claim")


def _declaration_untrusted(make: Make) -> Answer:
    root = make("a 1\n", toml=BOT)
    os.chmod(root / "storm.toml", 0o664)
    return cli(root, "bump", "a", "--source", "bot")


def _undeclared_source(make: Make) -> Answer:
    return cli(make("a 1\n", toml=BOT), "bump", "a", "--source", "other")


def _operator_only(make: Make) -> Answer:
    return cli(make("a 1\n", toml=BOT), "unpark", "a", "--reason", "r", "--source", "bot")


# -- shape -----------------------------------------------------------------------


def _invalid_slug(make: Make) -> Answer:
    return cli(make("a 1\n"), "bump", "../x")


def _invalid_dependency(make: Make) -> Answer:
    return cli(make("a 1\n"), "push", "z", "5", "--deps", "a,x;y")


def _invalid_source(make: Make) -> Answer:
    return cli(make("a 1\n", toml=BOT), "bump", "a", "--source", "x;y")


def _invalid_holder(make: Make) -> Answer:
    return cli(make("a 1\n"), "claim", "--holder", "a b")


def _invalid_issue(make: Make) -> Answer:
    return cli(make("a 1\n"), "push", "z", "\u00b2")


def _invalid_key(make: Make) -> Answer:
    return cli(make("a 1\n"), "bump", "a", "--key", "two words")


def _invalid_time(make: Make) -> Answer:
    return cli(make("a 1\n"), "schedule", "a", "--not-before", "tomorrow")


def _api(root, call: Callable[[Storm], object]) -> Answer:
    """An answer of the Python API on the storm at ROOT (a directory or a URL)."""
    storm = Storm.find(str(root), env=clean_env())
    try:
        return api(call(storm))
    finally:
        getattr(storm, "close", lambda: None)()


def _invalid_token(make: Make) -> Answer:
    return _api(claimed(make), lambda storm: storm.finish("a", 0, "ok"))


def _invalid_result(make: Make) -> Answer:
    return _api(claimed(make), lambda storm: storm.finish("a", 1, "maybe"))


def _blank_reason(make: Make) -> Answer:
    return cli(make("a 1\n"), "unpark", "a", "--reason", "  ")


def _lease_ttl_out_of_range(make: Make) -> Answer:
    return cli(make("a 1\n"), "claim", "--ttl", "5")  # [runner] ttl_min is 60 by default


def _lease_age_exceeded(make: Make) -> Answer:
    # the TTL is in range and no longer than max_lease_age, but renewed now it
    # would outlive max_lease_age from the claim, which was earlier
    root = claimed(make, toml="[runner]\nttl = 60\nmax_lease_age = 100\n")
    return cli(root, "renew", "a", "--token", "1", "--ttl", "100")


# -- lookups ---------------------------------------------------------------------


def _idempotency_conflict(make: Make) -> Answer:
    root = make("a 1\nb 2\n")
    ok(root, "bump", "a", "--key", "k")
    return cli(root, "bump", "b", "--key", "k")


def _unknown_slug(make: Make) -> Answer:
    return cli(make("a 1\n"), "bump", "nosuch")


def _dependency_abandoned(make: Make) -> Answer:
    return cli(make("a 1\nb 2\n", abandoned=["b"]), "push", "z", "5", "--deps", "a,b")


def _dependency_unknown(make: Make) -> Answer:
    return cli(make("a 1\n"), "push", "z", "5", "--deps", "a,nosuch")


def _batch(make: Make, queue: str, lines: str) -> Answer:
    """``add --from FILE`` of ``lines`` on a storm of ``queue`` (FILE in a directory of its own)."""
    import tempfile

    root = make(queue)
    path = Path(tempfile.mkdtemp()) / "lanes.txt"
    path.write_text(lines)
    return cli(root, "add", "--from", str(path))


def _duplicate_slug(make: Make) -> Answer:
    return _batch(make, "a 1\n", "z 5\na 1\n")


def _empty_batch(make: Make) -> Answer:
    return _batch(make, "a 1\n", "# nothing yet\n\n")


def _review(root: Path, lines: str) -> Answer:
    """``settle --from FILE integrated`` of ``lines`` (FILE in a directory of its own)."""
    import tempfile

    path = Path(tempfile.mkdtemp()) / "reviewed.txt"
    path.write_text(lines)
    return cli(root, "settle", "--from", str(path), "integrated")


def _not_finished(make: Make) -> Answer:
    return _review(make("a 1\nb 2\n"), "a\n")


def _lane_settled(make: Make) -> Answer:
    root = make("a 1\nb 2\n")
    ok(root, "settle", "b", "integrated")
    return _review(root, "b\n")


def _dependency_cycle(make: Make) -> Answer:
    return cli(make("a 1 z\n"), "push", "z", "5", "--deps", "a")


def _needed_by_named(make: Make) -> Answer:
    root = make("a 1\nb 2 a\n")
    ok(root, "bump", "a")
    ok(root, "bump", "b")
    return cli(root, "unbump", "a")


def _not_prioritised(make: Make) -> Answer:
    return cli(make("a 1\n"), "unbump", "a")


def _issue_mismatch(make: Make) -> Answer:
    return cli(make("a 1\n"), "push", "a", "9")


def _deps_mismatch(make: Make) -> Answer:
    return cli(make("a 1\nb 2\n"), "push", "a", "1", "--deps", "b")


def _log_readable(make: Make) -> Answer:
    root = make("a 1\n")
    ok(root, "bump", "a")
    return cli(root, "reset", "--reason", "r")


def _stale_fence(make: Make) -> Answer:
    return cli(claimed(make), "renew", "a", "--token", "2")


def _lane_cancelled(make: Make) -> Answer:
    root = claimed(make)
    ok(root, "cancel", "a", "--reason", "not wanted")
    return cli(root, "finish", "a", "--token", "1", "--result", "ok")


def _lease_live(make: Make) -> Answer:
    return cli(claimed(make), "recover", "a")


def _marker_running(make: Make) -> Answer:
    root = make("a 1\n")
    marker = Path(root) / "lanes" / "a" / ".qwenstorm" / "running"  # as a runner that takes no leases writes it
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    return cli(root, "recover", "a", "--reason", "is that runner gone?")


def _not_running(make: Make) -> Answer:
    return cli(make("a 1\n"), "recover", "a")


def _lane_running(make: Make) -> Answer:
    root = claimed(make)
    return cli(root, "settle", "a", "integrated")


def _invalid_ledger(make: Make) -> Answer:
    return _api(make("a 1\n"), lambda storm: storm.settle("a", "merged"))


def _reason_too_long(make: Make) -> Answer:
    return cli(make("a 1\n"), "bump", "a", "--reason", "x" * 5000)


def _note_too_long(make: Make) -> Answer:
    return cli(claimed(make), "finish", "a", "--token", "1", "--result", "ok", "--note", "n" * 5000)


def _not_carried(make: Make, request) -> Answer:
    """A NUL, which no argument of a command line carries: the Python API."""
    return _api(make("a 1\n"), lambda storm: storm.bump("a", reason="line\x00feed"))


def _invalid_kind(make: Make) -> Answer:
    return _api(make("a 1\n"), lambda storm: grant(storm, "admin", "someone"))


def _unknown_role(make: Make, request=None) -> Answer:
    """A database storm only: a role is the server's."""
    return cli(make("a 1\n"), "grant", "runner", "no_such_role")


def _operator_role(make: Make, request=None) -> Answer:
    """A database storm only: the operator's own role (the tables are its own)."""
    from storm_queue.store.postgres.driver import conninfo

    url = make("a 1\n")
    return cli(url, "grant", "runner", conninfo(url)["user"])


def _not_holder(make: Make, request=None) -> Answer:
    """A database storm only: two runner roles; one presents the live token of the other's lease (a token is
    no proof of who holds it: anyone who reads the log knows it)."""
    pg_server, pg_role = request.getfixturevalue("pg_server"), request.getfixturevalue("pg_role")
    url = make("a 1\nb 2\n")
    first, second = pg_role(prefix="runner"), pg_role(prefix="runner")
    for role in (first, second):
        assert run_cli(url, "grant", "runner", role).returncode == 0
    assert ok(pg_server.url_as(url, first), "claim", "--holder", "r1").strip() == "run a 1 1"
    return cli(pg_server.url_as(url, second), "finish", "a", "--token", "1", "--result", "ok")


def _reorder_conflict(make: Make, request=None) -> Answer:
    """A database storm only: the request waits on a row another session
    locked, which then waits on the storm's lock: a deadlock the
    server breaks by aborting the request. A real process: it waits on the
    row while this test's sessions watch it and take the locks."""
    import subprocess
    import sys
    import time

    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    pg_server, url = request.getfixturevalue("pg_server"), request.getfixturevalue("pg_url")
    assert run_cli(None, "init", url).returncode == 0
    assert run_cli(url, "add", "a", "1").returncode == 0
    admin = pg_server.admin(conninfo_to_dict(url)["dbname"])
    watch = pg_server.admin()  # outside admin's transaction, whose view of pg_stat_activity is frozen
    try:
        admin.execute("BEGIN")
        admin.execute("SET LOCAL deadlock_timeout = '60s'")  # the request's detector runs first
        admin.execute("SELECT * FROM storm_queue.state FOR UPDATE")
        proc = subprocess.Popen([sys.executable, "-m", "storm_queue", "bump", "a", "--json", "--root", url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
        deadline = time.monotonic() + 30
        while not watch.execute("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                "AND query LIKE 'INSERT INTO storm_queue.event%'").fetchone():  # its head's move
            assert time.monotonic() < deadline and proc.poll() is None, "the request never waited on the row"
            time.sleep(0.05)
        admin.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")  # returns once the server aborted the request
        admin.execute("ROLLBACK")
        out, err = proc.communicate(timeout=60)
    finally:
        admin.close()
        watch.close()
    return proc.returncode, json.loads(out)


def _not_a_dependency(make: Make) -> Answer:
    return cli(make("a 1\nb 2\n"), "waive", "b", "a", "--reason", "r")


def _operator_only_waive(make: Make) -> Answer:
    return cli(make("a 1\nb 2 a\n", toml=BOT), "waive", "b", "a", "--reason", "r", "--source", "bot")


def _not_quarantined(make: Make) -> Answer:
    return cli(make("a 1\n"), "unpark", "a", "--reason", "r")


# -- the disk ----------------------------------------------------------------------


def _storm_unwritable(make: Make) -> Answer:
    """nobody's own storm, its directory read-only: even its owner cannot write it."""
    root = make("a 1\nb 2\n")
    ok(root, "bump", "a")
    chown_tree(root, NOBODY)
    os.chmod(root, 0o555)
    ran = run_forked(root, "bump", "b", "--json")
    return ran.returncode, json_of(ran)


SCENARIOS: dict[str, Callable[[Make], Answer]] = {
    "lane_process": _lane_process,
    "not_operator": _not_operator,
    "declaration_unreadable": _declaration_unreadable,
    "declaration_untrusted": _declaration_untrusted,
    "undeclared_source": _undeclared_source,
    "operator_only": _operator_only,
    "invalid_slug": _invalid_slug,
    "invalid_dependency": _invalid_dependency,
    "invalid_source": _invalid_source,
    "invalid_holder": _invalid_holder,
    "invalid_issue": _invalid_issue,
    "invalid_key": _invalid_key,
    "invalid_time": _invalid_time,
    "invalid_token": _invalid_token,
    "invalid_result": _invalid_result,
    "blank_reason": _blank_reason,
    "lease_ttl_out_of_range": _lease_ttl_out_of_range,
    "lease_age_exceeded": _lease_age_exceeded,
    "idempotency_conflict": _idempotency_conflict,
    "unknown_slug": _unknown_slug,
    "dependency_abandoned": _dependency_abandoned,
    "dependency_unknown": _dependency_unknown,
    "duplicate_slug": _duplicate_slug,
    "empty_batch": _empty_batch,
    "not_finished": _not_finished,
    "lane_settled": _lane_settled,
    "dependency_cycle": _dependency_cycle,
    "needed_by_named": _needed_by_named,
    "not_prioritised": _not_prioritised,
    "issue_mismatch": _issue_mismatch,
    "deps_mismatch": _deps_mismatch,
    "log_readable": _log_readable,
    "stale_fence": _stale_fence,
    "lane_cancelled": _lane_cancelled,
    "lease_live": _lease_live,
    "not_running": _not_running,
    "marker_running": _marker_running,
    "not_quarantined": _not_quarantined,
    "not_a_dependency": _not_a_dependency,
    "storm_unwritable": _storm_unwritable,
    "lane_running": _lane_running,
    "invalid_ledger": _invalid_ledger,
    "reorder_conflict": _reorder_conflict,
    "invalid_kind": _invalid_kind,
    "reason_too_long": _reason_too_long,
    "note_too_long": _note_too_long,
    "not_holder": _not_holder,
    "not_carried": _not_carried,
    "unknown_role": _unknown_role,
    "operator_role": _operator_role,
}

#: more ways to the same code, each asserted the same way
ALSO = {"declaration_unreadable": [_declaration_unreadable_runner], "operator_only": [_operator_only_waive]}

#: the codes the command line cannot produce (it checks them as usage errors), so the API does
API_ONLY = {"invalid_token", "invalid_result", "invalid_ledger", "invalid_kind"}
#: the codes only a database storm gives; their scenarios take the test's ``request`` for the server fixtures
DATABASE_ONLY = {"reorder_conflict", "unknown_role", "operator_role", "not_carried", "not_holder"}
#: of those, the codes never recorded (no line can carry what they refuse)
NEVER_RECORDED = {"not_carried"}
#: the codes about what only a directory has, each with why
DIRECTORY_ONLY = {
    "not_operator": "a stranger is an account here; on a database another role, whose refusal cannot be "
                    "recorded (tests/database/test_database_storm.py)",
    "declaration_untrusted": "storm.toml's file mode; a database's declaration is a row only the operator writes",
    "storm_unwritable": "a directory's permissions; on a database only the operator's role may write at all",
    "marker_running": "a running marker is a file; a database storm holds leases only",
}


def _events(root) -> list[dict]:
    if isinstance(root, Path):
        return log_events(root)
    from tests.stores import DatabaseStorm

    return DatabaseStorm(root).events()


def _assert_refused(root_of: Callable[[], list], code: str, answer: Answer) -> None:
    exit_code, doc = answer
    assert (doc["outcome"], doc["code"]) == ("refused", code), doc
    assert exit_code == exit_codes.CODES[code][0], (exit_code, doc)
    assert doc["message"], doc
    if doc["recorded"]:  # a recorded refusal is the log's last line, with its code
        last = _events(root_of()[-1])[-1]
        assert (last["action"], last["code"]) == ("refused", code), last


def _params():
    for code in exit_codes.CODES:
        if code not in DATABASE_ONLY:
            yield pytest.param(code, "directory", id=f"directory-{code}")
        if code not in DIRECTORY_ONLY:
            yield pytest.param(code, "database", id=f"database-{code}", marks=pytest.mark.postgresql)


@pytest.mark.parametrize("code, kind", list(_params()))
def test_the_tool_produces_each_refusal_code(storm_dir, code: str, kind: str, request) -> None:
    """A real process where a case needs one: a stranger (a forked child as
    uid 65534), a request waiting on a locked row (``_reorder_conflict``)."""
    made: list = []

    def make(queue: str, toml: str | None = None, abandoned=()):
        if kind == "directory":
            made.append(storm_dir(queue, toml, abandoned))
        else:
            from tests.stores import DatabaseStorm

            store = DatabaseStorm(request.getfixturevalue("pg_database")())
            store.make(queue, abandoned=abandoned, toml=toml)
            made.append(store.root)
        return made[-1]

    assert code in SCENARIOS, f"no scenario produces {code}: it is unasserted"
    if code in DATABASE_ONLY:
        exit_code, doc = SCENARIOS[code](make, request)
        assert (doc["outcome"], doc["code"], doc["recorded"]) == ("refused", code, code not in NEVER_RECORDED), doc
        assert exit_code == exit_codes.CODES[code][0], (exit_code, doc)
        return
    for scenario in [SCENARIOS[code], *ALSO.get(code, [])]:
        _assert_refused(lambda: made, code, scenario(make))


def test_every_code_has_a_scenario_and_every_scenario_a_code() -> None:
    assert set(SCENARIOS) == set(exit_codes.CODES), set(SCENARIOS) ^ set(exit_codes.CODES)
    assert set(ALSO) <= set(SCENARIOS) and API_ONLY <= set(SCENARIOS)


def test_every_code_is_snake_case_with_an_exit_code_and_a_meaning() -> None:
    for code, (exit_code, meaning) in exit_codes.CODES.items():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", code), code
        assert exit_code in ((5,) if code == "reorder_conflict" else (1, 2)), code
        assert meaning.strip(), code
    assert exit_codes.AUTHORITY == {code for code, (e, _) in exit_codes.CODES.items() if e == 1}


@pytest.mark.parametrize("args", [["finish", "a", "--token", "0", "--result", "ok"],
                                  ["finish", "a", "--token", "1", "--result", "maybe"],
                                  ["renew", "a", "--token", "x"]])
def test_the_api_only_codes_are_usage_errors_on_the_command_line(storm_dir, args) -> None:
    """Why ``invalid_token`` and ``invalid_result`` come from the API: the
    command line refuses them as usage errors, exit 2, recording nothing."""
    root = claimed(lambda queue, toml=None: storm_dir(queue, toml))
    before = (root / "priority.log").read_bytes()
    done = run_cli(root, *args)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "--token" in done.stderr or "--result" in done.stderr, done.stderr
    assert (root / "priority.log").read_bytes() == before

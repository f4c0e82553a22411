"""``storm-queue whoami`` (issue 33, item 1): who the storm takes the
caller for, and what it may request, from the store's own judgement (the
judge every request passes), reading only. The database's roles are in
tests/database/test_runner_role.py; here the directory's accounts (the
owner, a declared source, a lane's process, another account: uid 65534 in
a forked child) and what both stores answer alike."""

from __future__ import annotations

import json

from storm_queue.core.authority import OPERATOR_ONLY, REQUESTS
from tests.cli.test_authority import json_of, run_forked, storm_dir  # noqa: F401 -- storm_dir: a fixture
from tests.conftest import clean_env, run_cli

TOML = '[priority]\nsources = ["cron"]\n'


def whoami(root, *args: str, env: dict[str, str] | None = None, code: int = 0) -> dict:
    done = run_cli(root, "whoami", *args, "--json", env=env)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_the_operator_a_declared_source_and_an_undeclared_one_on_either_store(store) -> None:
    store.make("a 1\n", toml=TOML)
    before = store.lines()
    me = whoami(store.root)
    assert me["by"].startswith("operator:") and (me["operator"], me["settles"], me["refused"]) == (True, True, None)
    assert me["may"] == list(REQUESTS)
    plain = run_cli(store.root, "whoami")
    assert plain.returncode == 0 and plain.stdout.splitlines() == [me["by"], "may: " + " ".join(REQUESTS)]

    cron = whoami(store.root, "--source", "cron")
    assert (cron["by"], cron["operator"], cron["settles"]) == ("source:cron", False, True)
    assert cron["may"] == [verb for verb in REQUESTS if verb not in OPERATOR_ONLY]
    assert cron["refused"]["code"] == "operator_only"

    other = whoami(store.root, "--source", "nightly")
    assert (other["by"], other["may"], other["settles"], other["refused"]["code"]) == (
        "source:nightly", [], False, "undeclared_source")
    words = run_cli(store.root, "whoami", "--source", "nightly").stdout.splitlines()
    assert words[:2] == ["source:nightly", "may: nothing"] and words[2].startswith("nothing (undeclared_source): ")
    assert store.lines() == before  # whoami records nothing
    # the request path agrees: the source is refused what whoami says it may not ask
    refused = json.loads(run_cli(store.root, "unpark", "a", "--reason", "x", "--source", "cron", "--json").stdout)
    assert refused["code"] == "operator_only"


def test_a_lane_process_is_named_by_its_lane_and_may_request_nothing(store) -> None:
    store.make("a 1\n")
    lane = whoami(store.root, env=clean_env(STORM_QUEUE_LANE='odd"lane'))
    assert (lane["by"], lane["may"], lane["settles"], lane["refused"]["code"]) == (
        'lane:"odd\\"lane"', [], False, "lane_process")


def test_a_source_that_is_not_a_name_is_exit_2(store) -> None:
    store.make("a 1\n")
    done = run_cli(store.root, "whoami", "--source", "a b")
    assert done.returncode == 2 and "not a name" in done.stderr and done.stdout == ""
    assert whoami(store.root, "--source", "../x", code=2)["exit"] == 2


def test_another_account_is_named_by_its_account_and_may_request_nothing(storm_dir) -> None:  # noqa: F811
    """A real second uid: 65534, a forked child (tests/cli/test_authority.py)."""
    root = storm_dir("a 1\n", toml=TOML)
    ran = run_forked(root, "whoami", "--json")
    assert ran.returncode == 0, ran.stderr
    doc = json_of(ran)
    assert (doc["operator"], doc["settles"], doc["may"], doc["refused"]["code"]) == (False, False, [], "not_operator")
    assert doc["by"].startswith("account:") and doc["by"] != "account:root", doc
    ran = run_forked(root, "whoami", "--source", "cron")  # a declared name is a label, not a credential
    assert ran.returncode == 0 and ran.stdout.splitlines()[1] == "may: nothing", ran.stdout
    assert not (root / "priority.log").exists()  # nothing recorded, nothing created


def test_an_unreadable_declaration_names_the_operator_who_may_request_nothing_until_it_is_fixed(store) -> None:
    store.make("a 1\n", toml="[runner]\nslots = 0\n")
    if store.kind == "database":  # declare refuses such a file: the row as a hand edit would leave it
        store._sql("UPDATE storm_queue.storm SET declaration = %s", [("[runner]\nslots = 0\n",)])
    me = whoami(store.root)
    assert me["by"].startswith("operator:") and me["may"] == [] and me["settles"] is False
    assert me["refused"]["code"] == "declaration_unreadable"

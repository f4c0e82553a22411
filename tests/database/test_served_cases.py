"""The worked examples of tests/data/cases.json through the served path
(issue 31, item 3): each case's storm is made in a database, its steps
asked as the operator asks them (through the command line, planned in
Python, as tests/cli/test_cases.py asks them), and then a runner role's
claim is decided by the server (storm_queue.serve_claim, reached through
the Database store as a runner reaches it). The decision the server makes
is the case's ``next``: a ``run`` leases that lane under the next token,
and every other decision leases nothing and writes no line.

A case's running lanes (a running marker on a directory) are leases here,
taken by the runner's own served claims before the steps; a hand edit of
queue.txt is a hand edit of the lane rows."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cases import CASES, play

pytestmark = pytest.mark.postgresql


def runner(pg_server, url: str, role: str):
    """A ``Storm`` of the storm at ``url`` as the runner ``role`` opens it,
    whose ``answers`` are what the server answered each request it served
    (None: not served)."""
    from storm_queue.service.storm import Storm

    storm = Storm.find(pg_server.url_as(url, role))
    serve, storm.answers = storm.store.serve, []

    def served(req, holder=None):
        storm.answers.append(serve(req, holder))
        return storm.answers[-1]

    storm.store.serve = served
    return storm


def claimed(storm, holder: str):
    """The runner's claim, and proof the server decided it (one answer, not None)."""
    asked = len(storm.answers)
    out = storm.claim(holder=holder).check()
    assert len(storm.answers) == asked + 1 and storm.answers[-1] is not None, "the claim was not served"
    return out


@pytest.mark.parametrize("case", [pytest.param(case, id=case["name"]) for case in CASES])
def test_the_server_decides_every_case_as_the_case_says(pg_server, pg_url, pg_role, tmp_path, case: dict) -> None:
    from tests.conftest import run_cli
    from tests.stores import DatabaseStorm

    storm = DatabaseStorm(pg_url, tmp_path / "lanes")
    role = pg_role(prefix="runner")
    # a policy the server serves runners by: slots to spare (the decision is the walk's, not a full slot's)
    toml = (case.get("toml") or "") + "\n[runner]\nslots = 8\n"
    storm.make(case["queue"], integrated=case.get("integrated", ()), abandoned=case.get("abandoned", ()),
               finished=case.get("finished", ()), toml=toml, unattended=case.get("unattended", False))
    assert run_cli(pg_url, "grant", "runner", role).returncode == 0
    lanes = runner(pg_server, pg_url, role)
    try:
        running = set(case.get("running", ()))
        for n in range(len(running)):  # the running lanes, leased by the server: the first ready in run order
            lease = claimed(lanes, f"host{n}")
            assert lease.slug in running, (lease.decision, running)
            running.discard(lease.slug)
        play(storm, case, "database", run=lambda slug: claimed(lanes, "host-run").slug == slug)
        before = storm.lines()
        decided = claimed(lanes, "host")
        after = storm.lines()
        if case["next"].startswith("run "):
            _, slug, issue = case["next"].split()
            assert (decided.slug, decided.decision) == (slug, f"run {slug} {issue} {decided.token}"), decided.to_json()
            line = json.loads(after[-1])
            assert (line["action"], line["slug"], line["token"], line["by"]) == ("claim", slug, decided.token,
                                                                                 f"runner:{role}")
            assert after[:len(before)] == before and len(after) == len(before) + 1
        else:
            assert (decided.slug, decided.decision) == (None, case["next"]), decided.to_json()
            assert after == before  # nothing leased, nothing written
    finally:
        lanes.close()
    from storm_queue.service.storm import Storm

    operator = Storm.find(pg_url)
    try:
        audit = operator.verify()
        assert audit.sound, audit.problem
    finally:
        operator.close()

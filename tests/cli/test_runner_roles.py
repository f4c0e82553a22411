"""``examples/runner.sh`` under a runner role (issue 33, item 1): a runner
does only a runner's work. On a database storm, each runner host logs in
as a runner role of its own (docs/many-hosts.md); such a runner may not
settle a lane (``storm-queue whoami`` says so), so it leaves each lane it
finished for the operator's review, and never asks for a ``settle`` or a
``schedule`` (a failed lane waits the storm's own backoff).

- Unattended (``[runner] unattended``): two runner hosts run every lane to
  finished, none twice, each exiting 0 once nothing more can run for it;
  ``--once`` exits 0 after its one lane.
- Attended: the runner says once which lanes await the review and waits
  for it (``claim --wait``, which waits a review out for a runner role),
  and goes on once the operator has settled them.

Real processes: the runner script, two at once, each as its own role."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.test_runner import finish, lines, root_word, runner_env, start_runner
from tests.cli.test_runner_waits import run_once, start_saying, until
from tests.conftest import run_cli

pytestmark = pytest.mark.postgresql

LANES = [f"l{n:02d}" for n in range(1, 11)]
#: what only the operator (or a declared source) may ask: a runner role's runner never does
NOT_A_RUNNERS = ("settle", "schedule", "bump", "unbump", "push", "add", "unpark", "cancel", "halt", "resume", "waive")


def granted_runner(pg_server, store, pg_role, prefix: str) -> tuple[str, str]:
    """A runner role the operator granted: its name and its URL."""
    role = pg_role(prefix=prefix)
    done = run_cli(store.root, "grant", "runner", role)
    assert done.returncode == 0, done.stderr
    return role, pg_server.url_as(store.root, role)


def by_runners(events: list[dict]) -> list[dict]:
    return [e for e in events if e["by"].startswith("runner:")]


def storm(pg_url: str, tmp_path: Path, queue: str, toml: str):
    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "operator-lanes")
    store.make(queue, toml=toml)
    return store


def test_two_runner_roles_run_every_lane_of_an_unattended_storm_once_and_exit_0(pg_server, pg_url, pg_role, tmp_path):
    """The pinned scenario: two runner hosts, as runner roles, each running
    examples/runner.sh at once over ten lanes of an unattended storm (one
    that fails once, retried by the storm's own backoff): every lane is
    finished exactly once, no lane is claimed twice while its lease lived,
    both exit 0, and neither asks for anything but a runner's requests."""
    queue = "".join(f"{slug} {n}\n" for n, slug in enumerate(LANES, 1))  # none waits on another: none needs a review
    store = storm(pg_url, tmp_path, queue, "[runner]\nslots = 2\nunattended = true\nretry_delay = 1\n")
    roles, urls = zip(*(granted_runner(pg_server, store, pg_role, f"host{n}") for n in (1, 2)))
    logs = [tmp_path / f"ran-{n}.txt" for n in (1, 2)]
    # each host keeps its lanes' work on its own disk; l03 fails its first attempt (on whichever host)
    flag = tmp_path / "l03-failed-once"
    work = f'sleep 0.1; if [ "$STORM_QUEUE_LANE" = l03 ] && [ ! -e {flag} ]; then touch {flag}; exit 3; fi'
    runners = [start_runner(url, runner_env(log, None, RUNNER_HOLDER=f"host{n}", RUNNER_LANES=str(tmp_path / f"host{n}"),
                                            LANE_COMMAND=work, RUNNER_WAIT="30"))
               for n, (url, log) in enumerate(zip(urls, logs), 1)]
    ended = [finish(proc, timeout=240) for proc in runners]
    for code, out, err in ended:
        assert code == 0, err
        assert out == ""
    events = store.events()
    runner_events = by_runners(events)
    assert {e["action"] for e in runner_events} <= {"claim", "renew", "finish", "release", "expire"}, \
        {e["action"] for e in runner_events}
    assert not [e for e in events if e["action"] in NOT_A_RUNNERS or e["action"] == "refused"], \
        [e for e in events if e["action"] in NOT_A_RUNNERS or e["action"] == "refused"]
    finishes = [(e["slug"], e["result"]) for e in events if e["action"] == "finish"]
    assert sorted(slug for slug, result in finishes if result == "ok") == LANES  # one finish ok a lane
    assert [slug for slug, result in finishes if result == "failed"] == ["l03"]
    failed = next(e for e in events if e["action"] == "finish" and e["result"] == "failed")
    assert failed["not_before"] > failed["at"]  # the storm's backoff, not a runner's schedule
    # no lane claimed while a lease of it lived: each claim of a lane after the finish of the one before
    claims = [e for e in events if e["action"] == "claim"]
    assert sorted(e["slug"] for e in claims) == sorted(LANES + ["l03"])
    for slug in LANES:
        mine = [e for e in events if e.get("slug") == slug and e["action"] in ("claim", "finish", "expire", "release")]
        assert [e["action"] for e in mine] == (["claim", "finish"] * (2 if slug == "l03" else 1)), mine
    ran = lines(logs[0]) + lines(logs[1])
    assert sorted(ran) == sorted(LANES + ["l03"]), (lines(logs[0]), lines(logs[1]))  # the work ran once a claim
    assert {e["holder"] for e in claims} == {"host1", "host2"} or len(set(ran)) == len(LANES)
    rows = json.loads(run_cli(store.root, "list", "--json").stdout)["rows"]
    assert {(r["slug"], r["state"]) for r in rows} == {(slug, "finished") for slug in LANES}  # awaiting review
    for n, (_, _, err) in enumerate(ended, 1):
        said_lines = err.splitlines()
        word = root_word(urls[n - 1])
        assert said_lines[0] == (f"runner host{n}: runs as runner:{roles[n - 1]}, which may not settle a lane: the "
                                 "lanes it finishes await the operator's review (storm-queue settle SLUG integrated "
                                 f"--root {word}, or abandoned)"), said_lines[0]
        assert said_lines[-1].startswith(f"runner host{n}: nothing more can run: every lane left (") and \
            said_lines[-1].endswith(f") awaits the operator's review (storm-queue settle SLUG integrated --root {word}, "
                                    "or abandoned)"), said_lines[-1]
        assert err.count("the storm is unattended: this runner goes on") <= 1  # said once at most
    assert any("the storm is unattended: this runner goes on" in err for _, _, err in ended)
    assert any("l03 failed (exit 3, token 1); attempt 1 of 3, it will be claimed again after " in err
               for _, _, err in ended)

    # --once: one lane, exit 0
    assert run_cli(store.root, "add", "l11", "11").returncode == 0
    once = run_once(urls[0], runner_env(tmp_path / "ran-once.txt", None, RUNNER_HOLDER="cron",
                                        RUNNER_LANES=str(tmp_path / "host1"), LANE_COMMAND="true"))
    assert once.returncode == 0, once.stderr
    assert lines(tmp_path / "ran-once.txt") == ["l11"]
    assert "runner cron: l11 finished ok; it awaits the operator's review" in once.stderr
    last = store.events()[-1]
    assert (last["action"], last["slug"], last["result"]) == ("finish", "l11", "ok")
    again = run_once(urls[0], runner_env(tmp_path / "ran-once.txt", None, RUNNER_HOLDER="cron",
                                         RUNNER_LANES=str(tmp_path / "host1")))
    assert (again.returncode, lines(tmp_path / "ran-once.txt")) == (0, ["l11"])  # nothing more to run: exit 0
    assert json.loads(run_cli(store.root, "verify", "--json").stdout)["sound"] is True


def test_a_runner_role_waits_for_the_review_of_an_attended_storm_and_goes_on_once_the_operator_settles(
        pg_server, pg_url, pg_role, tmp_path):
    """Attended: after its first lane, ``claim`` answers ``review a``; the
    runner says so once, waits (its ``claim --wait`` waits the review out),
    and runs ``b`` once the operator settled ``a``; then ``empty`` once
    ``b`` is settled too. It never settles."""
    store = storm(pg_url, tmp_path, "a 1\nb 2\n", "[runner]\nslots = 1\n")
    role, url = granted_runner(pg_server, store, pg_role, "attended")
    log, said_to = tmp_path / "ran.txt", tmp_path / "said.txt"
    env = runner_env(log, None, RUNNER_HOLDER="r1", RUNNER_LANES=str(tmp_path / "r1"), RUNNER_WAIT="60")
    proc = start_saying(url, env, said_to)
    waits_a = "runner r1: the storm is attended: a await(s) the operator's review"
    until(lambda: waits_a in said_to.read_text(), proc)
    time.sleep(1.0)  # it waits in claim --wait: nothing more is said, nothing runs
    assert said_to.read_text().count(waits_a) == 1 and lines(log) == ["a"] and proc.poll() is None
    assert run_cli(store.root, "settle", "a", "integrated", "--reason", "reviewed").returncode == 0
    waits_b = "runner r1: the storm is attended: b await(s) the operator's review"
    until(lambda: waits_b in said_to.read_text(), proc)
    assert lines(log) == ["a", "b"]
    assert run_cli(store.root, "settle", "b", "abandoned", "--reason", "reviewed").returncode == 0
    code, _, _ = finish(proc, timeout=60)
    err = said_to.read_text()
    assert code == 0, err
    word = root_word(url)
    assert err.splitlines() == [
        f"runner r1: runs as runner:{role}, which may not settle a lane: the lanes it "
        f"finishes await the operator's review (storm-queue settle SLUG integrated --root {word}, or abandoned)",
        "runner r1: running a (issue 1, token 1)",
        f"runner r1: a finished ok; it awaits the operator's review (storm-queue settle a integrated --root {word}, or "
        "abandoned)",
        f"{waits_a} (storm-queue settle SLUG integrated --root {word}, or abandoned); waiting for the review "
        "(claim --wait 60); this is said once, until the lanes to review change",
        "runner r1: running b (issue 2, token 1)",
        f"runner r1: b finished ok; it awaits the operator's review (storm-queue settle b integrated --root {word}, or "
        "abandoned)",
        f"{waits_b} (storm-queue settle SLUG integrated --root {word}, or abandoned); waiting for the review "
        "(claim --wait 60); this is said once, until the lanes to review change",
        "runner r1: storm is empty",
    ], err
    events = store.events()
    assert not [e for e in by_runners(events) if e["action"] not in ("claim", "renew", "finish")]
    assert [(e["action"], e["by"].split(":")[0]) for e in events if e["action"] == "settle"] == [
        ("settle", "operator"), ("settle", "operator")]


def test_once_as_a_runner_role_on_an_attended_storm_says_the_review_waits_and_exits_0(pg_server, pg_url, pg_role,
                                                                                      tmp_path):
    store = storm(pg_url, tmp_path, "a 1\nb 2\n", "[runner]\nslots = 1\n")
    store.finish(["a"])  # a finished lane: claim answers review a
    _, url = granted_runner(pg_server, store, pg_role, "cron")
    before = store.events()
    once = run_once(url, runner_env(tmp_path / "ran.txt", None, RUNNER_HOLDER="cron", RUNNER_LANES=str(tmp_path)))
    assert once.returncode == 0, once.stderr
    assert once.stderr.splitlines()[-1] == (
        f"runner cron: the storm is attended: a await(s) the operator's review (storm-queue settle SLUG integrated "
        f"--root {root_word(url)}, or abandoned); exiting (--once)")
    assert store.events() == before  # it asked, and recorded nothing
    assert lines(tmp_path / "ran.txt") == []

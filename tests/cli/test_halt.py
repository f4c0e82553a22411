"""Issue 12 item 3: the operator's halt of the whole storm, and resume,
through the real command line, on a directory storm and a database storm
alike: while halted, claim leases nothing and answers ``halted`` (recording
nothing, like a poll), and claim and next print ``halted`` followed by who
halted the storm, when and why (issue 33, item 10: a runner that logs the
line it does not know says why nothing starts), list, why and doctor show who halted, when and why; leases already held
run on. Halting twice and resuming a storm that is not halted are recorded
no-ops; a source is refused ``operator_only``. Two runners claiming while
halted lease nothing, and run every lane once the storm resumes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


from tests.cli.test_runner import finish, lines, runner_env, start_runner
from tests.conftest import log_events, make_storm, run_cli, tree
from tests.stores import doc, under_test


def test_a_halt_stops_every_claim_until_resume_and_leases_held_run_on(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\nc 3\n")
    assert doc(s, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    halted = doc(s, "halt", "--reason", 'disk "full"')
    assert (halted["outcome"], halted["action"], halted["recorded"]) == ("done", "halt", True)
    line = s.events()[-1]
    assert (line["action"], line["reason"], line["by"]) == ("halt", 'disk "full"', halted["by"])
    recorded = len(s.events())

    # claim leases nothing and says who halted the storm, when and why; nothing is recorded
    claim = doc(s, "claim", "--holder", "r2")
    assert (claim["outcome"], claim["decision"], claim["halted"], claim["recorded"]) == ("done", "halted", True, False)
    assert claim["halt"] == {"by": line["by"], "at": line["at"], "reason": 'disk "full"', "seq": line["seq"]}
    assert "token" not in claim
    said = f'halted by {line["by"]} at {line["at"]}, reason "disk \\"full\\""\n'
    text = s.cli("claim", "--holder", "r2")
    assert (text.returncode, text.stdout) == (0, said), text.stderr
    assert f"halted by {line['by']} at {line['at']}" in text.stderr and 'reason "disk \\"full\\""' in text.stderr
    assert "storm-queue resume" in text.stderr
    nxt = s.cli("next")
    assert (nxt.returncode, nxt.stdout) == (0, said) and "storm-queue resume" in nxt.stderr
    assert (doc(s, "next")["decision"], doc(s, "next")["halt"]["reason"]) == ("halted", 'disk "full"')
    assert len(s.events()) == recorded

    # list and why show the halt
    listing = doc(s, "list")
    assert (listing["decision"], listing["halted"], listing["halt"]["by"]) == ("halted", True, line["by"])
    plain = s.cli("list", "--plain").stdout.splitlines()
    assert plain[1] == "next: halted" and plain[2].startswith(f"halted: the storm is halted by {line['by']} at {line['at']}")
    why = doc(s, "why", "b")
    assert (why["halted"], why["halt"]["reason"], why["decision"]) == (True, 'disk "full"', "halted")
    assert f"halted: the storm is halted by {line['by']}" in s.cli("why", "b").stdout

    # the lease already held runs on: it renews and finishes
    assert doc(s, "renew", "a", "--token", "1")["outcome"] == "done"
    assert doc(s, "finish", "a", "--token", "1", "--result", "ok")["outcome"] == "done"

    # halting again is a recorded no-op that keeps the first halt
    again = doc(s, "halt", "--reason", "still")
    assert (again["outcome"], again["recorded"]) == ("noop", True) and "already halted" in again["message"]
    assert s.events()[-1]["noop"] and doc(s, "list")["halt"]["reason"] == 'disk "full"'

    resumed = doc(s, "resume", "--reason", "disk cleaned")
    assert (resumed["outcome"], resumed["recorded"]) == ("done", True)
    assert doc(s, "list")["halted"] is False and doc(s, "list")["halt"] is None
    s.settle(["a"])
    claim = doc(s, "claim", "--holder", "r2")
    assert (claim["decision"], claim["halted"], claim["halt"]) == ("run b 2 1", False, None)
    nothing = doc(s, "resume", "--reason", "twice")
    assert (nothing["outcome"], nothing["recorded"]) == ("noop", True) and "not halted" in nothing["message"]
    assert [e["action"] for e in s.events() if e["action"] in ("halt", "resume")] == ["halt", "halt", "resume", "resume"]


def test_halt_and_resume_are_the_operators_alone_with_a_reason(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n", toml='[priority]\nsources = ["bot"]\n')
    for verb in ("halt", "resume"):
        refused = run_cli(root, verb, "--reason", "r", "--source", "bot", "--json")
        body = json.loads(refused.stdout)
        assert (refused.returncode, body["code"], body["recorded"]) == (1, "operator_only", True)
        blank = run_cli(root, verb, "--reason", "  ", "--json")
        assert (blank.returncode, json.loads(blank.stdout)["code"]) == (2, "blank_reason")
        missing = run_cli(root, verb)
        assert missing.returncode == 2 and "blank_reason" in missing.stderr
    assert [(e["requested"], e["code"]) for e in log_events(root)] == [
        ("halt", "operator_only"), ("halt", "blank_reason"), ("halt", "blank_reason"),
        ("resume", "operator_only"), ("resume", "blank_reason"), ("resume", "blank_reason")]
    assert run_cli(root, "claim", "--holder", "r").stdout == "run a 1 1\n"  # no refusal halted anything


def test_a_dry_run_halt_records_nothing_and_the_log_says_who_halted(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    before = tree(root)
    dry = json.loads(run_cli(root, "halt", "--reason", "x", "--dry-run", "--json").stdout)
    assert (dry["outcome"], dry["dry_run"], dry["recorded"]) == ("done", True, False)
    assert tree(root) == before
    assert run_cli(root, "halt", "--reason", "freeze\x1b[31m").returncode == 0
    shown = run_cli(root, "log").stdout.splitlines()[-1]
    assert " halt; reason " in shown and "\x1b" not in shown
    listed = run_cli(root, "list", "--plain").stdout
    assert "halted: the storm is halted by operator:" in listed and "\x1b" not in listed
    doctor = run_cli(root, "doctor", "--json")
    found = [f for f in json.loads(doctor.stdout)["findings"] if f["code"] == "halted"]
    assert len(found) == 1 and "storm-queue resume" in found[0]["fix"] and "\x1b" not in found[0]["message"]


def wrapper(tmp_path: Path) -> Path:
    """A storm-queue that also notes every claim's decision, one line per
    answer, in $ANSWERS (a runner's $STORM_QUEUE)."""
    path = tmp_path / "sq.sh"
    path.write_text(f'#!/usr/bin/env bash\nset -u\nout="$("{sys.executable}" -m storm_queue "$@")"; rc=$?\n'
                    'if [ "$1" = claim ]; then printf "%s\\n" "$out" >> "$ANSWERS"; fi\n'
                    'if [ -n "$out" ]; then printf "%s\\n" "$out"; fi\nexit $rc\n')
    path.chmod(0o755)
    return path


def test_two_runners_claiming_while_halted_lease_nothing_until_resume(tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nc 3\nd 4\n", toml="[runner]\nslots = 2\n")
    assert run_cli(root, "halt", "--reason", "maintenance").returncode == 0
    sq = wrapper(tmp_path)
    answers = [tmp_path / "answers-1", tmp_path / "answers-2"]
    runners = [start_runner(root, runner_env(tmp_path / f"ran-{i}", STORM_QUEUE=str(sq), ANSWERS=str(answers[i]),
                                             RUNNER_HOLDER=f"r{i}")) for i in range(2)]
    deadline = time.monotonic() + 60
    while not all(len(lines(a)) >= 1 for a in answers):  # each runner was answered halted, and waits (claim --wait)
        assert time.monotonic() < deadline and all(r.poll() is None for r in runners), [a.read_text() for a in answers if a.exists()]
        time.sleep(0.05)
    assert not [e for e in log_events(root) if e["action"] == "claim"]
    said = {line for a in answers for line in a.read_text().splitlines()}
    assert len(said) == 1 and said.pop().startswith("halted by operator:")  # the runner knows the verb
    assert not (root / "lanes").exists() or not list((root / "lanes").rglob("running"))
    assert run_cli(root, "resume", "--reason", "done").returncode == 0
    for runner in runners:
        code, _, err = finish(runner)
        assert code == 0, err
        assert err.count("the storm is halted by its operator") == 1, err  # said once, not at every poll
    assert sorted(lines(root / "integrated.txt")) == ["a", "b", "c", "d"]
    claims = [e for e in log_events(root) if e["action"] == "claim"]
    assert sorted(e["slug"] for e in claims) == ["a", "b", "c", "d"]  # each lane leased once, after the resume
    resumed = next(e["seq"] for e in log_events(root) if e["action"] == "resume")
    assert all(e["seq"] > resumed for e in claims)

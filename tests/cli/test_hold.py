"""Issue 33 item 3: holding one lane, through the real command line, on a
directory storm and a database storm alike. ``hold SLUG --reason TEXT``
(the operator's or a declared source's) keeps the lane in its place in run
order and in the priority lane, but ``next`` and ``claim`` never start it:
its state is ``held`` in ``list``, ``list --json``, ``why`` and ``watch``,
with who held it, when and why; the lanes that depend on it wait. A running
lane runs on (it renews and finishes; a failed attempt is not claimed
again while held). A bump of a held lane puts it in the priority lane,
held. Every request is recorded: refusals (a settled lane, an unknown one,
a blank reason, an undeclared source, a lane process) and no-ops (a hold
of a held lane, an unhold of a lane not held) too."""

from __future__ import annotations

import json


from tests.conftest import clean_env
from tests.stores import doc, under_test


def rows(storm) -> dict[str, dict]:
    return {r["slug"]: r for r in doc(storm, "list")["rows"]}


def test_a_held_lane_keeps_its_place_and_is_never_started_until_unheld(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2 a\nc 3\n")
    held = doc(s, "hold", "a", "--reason", 'vendor "fix"')
    assert (held["outcome"], held["action"], held["slug"], held["recorded"]) == ("done", "hold", "a", True)
    line = s.events()[-1]
    assert (line["action"], line["slug"], line["reason"], line["by"]) == ("hold", "a", 'vendor "fix"', held["by"])
    hold = {"by": line["by"], "at": line["at"], "reason": 'vendor "fix"', "seq": line["seq"]}

    # its place is kept; its state is held, with who, when and why; what depends on it waits
    listed = rows(s)
    assert [(r["slug"], r["position"], r["state"]) for r in doc(s, "list")["rows"]] == [
        ("a", 1, "held"), ("b", 2, "waiting"), ("c", 3, "ready")]
    assert listed["a"]["held"] == hold and listed["b"]["held"] is None and listed["b"]["waits_on"] == ["a"]
    assert "waits on a (held)" in listed["b"]["status"]
    plain = s.cli("list", "--plain").stdout.splitlines()
    assert plain[2].split()[:5] == ["1", "-", "a", "1", "held"]
    assert f"held by {line['by']} at {line['at']}, reason \"vendor \\\"fix\\\"\"" in plain[2]
    why = doc(s, "why", "a")
    assert (why["state"], why["held"], why["position"], why["next"]) == ("held", hold, 1, False)
    said = s.cli("why", "a").stdout
    assert f"held: by {line['by']} at {line['at']} (hold #{line['seq']})" in said and "storm-queue unhold a" in said
    assert doc(s, "why", "c")["ahead"] == ["b"]  # a held lane is not one still to start before it

    # next and claim pass it over
    assert s.cli("next").stdout == "run c 3\n"
    assert doc(s, "claim", "--holder", "r1")["decision"] == "run c 3 1"
    assert doc(s, "finish", "c", "--token", "1", "--result", "ok")["outcome"] == "done"
    s.settle(["c"])
    waiting = s.cli("claim", "--holder", "r1")  # only the held lane and its dependent are left
    assert (waiting.returncode, waiting.stdout) == (0, "wait\n")
    nxt = s.cli("next")  # says which lanes are held (a runner's stuck report names them, claim does not repeat it)
    assert nxt.stdout == "wait\n" and "held, so not started: a" in nxt.stderr and "storm-queue unhold" in nxt.stderr

    # a bump puts it in the priority lane, held
    bumped = doc(s, "bump", "a", "--reason", "first when free")
    assert bumped["outcome"] == "done" and "a" in bumped["moved"]
    listed = rows(s)
    assert (listed["a"]["prioritised"], listed["a"]["state"], listed["a"]["held"]) == (True, "held", hold)
    assert doc(s, "next")["decision"] == "wait"

    # holding it again is a recorded no-op keeping the first hold
    again = doc(s, "hold", "a", "--reason", "still")
    assert (again["outcome"], again["recorded"]) == ("noop", True) and "already held by" in again["message"]
    assert s.events()[-1]["noop"] and rows(s)["a"]["held"] == hold

    # unhold: it starts, first (it is in the priority lane)
    unheld = doc(s, "unhold", "a", "--reason", "fix released")
    assert (unheld["outcome"], unheld["recorded"]) == ("done", True)
    assert rows(s)["a"]["held"] is None and rows(s)["a"]["state"] == "ready"
    assert doc(s, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    nothing = doc(s, "unhold", "a", "--reason", "twice")
    assert (nothing["outcome"], nothing["recorded"]) == ("noop", True) and nothing["message"] == "nothing to do: a is not held"
    assert [e["action"] for e in s.events() if e["action"] in ("hold", "unhold")] == ["hold", "hold", "unhold", "unhold"]
    assert s.equals_its_derivation()


def test_a_held_running_lane_runs_on_and_is_not_started_again_while_held(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\n")
    assert doc(s, "claim", "--holder", "r1")["decision"] == "run a 1 1"
    held = doc(s, "hold", "a", "--reason", "look at it first")
    assert "it is running now and runs on" in held["message"] and "cancel stops it" in held["message"]
    assert rows(s)["a"]["state"] == "running" and rows(s)["a"]["held"]["reason"] == "look at it first"
    assert doc(s, "renew", "a", "--token", "1")["outcome"] == "done"
    assert doc(s, "finish", "a", "--token", "1", "--result", "failed")["outcome"] == "done"
    assert rows(s)["a"]["state"] == "held"  # its attempt failed: not claimed again while held
    assert doc(s, "claim", "--holder", "r1")["decision"] == "run b 2 1"
    assert doc(s, "finish", "b", "--token", "1", "--result", "ok")["outcome"] == "done"
    s.settle(["b"])
    assert doc(s, "unhold", "a", "--reason", "go")["outcome"] == "done"
    assert doc(s, "claim", "--holder", "r1")["decision"] == "run a 1 2"


def test_hold_and_unhold_refusals_are_recorded_and_a_declared_source_may_hold(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2\n", integrated=["gone"], toml='[priority]\nsources = ["bot"]\n')
    by_source = doc(s, "hold", "a", "--reason", "nightly freeze", "--source", "bot")
    assert (by_source["outcome"], by_source["by"]) == ("done", "source:bot")
    assert rows(s)["a"]["held"]["by"] == "source:bot"
    assert doc(s, "unhold", "a", "--reason", "morning", "--source", "bot")["outcome"] == "done"
    refusals = [
        (("hold", "gone", "--reason", "x"), 2, "lane_settled"),
        (("hold", "nope", "--reason", "x"), 2, "unknown_slug"),
        (("hold", "a", "--reason", "  "), 2, "blank_reason"),
        (("unhold", "a", "--reason", ""), 2, "blank_reason"),
        (("hold", "a", "--reason", "x", "--source", "stranger"), 1, "undeclared_source"),
        (("unhold", "a", "--reason", "x", "--source", "stranger"), 1, "undeclared_source"),
        (("hold", "../a", "--reason", "x"), 2, "invalid_slug"),
    ]
    for args, code, name in refusals:
        refused = doc(s, *args, code=code)
        assert (refused["outcome"], refused["code"], refused["recorded"]) == ("refused", name, True), args
        line = s.events()[-1]
        assert (line["action"], line["requested"], line["code"]) == ("refused", args[0], name)
    in_lane = s.cli("hold", "b", "--reason", "x", "--json", env=clean_env(STORM_QUEUE_LANE="a"))
    assert in_lane.returncode == 1 and json.loads(in_lane.stdout)["code"] == "lane_process"
    assert s.events()[-1]["code"] == "lane_process"
    missing = s.cli("hold", "b")  # no --reason at all
    assert missing.returncode == 2 and "blank_reason" in missing.stderr
    assert all(r["held"] is None for r in rows(s).values())  # no refusal held anything


def test_a_dry_run_hold_records_nothing(under_test) -> None:
    s = under_test
    s.make("a 1\n")
    before = s.lines()
    dry = doc(s, "hold", "a", "--reason", "x", "--dry-run")
    assert (dry["outcome"], dry["dry_run"], dry["recorded"]) == ("done", True, False)
    assert s.lines() == before and rows(s)["a"]["state"] == "ready"


def test_the_runner_runs_around_a_held_lane_and_names_the_unhold_that_frees_it(under_test, tmp_path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    from tests.cli.test_runner import lines, root_word, runner_env
    from tests.cli.test_runner_waits import STUCK, run_once

    s = under_test
    s.make("a 1\nb 2 a\nc 3\n")
    hold = doc(s, "hold", "a", "--reason", "vendor's fix")
    at = s.events()[-1]["at"]
    log = tmp_path / "ran.txt"
    first = run_once(s.root, runner_env(log, s))
    assert first.returncode == 0, first.stderr
    assert lines(log) == ["c"]  # the held lane is passed over, the next one runs
    stuck = run_once(s.root, runner_env(log, s))
    assert stuck.returncode == 0, stuck.stderr
    assert stuck.stderr.splitlines() == [
        STUCK,
        f"runner r1:   a: held by {hold['by']} at {at}, reason \"vendor's fix\": not started until storm-queue unhold a "
        f"--reason TEXT --root {root_word(s.root)}",
        "runner r1:   b: waits on a (held)",
        "runner r1: exiting (--once)",
    ]
    assert doc(s, "unhold", "a", "--reason", "fixed")["outcome"] == "done"
    assert run_once(s.root, runner_env(log, s)).returncode == 0
    assert lines(log) == ["c", "a"]


def test_the_web_view_watch_and_metrics_show_a_held_lane_and_who_held_it(under_test) -> None:
    from storm_queue.cli import frame
    from storm_queue.service.storm import Storm
    from storm_queue.web import pages

    s = under_test
    s.make("a 1\nb 2\n")
    doc(s, "hold", "a", "--reason", "<b>not</b> yet\x1b[31m")
    line = s.events()[-1]
    storm = Storm.find(s.root, env=clean_env())
    try:
        listing = storm.listing()
        html = pages.run_order(listing)
        framed = frame.plain_text(frame.build(listing, s.events(), line["at"]))
    finally:
        storm.close()
    assert '<tr class="held">' in html and f"held by {line['by']}" in html
    assert "&lt;b&gt;not&lt;/b&gt; yet" in html and "<b>not" not in html and "\x1b" not in html
    assert "held (1):" in framed and f"  a 1  held by {line['by']} at {line['at']}" in framed and "\x1b" not in framed
    assert "1 held" in framed  # counted in the summary line
    metrics = s.cli("metrics").stdout
    assert 'storm_queue_lanes{state="held"} 1' in metrics and 'storm_queue_lanes{state="ready"} 1' in metrics

"""Crash consistency (issue 5 item 1, issue 6 for runners): writers killed
with SIGKILL at random moments never lose an acknowledged request, never
record one twice, and never leave worse than a torn tail that the next
request repairs; runners killed while they claim, renew, finish or hold a
lane never get a token twice, never hold more leases than slots, never
finish a lease that was not theirs, and the leases they leave become
orphans that a later claim takes back and gives again under a greater
token. CI runs a few hundred trials; ``python bench/crash.py --trials
10000`` runs the long version."""

from __future__ import annotations

import json
import random

from tests.faults import crash_harness

TRIALS = 300


def test_writers_killed_at_random_lose_no_acknowledged_request(tmp_path):
    """Real processes: the harness kills writers with SIGKILL."""
    fig = crash_harness.run(TRIALS, seed=5, base=tmp_path)
    assert fig.failures == [], "\n".join(fig.failures[:10])
    assert (fig.lost, fig.duplicated) == (0, 0)
    assert fig.trials == TRIALS
    # the trials really killed writers, at every kind of moment that matters
    assert fig.kills > TRIALS // 2
    assert fig.torn_repaired > 0, "no trial left a torn tail: the kills missed the log write"
    assert fig.rewitnessed > 0, "no trial killed a writer between its line and its witness"
    assert fig.checkpointed > 0, "no trial's writers wrote a checkpoint"
    assert fig.acknowledged == fig.acknowledged_on_log > TRIALS
    # runners claimed, renewed and finished with their tokens, and were killed mid-lane
    assert fig.runner_trials > TRIALS // 4
    assert fig.claims_acknowledged == fig.claims_on_log > TRIALS // 4
    assert fig.finishes_acknowledged == fig.finishes_on_log > 0
    assert fig.renewals_acknowledged > 0
    assert fig.stale_refused > 0, "no runner's wrong token was refused"
    assert fig.killed_mid_lane > 0, "no runner was killed holding a lane"
    assert fig.quarantines > 0, "no lane spent its attempts"
    # the leases they left were taken back by a later claim and given again under a greater token
    assert fig.orphans_expired > 0
    assert fig.reclaimed > 0
    assert fig.unparked > 0, "no orphaned lane was quarantined, unparked and claimed again"
    # the operator halted storms: claims then leased nothing and said so, and no claim is on a log while halted
    assert fig.halts > 0 and fig.halted_claims > 0
    # lanes were held (issue 33 item 3), and no claim is on a log while its lane was held
    assert fig.holds > 0


def test_a_lease_whose_finish_died_after_its_result_json_still_holds_its_slot(tmp_path):
    """Issue 6 item 3: claim answers wait while ``slots`` lanes hold live
    leases. A runner killed by the harness halfway through the log line of
    its ``finish --result ok`` has written ``result.json`` (which comes
    first) but the log never heard of the finish: its lease is still live
    (its holder can still renew it). With ``slots = 1``, the next claim must
    not lease a second lane until that lease ends.
    Real processes: the harness kills writers with SIGKILL."""
    rng = random.Random(0)
    (tmp_path / "queue.txt").write_text("a 1\nb 2\n")
    (tmp_path / "storm.toml").write_text("[runner]\nslots = 1\n")
    (tmp_path / "UNATTENDED").write_text("")
    first = crash_harness.ask_one(tmp_path, "c1", ["claim", "--holder", "r1"], rng)
    assert first.told["decision"] == "run a 1 1"
    finisher = crash_harness.Writer("f1", ["finish", "a", "--token", "1", "--result", "ok"], ("half", 1), {"kind": "one"})
    crash_harness.run_writers(tmp_path, [finisher], rng)
    assert finisher.status == crash_harness.KILLED and finisher.requests[0].code is None
    assert json.loads((tmp_path / "lanes/a/.qwenstorm/result.json").read_text())["token"] == 1
    renew = crash_harness.ask_one(tmp_path, "r1", ["renew", "a", "--token", "1"], rng)
    assert (renew.code, renew.told["outcome"]) == (0, "done"), "the lease of token 1 is live"
    second = crash_harness.ask_one(tmp_path, "c2", ["claim", "--holder", "r2"], rng)
    assert second.told["decision"].startswith("wait"), (
        f"claim leased another lane while the one slot's lease on a is live: {second.told['decision']}")

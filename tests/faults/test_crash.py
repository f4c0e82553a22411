"""Crash consistency (issue 5 item 1): writers killed with SIGKILL at random
moments never lose an acknowledged request, never record one twice, and
never leave worse than a torn tail that the next request repairs. CI runs a
few hundred trials; ``python bench/crash.py --trials 10000`` runs the long
version."""

from __future__ import annotations

from tests.faults import crash_harness

TRIALS = 300


def test_writers_killed_at_random_lose_no_acknowledged_request(tmp_path):
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

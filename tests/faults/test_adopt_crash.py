"""An adopt killed with SIGKILL before each of its durable steps (every
write, fsync, link, rename, replace and unlink it makes; the crash
harness's ``adopt_trials``), one trial a step until an adopt runs to its
end: after each kill the storm is either not adopted (the old log where it
was, byte for byte, commands answering exit 3 naming adopt) or adopted (the
lane as the old log replays it, readable at once); and a second adopt then
finishes or rolls back, leaving exactly one adoption that verifies."""

from __future__ import annotations

from tests import oldlog
from tests.faults import crash_harness


def test_adopt_killed_at_every_step_leaves_the_old_log_untouched_or_the_adoption_complete(tmp_path):
    """A real process: the harness kills adopt with SIGKILL."""
    lane = [s for s, *_ in oldlog.SAMPLE_LANE]
    fig = crash_harness.adopt_trials(tmp_path, oldlog.SAMPLE, oldlog.QUEUE, lane)
    assert fig.failures == [], "\n".join(fig.failures)
    # the kills fell on both sides of the commit: before the new log took the old one's place, and after
    assert fig.not_adopted >= 3 and fig.adopted >= 2, fig
    assert fig.steps == fig.not_adopted + fig.adopted

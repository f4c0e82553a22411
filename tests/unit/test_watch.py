"""The frame of ``storm-queue watch`` as a pure function of a listing, the
log's last events and the time (storm_queue.watch_frame.build), drawn as plain
text and by rich; no file, terminal or clock is touched."""

from __future__ import annotations

import io

from storm_queue.cli import frame as watch_frame, watch
from storm_queue.core import queuetext
from storm_queue.core.clock import stamp
from storm_queue.service.storm import Listing
from storm_queue.core.fold import Attempt, LaneState, Lease, Mark, Run
from storm_queue.core.lane import Snapshot
from storm_queue.core.ledgers import Ledgers
from storm_queue.core.resolver import resolve

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
NOW = stamp(T0)
HOSTILE = "outage\n\x1b[31mred[/] [bold]loud[/bold]"

QUEUE = """\
schema 12
api 13 schema
docs 15
flaky 16
later 17
gone 18
stuck 19 gone
other 20
"""


def listing(now: str = NOW) -> Listing:
    lanes = {lane.slug: lane for lane in queuetext.parse(QUEUE).lanes}
    marks = {
        "schema": Mark(1, stamp(T0 - 600), "operator:alice", "bump", "api", HOSTILE),
        "api": Mark(1, stamp(T0 - 600), "operator:alice", "bump", "api", HOSTILE),
        "docs": Mark(2, stamp(T0 - 300), "source:triage", "bump", "docs", None),
    }
    runs = {
        "schema": Run(token=3, lease=Lease("runner-1", 3, "operator:alice", stamp(T0 - 150), stamp(T0 + 450), 600), attempts=1,
                      history=(Attempt(3, "runner-1", stamp(T0 - 150)),)),
        "flaky": Run(token=5, attempts=3, quarantined=stamp(T0 - 60),
                     history=(Attempt(5, "runner-2", stamp(T0 - 90), "failed", stamp(T0 - 60), "disk\x1b[2Jfull"),)),
        "later": Run(not_before=stamp(T0 + 5400)),
    }
    state = LaneState(lane=("schema", "api", "docs"), named=("api", "docs"), marks=marks, runs=runs)
    ledgers = Ledgers(frozenset(), frozenset({"gone"}), frozenset(), {}, False)
    snap = Snapshot(lanes, ledgers, state, now)
    return Listing("/storms/spring", resolve(snap), (), [], marks, 7)


EVENTS = [{"v": 1, "seq": n, "at": stamp(T0 - 1000 + n), "by": "operator:alice", "action": "schedule", "slug": "later",
           "not_before": None} for n in range(1, 13)] + [
    {"v": 1, "seq": 13, "at": stamp(T0 - 10), "by": "source:evil", "action": "refused", "requested": "bump", "slug": "api",
     "code": "not_operator", "message": "no", "authorised": False, "reason": HOSTILE}]


def test_the_frame_holds_what_the_operator_asked_for() -> None:
    frame = watch_frame.build(listing(), EVENTS, NOW)
    assert frame.decision == "run docs 15"
    (held,) = frame.running
    assert (held.slug, held.holder, held.token, held.kind) == ("schema", "runner-1", 3, "lease")
    assert held.left == 450 and held.ttl == 600
    assert [(p.position, p.slug, p.by) for p in frame.priority] == [
        (1, "schema", "operator:alice"), (2, "api", "operator:alice"), (3, "docs", "source:triage")]
    assert frame.priority[0].why.startswith("pulled forward for api; reason ")
    assert [(h.state, h.slug) for h in frame.held] == [("quarantined", "flaky"), ("scheduled", "later"), ("blocked", "stuck")]
    assert "in 1h30m" in frame.held[1].words
    assert len(frame.events) == watch_frame.EVENTS and frame.events[-1][0] == "refused"
    assert frame.events[0][1].lstrip().startswith("4 ")  # the last ten, oldest first


def test_plain_text_is_one_line_an_item_and_escapes_outside_text() -> None:
    text = watch_frame.plain_text(watch_frame.build(listing(), EVENTS, NOW))
    assert "\x1b" not in text
    lines = text.splitlines()
    assert lines[1] == "next: run docs 15"
    assert "  schema 12  held by runner-1  token 3  [###############-----] 7m30s left of 10m00s" in lines
    quoted = '"outage\\x0a\\x1b[31mred[/] [bold]loud[/bold]"'
    assert any(line.startswith("    2 api 13 waiting  by operator:alice") and line.endswith(f"reason {quoted}") for line in lines)
    assert any(line.startswith("  flaky 16  after 3 attempts") and 'note "disk\\x1b[2Jfull"' in line for line in lines)
    assert "  stuck 19  depends on abandoned gone: never runs until that changes" in lines
    assert "last 10 log events:" in lines


def test_the_rich_view_shows_markup_in_outside_text_literally() -> None:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200, force_terminal=True, color_system="standard").print(
        watch_frame.rich_view(watch_frame.build(listing(), EVENTS, NOW), footer="q quits"))
    raw = out.getvalue()
    assert "[bold]loud[/bold]" in raw and "\x1b[31mred" not in raw and "\x1b[2J" not in raw
    plain = io.StringIO()
    Console(file=plain, width=200, no_color=True).print(watch_frame.rich_view(watch_frame.build(listing(), EVENTS, NOW), footer="q quits"))
    shown = plain.getvalue()
    assert "\x1b" not in shown
    for words in ("next: run docs 15", "runner-1", "7m30s left of 10m00s", "priority lane, in run order (3)",
                  "quarantined, scheduled, blocked, cycle (3)", "last 10 log events", "q quits"):
        assert words in shown, words


def test_a_short_terminal_cuts_the_lane_lists_saying_how_many_are_not_shown() -> None:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=120, no_color=True).print(watch_frame.rich_view(watch_frame.build(listing(), EVENTS, NOW), height=20))
    shown = out.getvalue()
    assert "... and 2 more (storm-queue list shows them all)" in shown  # of the priority lane's three
    assert "last 1 log event\n" in shown  # the newest
    assert "\n  ... and 2 more (storm-queue list shows them all)\n\nheld, quarantined" in shown  # the priority lane: two of three not shown
    out = io.StringIO()
    Console(file=out, width=120, no_color=True).print(watch_frame.rich_view(watch_frame.build(listing(), EVENTS, NOW), height=19))
    assert "log: a taller terminal shows the last events (storm-queue log --last 10)" in out.getvalue()
    assert "10m00s ago" in shown  # when the request put schema there


def test_time_alone_moves_the_lease_bar_and_says_when_it_expired() -> None:
    later = stamp(T0 + 500)
    frame = watch_frame.build(listing(later), [], later)
    (held,) = frame.running
    assert held.kind == "orphan"
    assert watch_frame.lease_words(held) == "lease expired 50s ago: the next claim or recover takes it back"
    assert watch_frame.bar(held.left, held.ttl) == "[" + "-" * 20 + "]"
    assert watch.boundary(listing(), NOW) == stamp(T0 + 450)


def test_durations() -> None:
    assert [watch_frame.duration(s) for s in (0, 59, 61, 3599, 3600 * 5 + 60, 86400 * 2 + 3600)] == [
        "0s", "59s", "1m01s", "59m59s", "5h01m", "2d01h"]


def test_a_failed_read_keeps_the_last_frame_and_says_why() -> None:
    last = watch_frame.build(listing(), EVENTS, NOW)
    frame = watch_frame.failed("/storms/spring", "the priority order is unknown: line\n3", NOW, last)
    assert frame.decision == "unknown" and frame.priority == last.priority
    assert "error: the priority order is unknown: line\\x0a3" in watch_frame.plain_text(frame).splitlines()


def test_the_rich_view_fits_the_terminal_height() -> None:
    from rich.console import Console

    frame = watch_frame.build(listing(), EVENTS, NOW)
    for height in (20, 24, 30, 40):
        out = io.StringIO()
        Console(file=out, width=120, no_color=True).print(watch_frame.rich_view(frame, height=height, footer="q quits"))
        lines = out.getvalue().splitlines()
        assert len(lines) <= height, (height, lines)
        assert lines[-1] == "q quits" and "next: run docs 15" in lines


def test_the_last_events_come_from_the_checkpoint_when_it_is_enough(tmp_path) -> None:
    """Past a checkpoint, the view reads only the lines after it; either
    way they are the log's last ten, as a whole read finds them."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.directory.log import reader
    from tests.conftest import make_storm

    root = make_storm(tmp_path / "s", "a 1\nb 2\n")
    storm = Storm(str(root))
    seen = []
    for n in range(45):
        storm.bump("ab"[n % 2], reason=f"round {n}").check()
        if n in (3, 33, 44):
            whole = []
            storm.history(lambda line, event: whole.append(event))
            events = watch.Source(storm).read()[1]
            assert list(events) == whole[-10:] and events[-1]["reason"] == f"round {n}"
            seen.append(reader.read(str(root / "priority.log")).checkpoint_seq)
    assert seen[0] == 0 and seen[-1] > 0  # the last read really started from a checkpoint

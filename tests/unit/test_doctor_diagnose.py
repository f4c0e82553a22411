"""doctor's diagnosis is pure: findings from facts, no file read."""

from __future__ import annotations

import os

from storm_queue.core import config
from storm_queue.store.directory.accounts import Owner
from storm_queue.core.checkup import render_text
from storm_queue.store.directory.checkup import Entry, Facts, diagnose
from storm_queue.core.queuetext import QueueFile, Skipped

NOW = 1_000_000_000.0
OP = Owner(1000, 1000, "op", "/s/queue.txt")


def facts(**changes) -> Facts:
    base = dict(root="/s", owner=OP, entries=(), declaration=config.Declaration(False), log_rel="priority.log",
                log=None, log_error=None, queue=QueueFile((), ()), unreadable=(), stray=(), running=(), now=NOW)
    base.update(changes)
    return Facts(**base)


def stat_of(uid: int, mode: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, uid, 0, 0, 0, 0))


def test_nothing_to_say_is_no_finding():
    assert diagnose(facts(), 24.0) == []


def test_running_longer_than_the_threshold_only():
    found = diagnose(facts(running=(("a", NOW - 24 * 3600 - 1), ("b", NOW - 24 * 3600), ("c", NOW))), 24.0)
    assert [(f.code, f.subject) for f in found] == [("long_running", "a")]
    assert "/s/lanes/a/.qwenstorm/running" in found[0].fix


def test_shared_progress_log_is_judged_by_owner_only():
    entries = (Entry("progress.log", "/s/progress.log", stat_of(1000, 0o100666), shared=True),
               Entry("queue.txt", "/s/queue.txt", stat_of(1000, 0o100664)),
               Entry("integrated.txt", "/s/integrated.txt", stat_of(0, 0o100644)),
               Entry("ok.txt", "/s/ok.txt", stat_of(1000, 0o100644)))
    found = diagnose(facts(entries=entries), 24.0)
    assert [(f.severity, f.code, f.subject, f.fix) for f in found] == [
        ("error", "exposed", "queue.txt", "chmod go-w /s/queue.txt"),
        ("error", "exposed", "integrated.txt", "chown op /s/integrated.txt"),
    ]


def test_one_line_per_finding_whatever_the_text():
    queue = QueueFile((), (Skipped(3, "a\nb\x1b[31m\u2028[red]", "bad"),))
    text = render_text(diagnose(facts(queue=queue, stray=("x",)), 24.0))
    assert len(text.splitlines()) == 2
    assert "\x1b" not in text and "\u2028" not in text and "[red]" in text


def test_unwritable_storm_directory_log_and_queue_and_read_only_mount():
    """Issue 13 item 7: what storm-queue writes that its owner cannot."""
    entries = (Entry(".", "/s", stat_of(1000, 0o040555)),
               Entry("lanes", "/s/lanes", stat_of(1000, 0o040555)),
               Entry("queue.txt", "/s/queue.txt", stat_of(1000, 0o100444)),
               Entry("integrated.txt", "/s/integrated.txt", stat_of(1000, 0o100444)),
               Entry("priority.log", "/s/priority.log", stat_of(1000, 0o100644)),
               Entry("priority.log.lock", "/s/priority.log.lock", stat_of(1000, 0o100400)))
    found = diagnose(facts(entries=entries), 24.0)
    assert [(f.code, f.subject, f.fix) for f in found] == [
        ("unwritable", ".", "chmod u+wx /s"),
        ("unwritable", "queue.txt", "chmod u+w /s/queue.txt"),
        ("unwritable", "priority.log.lock", "chmod u+w /s/priority.log.lock"),
    ]
    assert all(f.severity == "error" for f in found)
    as_root = tuple(Entry(e.rel, e.path, stat_of(0, e.st.st_mode)) for e in entries)
    assert diagnose(facts(entries=as_root, owner=Owner(0, 0, "root", "/s/queue.txt")), 24.0) == [], \
        "root writes whatever the mode"
    ro = diagnose(facts(read_only=True), 24.0)
    assert [(f.code, f.subject) for f in ro] == [("unwritable", ".")] and "read-only" in ro[0].message

"""The earlier tool's log as ``adopt`` reads it (``storm_queue.store.directory.log.adopted``):
valid generated logs replay to what a reference model of the format says;
every rule of the format, broken once in an otherwise valid log, is refused
naming the line it broke."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.core import fold
from storm_queue.store.directory.log import adopted
from storm_queue.core import framing
from storm_queue.store.directory.log.adopted import OldDamage, replay
from tests import oldlog

SLUGS = ("a", "b", "c", "d", "e")
names = st.sampled_from(SLUGS)
stamps = st.builds(lambda d, h, m: f"2026-11-{d:02d}T{h:02d}:{m:02d}:00Z",
                   st.integers(1, 30), st.integers(0, 23), st.integers(0, 59))
who = st.sampled_from(["operator:alice", "source:bot", "account:x", 'lane:"l1"', "anything at all"])
texts = st.text(max_size=12)


@st.composite
def old_line(draw, first: bool = False) -> bytes:
    """One valid line of the earlier tool's log."""
    kinds = ["push", "bump", "unbump", "refused"] + (["reset"] if first else [])
    kind = draw(st.sampled_from(kinds))
    by, at = draw(who), draw(stamps)
    extra = {"reason": draw(texts)} if draw(st.booleans()) and kind in ("push", "bump", "unbump") else {}
    if kind in ("push", "bump"):
        slug = draw(names)
        moved = draw(st.lists(names, max_size=4))
        # a push carries noop exactly when it moved nothing; a bump may carry it then
        noop = draw(texts) if not moved and (kind == "push" or draw(st.booleans())) else None
        deps = draw(st.lists(names, max_size=3))
        if kind == "push":
            return oldlog.push(slug, draw(texts), deps, moved, draw(st.booleans()), by=by, at=at, noop=noop, **extra)
        return oldlog.bump(slug, draw(texts), deps, moved, by=by, at=at, noop=noop, **extra)
    if kind == "unbump":
        removed = draw(st.none() | st.lists(names, max_size=4))
        return oldlog.line("unbump", by, at, slug=draw(names), **({} if removed is None else {"removed": removed}), **extra)
    if kind == "refused":
        return oldlog.refused(draw(st.sampled_from(adopted.REQUESTED)), draw(st.none() | texts), draw(st.booleans()),
                              draw(texts), by=by, at=at)
    return oldlog.reset(draw(texts), draw(st.integers(0, 10**9)), by=by, at=at)


@st.composite
def old_log(draw) -> list[bytes]:
    first = draw(st.lists(old_line(first=True), min_size=0, max_size=1))
    return first + draw(st.lists(old_line(), max_size=25))


def model(lines: list[bytes]) -> list[tuple[str, bool, str, str]]:
    """The reference: the format's replay rules read plainly."""
    lane: list[list] = []
    named: set[str] = set()
    for raw in lines:
        e = json.loads(raw)
        if e["action"] in ("push", "bump"):
            for s in e["moved"]:
                if s not in [x[0] for x in lane]:
                    lane.append([s, e["by"], e["at"]])
            if "noop" not in e:
                named.add(e["slug"])
        elif e["action"] == "unbump":
            gone = e.get("removed", [e["slug"]])
            lane = [x for x in lane if x[0] not in gone]
            named.discard(e["slug"])
    return [(s, s in named, by, at) for s, by, at in lane]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(old_log(), st.booleans())
def test_a_valid_log_replays_as_the_model_says(lines, with_witness):
    data = b"".join(lines)
    witness = oldlog.witness(data) if with_witness else None
    got = replay(data, witness, "priority.log")
    assert [(e.slug, e.named, e.by, e.at) for e in got.lane] == model(lines)
    assert (got.lines, got.length) == (len(lines), len(data))
    assert got.sha256 == framing.sha256(data).hexdigest()
    # the adopt event carrying that lane is a well-formed line, and folds to it
    body = {"v": 1, "seq": 1, "at": "2026-12-01T00:00:00.000000Z", "action": "adopt", "by": "operator:o", "prev": None,
            "name": "priority.log", "kept": "priority.log.adopted-x", "sha256": got.sha256, "bytes": got.length,
            "lines": got.lines, "lane": got.rows()}
    event = framing.decode(framing.encode(body))
    state = fold.replay([event])
    assert list(state.lane) == [s for s, *_ in model(lines)]
    assert set(state.named) == {s for s, n, *_ in model(lines) if n}
    assert {s: (m.by, m.at) for s, m in state.marks.items()} == {s: (by, at) for s, _, by, at in model(lines)}
    # the quick path of a long log's reader accepts exactly what decode accepts
    assert framing.QUICK["adopt"](event, set(), 1, None)


def _set(raw: bytes, **changes) -> bytes:
    """The line with fields changed (a value of ``...`` removes the field),
    written as the earlier tool would (keys sorted)."""
    e = json.loads(raw)
    for k, v in changes.items():
        if v is ...:
            e.pop(k, None)
        else:
            e[k] = v
    return (json.dumps(e, sort_keys=True) + "\n").encode()


PUSH = oldlog.push("a", "1", [], ["a"], False)
BUMP = oldlog.bump("b", "2", ["a"], ["a", "b"])
UNBUMP = oldlog.unbump("a", ["a"])
REFUSED = oldlog.refused("bump", "x", False, "why")
RESET = oldlog.reset("why", 3)

#: rule -> (a broken line, words the refusal says)
BROKEN = {
    "no final newline": (PUSH[:-1], "does not end in a newline"),
    "not ascii": (PUSH.replace(b"operator:alice", "operat\u00f6r".encode()), "not ASCII"),
    "not json": (b"{\"v\": 1,\n", "not JSON"),
    "blank line": (b"\n", "not JSON"),
    "not an object": (b"[1, 2]\n", "not a JSON object"),
    "keys unsorted": ((json.dumps({"v": 1, "action": "unbump", "by": "o", "at": "2026-11-01T00:00:00Z", "slug": "a"}) + "\n").encode(),
                      "not sorted"),
    "a key twice": (b'{"action": "unbump", "at": "2026-11-01T00:00:00Z", "by": "o", "slug": "a", "slug": "b", "v": 1}\n', "twice"),
    "seq": (_set(PUSH, seq=1), "'seq' or 'prev'"),
    "prev": (_set(PUSH, prev=None), "'seq' or 'prev'"),
    "version 2": (_set(PUSH, v=2), "'v'"),
    "version true": (_set(PUSH, v=True), "'v'"),
    "no version": (_set(PUSH, v=...), "'v'"),
    "unknown action": (_set(PUSH, action="claim"), "'action'"),
    "no action": (_set(PUSH, action=...), "'action'"),
    "by not text": (_set(PUSH, by=7), "'by'"),
    "no by": (_set(PUSH, by=...), "'by'"),
    "at with fraction": (_set(PUSH, at="2026-11-01T10:00:00.5Z"), "'at'"),
    "at not a day": (_set(PUSH, at="2026-02-30T10:00:00Z"), "'at'"),
    "at without zone": (_set(PUSH, at="2026-11-01T10:00:00"), "'at'"),
    "at other digits": (_set(PUSH, at="2026-11-0\u0663T10:00:00Z"), "'at'"),
    "no at": (_set(PUSH, at=...), "'at'"),
    "reason not text": (_set(BUMP, reason=1), "'reason'"),
    "push slug missing": (_set(PUSH, slug=...), "'slug'"),
    "push slug not a name": (_set(PUSH, slug="../x"), "'slug'"),
    "bump slug not text": (_set(BUMP, slug=["b"]), "'slug'"),
    "issue not text": (_set(BUMP, issue=2), "'issue'"),
    "no issue": (_set(PUSH, issue=...), "'issue'"),
    "deps not a list": (_set(BUMP, deps="a"), "'deps'"),
    "deps not names": (_set(BUMP, deps=["a b"]), "'deps'"),
    "no moved": (_set(BUMP, moved=...), "'moved'"),
    "moved not names": (_set(PUSH, moved=["-a"]), "'moved'"),
    "noop not text": (_set(PUSH, moved=[], noop=True), "'noop'"),
    "noop that moved": (_set(BUMP, noop="already"), "no-op"),
    "push without appended": (_set(PUSH, appended=...), "'appended'"),
    "push that moved nothing without noop": (_set(PUSH, moved=[]), "no 'noop'"),
    "appended not a bool": (_set(PUSH, appended="yes"), "'appended'"),
    "bump with appended": (_set(BUMP, appended=False), "no 'appended'"),
    "unbump slug not a name": (_set(UNBUMP, slug="a*"), "'slug'"),
    "removed not a list": (_set(UNBUMP, removed="a"), "'removed'"),
    "removed not names": (_set(UNBUMP, removed=[1]), "'removed'"),
    "refused of an unknown verb": (_set(REFUSED, requested="claim"), "'requested'"),
    "refused without slug": (_set(REFUSED, slug=...), "'slug'"),
    "refused slug not text": (_set(REFUSED, slug=5), "'slug'"),
    "authorised not a bool": (_set(REFUSED, authorised=1), "'authorised'"),
    "refused without reason": (_set(REFUSED, reason=...), "'reason'"),
    "reset after line 1": (RESET, "only as line 1"),
    "abandons negative": (_set(RESET, abandons=-1), "'abandons'"),
    "abandons a bool": (_set(RESET, abandons=True), "'abandons'"),
    "reset without reason": (_set(RESET, reason=...), "'reason'"),
}


@pytest.mark.parametrize("rule", sorted(BROKEN))
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(old_log(), st.data())
def test_every_rule_broken_once_is_refused_naming_its_line(rule, lines, data):
    bad, words = BROKEN[rule]
    if rule in ("abandons negative", "abandons a bool", "reset without reason"):
        at = 0  # a reset is judged as line 1
        lines = [ln for ln in lines if json.loads(ln)["action"] != "reset"]
    elif rule == "no final newline":
        at = len(lines)  # only the last line can lack its newline
    else:
        at = data.draw(st.integers(0, len(lines)), label="line")
        if rule == "reset after line 1":  # a reset is valid as line 1 alone
            lines = lines or [PUSH]
            at = max(at, 1)
    log = lines[:at] + [bad] + ([] if rule == "no final newline" else lines[at:])
    with pytest.raises(OldDamage) as raised:
        replay(b"".join(log), oldlog.witness(b"".join(log)), "priority.log")
    assert raised.value.line == at + 1, (rule, raised.value)
    assert words in raised.value.rule, (rule, raised.value.rule)


@given(old_log().filter(bool), st.data())
def test_a_log_shorter_than_its_witness_is_damaged(lines, data):
    whole = b"".join(lines)
    cut = data.draw(st.integers(0, len(whole) - 1))
    with pytest.raises(OldDamage) as raised:
        replay(whole[:cut] if cut else whole, oldlog.witness(whole, length=len(whole) + (0 if cut else 1)), "priority.log")
    assert raised.value.line == 0 and "shorter than" in raised.value.rule


def test_a_missing_log_with_a_witness_and_a_witness_not_the_old_tools_are_damaged():
    with pytest.raises(OldDamage, match="missing"):
        replay(None, oldlog.witness(b""), "priority.log")
    for witness in (b"{}", b"[]", b"not json", b'{"log": "other.log", "length": 0, "at": "x"}',
                    b'{"log": "priority.log", "length": -1, "at": "x"}', b'{"log": "priority.log", "length": true, "at": "x"}'):
        with pytest.raises(OldDamage) as raised:
            replay(PUSH, witness, "priority.log")
        assert raised.value.line == 0 and "witness" in raised.value.rule


def test_the_sample_log_replays_to_its_lane():
    data = b"".join(oldlog.SAMPLE)
    got = replay(data, None, "priority.log")
    assert [(e.slug, e.named, e.by, e.at, e.request) for e in got.lane] == oldlog.SAMPLE_LANE
    assert got.lines == len(oldlog.SAMPLE)


def test_only_the_old_format_looks_old():
    assert adopted.looks_old(PUSH, None)
    assert adopted.looks_old(b"", oldlog.witness(b""))
    assert not adopted.looks_old(_set(PUSH, seq=1, prev=None), None)
    assert not adopted.looks_old(b"", None)
    assert not adopted.looks_old(b"garbage\n", None)
    assert not adopted.looks_old(b"", b'{"log": "priority.log", "length": 0, "seq": 0, "digest": null, "at": "x"}')


@pytest.mark.parametrize("lane", [
    [{"slug": "a", "named": True, "by": "o", "at": "t", "action": "bump", "for": "a"}],  # a field short
    [{"slug": "../a", "named": True, "by": "o", "at": "t", "action": "bump", "for": "a", "line": 1}],
    [{"slug": "a", "named": 1, "by": "o", "at": "t", "action": "bump", "for": "a", "line": 1}],
    [{"slug": "a", "named": True, "by": "o", "at": "t", "action": "bump", "for": "a", "line": 1}] * 2,
    ["a"],
])
def test_an_adopt_line_whose_lane_is_not_rows_of_names_is_malformed(lane):
    body = {"v": 1, "seq": 1, "at": "t", "action": "adopt", "by": "o", "prev": None, "name": "p", "kept": "k",
            "sha256": "s", "bytes": 1, "lines": 1, "lane": lane}
    with pytest.raises(framing.Malformed):
        framing.decode(framing.encode(body))
    assert not framing.QUICK["adopt"](json.loads(framing.encode(body)), set(), 1, None)


def test_an_adopt_that_took_a_log_over_is_valid_only_as_line_1():
    body = {"v": 1, "seq": 2, "at": "2026-12-06T00:00:00.000000Z", "action": "adopt", "by": "operator:o", "prev": "0" * 64, "name": "p", "kept": "k",
            "sha256": "s", "bytes": 1, "lines": 1, "lane": []}
    with pytest.raises(framing.Malformed, match="only as line 1"):
        framing.decode(framing.encode(body))
    assert not framing.QUICK["adopt"](body, set(), 2, "0" * 64)
    noop = {**body, "name": None, "kept": None, "sha256": None, "bytes": None, "lines": None, "noop": "nothing to adopt"}
    assert framing.decode(framing.encode(noop))["noop"]
    assert framing.QUICK["adopt"](noop, set(), 2, "0" * 64)

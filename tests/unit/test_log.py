"""Unit tests of the priority log (storm_queue.store.directory.log): framing, the chain, the
witness, damage as an unknown order, the torn-tail repair."""

from __future__ import annotations

import hashlib
import json
import os
import re

import pytest

from storm_queue import wall
from storm_queue.core import fold
from storm_queue.core.errors import UnknownOrder
from storm_queue.core import framing
from storm_queue.store.directory.log import reader, writer
from storm_queue.core import logread
from storm_queue.store.directory.log.reader import witness_path

AT_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
AT = "2024-05-01T12:00:00.123456Z"
BY = "operator:alice"


def bump(slug, moved=None, removed=(), **extra):
    return {"action": "bump", "slug": slug, "issue": "1", "deps": [], "moved": list([slug] if moved is None else moved),
            "removed": list(removed), **extra}


def unbump(slug, removed):
    return {"action": "unbump", "slug": slug, "moved": [], "removed": list(removed)}


def refused(slug="x"):
    return {"action": "refused", "requested": "bump", "slug": slug, "code": "unknown_slug",
            "message": "no such lane", "authorised": True}


def append(path, *bodies, at=AT, by=BY):
    """One request: read (as a writer would, under the lock), then append."""
    return writer.append(reader.read(str(path)), list(bodies), at, by)


def lines(path):
    return path.read_bytes().splitlines(keepends=True)


def witness(path):
    return json.loads(open(witness_path(str(path)), "rb").read())


def write_raw(path, events, wlength=None):
    """Write ``events`` chained as a log, with a witness that agrees (or with ``wlength``)."""
    prev, data, seq = None, b"", 0
    for e in events:
        seq += 1
        full = {"v": 1, "seq": seq, "at": AT, "action": e["action"], "by": BY, "prev": prev}
        full.update({k: v for k, v in e.items() if k != "action"})
        line = framing.encode(full)
        prev = hashlib.sha256(line).hexdigest()
        data += line
    path.write_bytes(data)
    w = {"log": path.name, "length": len(data) if wlength is None else wlength, "seq": seq, "digest": prev, "at": AT}
    open(witness_path(str(path)), "w").write(json.dumps(w) + "\n")


def assert_unknown(path, *words):
    with pytest.raises(UnknownOrder) as info:
        reader.read(str(path))
    msg = str(info.value)
    assert "storm-queue reset" in msg
    for w in words:
        assert w in msg, msg
    return msg


@pytest.fixture
def log(tmp_path):
    return tmp_path / "priority.log"


# -- fresh start and framing ------------------------------------------------------------

def test_no_log_no_witness_is_fresh(log):
    r = reader.read(str(log))
    assert r.fresh and not r.log_exists
    assert r.state == fold.EMPTY and r.seq == 0 and r.digest is None and r.length == 0
    assert r.warnings == []


def test_fresh_append_creates_witness_length_zero_before_the_log(log, monkeypatch):
    seen = []
    real = writer.replace_atomically

    def spy(path, data, owner=None):
        seen.append((os.path.basename(path), json.loads(data), log.exists()))
        return real(path, data, owner)

    monkeypatch.setattr(writer, "replace_atomically", spy)
    append(log, bump("a"))
    assert len(seen) == 2
    name, body, log_existed = seen[0]
    assert name == ".priority.log.witness"
    assert body["length"] == 0 and body["seq"] == 0 and body["digest"] is None
    assert log_existed is False
    name, body, log_existed = seen[1]
    assert log_existed and body["length"] == log.stat().st_size


def test_seq_from_one_without_gaps_and_prev_chain(log):
    append(log, bump("a"))
    append(log, bump("b"), refused())
    append(log, unbump("a", ["a"]))
    raw = lines(log)
    events = [json.loads(l) for l in raw]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert events[0]["prev"] is None
    for before, event in zip(raw, events[1:]):
        assert event["prev"] == hashlib.sha256(before).hexdigest()
        assert re.fullmatch(r"[0-9a-f]{64}", event["prev"])
    r = reader.read(str(log), keep_events=True)
    assert r.seq == 4 and [e["seq"] for e in r.events] == [1, 2, 3, 4]
    assert (r.state.lane, r.state.named) == (("b",), ("b",))
    assert r.digest == hashlib.sha256(raw[-1]).hexdigest()
    assert r.length == log.stat().st_size and r.torn == 0 and r.warnings == []


def test_append_returns_the_events_as_written(log):
    events = append(log, bump("a"), refused())
    assert [json.loads(l) for l in lines(log)] == events


def test_field_order_and_one_line_per_event(log):
    append(log, bump("a", reason="why not"))
    append(log, refused())
    for line in lines(log):
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        event = json.loads(line)
        assert list(event)[:6] == ["v", "seq", "at", "action", "by", "prev"]
        assert event["v"] == 1 and event["by"] == BY


def test_at_is_rfc3339_microseconds_z(log):
    at = wall.now()
    assert AT_RE.fullmatch(at)
    append(log, bump("a"), at=at)
    event = json.loads(lines(log)[0])
    assert event["at"] == at
    assert AT_RE.fullmatch(event["at"])
    assert witness(log)["at"] == at


def test_witness_fields_agree_with_the_log(log):
    append(log, bump("a"))
    append(log, bump("b"), at="2024-05-01T12:00:01.000000Z")
    w = witness(log)
    assert set(w) == {"log", "length", "seq", "digest", "at"}
    assert w["log"] == "priority.log"
    assert w["length"] == log.stat().st_size
    assert w["seq"] == 2
    assert w["digest"] == hashlib.sha256(lines(log)[-1]).hexdigest()
    assert w["at"] == "2024-05-01T12:00:01.000000Z"
    assert not [p for p in os.listdir(log.parent) if ".tmp." in p]


def test_reason_with_controls_stays_one_ascii_line(log):
    reason = "outage\nfake line\r\u2028\u2029\x1b[31mred\x00 é \"q\" \\"
    append(log, bump("a", reason=reason))
    raw = log.read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")
    raw.decode("ascii")
    assert b"\x1b" not in raw and b"\r" not in raw and b"\xe2\x80\xa8" not in raw
    r = reader.read(str(log), keep_events=True)
    assert r.events[0]["reason"] == reason


def test_encode_is_ascii_one_line():
    line = framing.encode({"reason": "a\nb\u2028c\x1bd\u0085"})
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert line.decode("ascii").isprintable() is False  # only because of the final newline
    assert line[:-1].decode("ascii").isprintable()


# -- damage: an unknown order ------------------------------------------------------------

def test_log_missing_while_witness_says_it_existed(log):
    append(log, bump("a"))
    log.unlink()
    assert_unknown(log, "missing")


def test_witness_length_zero_without_log_is_not_damage_and_next_append_starts_the_log(log):
    # a writer that stopped between writing the witness and creating the log
    write_raw(log, [])
    log.unlink()
    r = reader.read(str(log))
    assert r.state == fold.EMPTY and r.seq == 0
    events = writer.append(r, [bump("a")], AT, BY)
    assert events[0]["seq"] == 1 and events[0]["prev"] is None
    assert reader.read(str(log)).seq == 1


def test_empty_log_with_zero_witness_is_readable(log):
    write_raw(log, [])
    r = reader.read(str(log))
    assert r.log_exists and r.seq == 0 and r.state == fold.EMPTY
    append(log, bump("a"))
    assert reader.read(str(log)).seq == 1


def test_log_shorter_than_witnessed_by_whole_lines(log):
    append(log, bump("a"))
    append(log, bump("b"))
    log.write_bytes(lines(log)[0])
    assert_unknown(log, "shorter")


def test_log_emptied(log):
    append(log, bump("a"))
    log.write_bytes(b"")
    assert_unknown(log)


def test_log_cut_inside_a_witnessed_line_is_damage_not_a_torn_tail(log):
    append(log, bump("a"))
    append(log, bump("b"))
    data = log.read_bytes()
    log.write_bytes(data[:-5])
    first = len(lines(log)[0])
    # the operator's evidence: what the file holds (it said the whole lines' length alone, as "holds")
    assert_unknown(log, f"the log holds {len(data) - 5} bytes ({first} of them in whole lines), shorter than "
                        f"the {len(data)} its witness recorded")


def test_every_flipped_byte_is_an_unknown_order(log):
    append(log, bump("a"))
    append(log, bump("b"), refused())
    data = log.read_bytes()
    for i in range(len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x01
        log.write_bytes(bytes(damaged))
        with pytest.raises(UnknownOrder) as info:
            reader.read(str(log))
        assert "storm-queue reset" in str(info.value), i


def test_flipped_byte_in_a_middle_line_breaks_the_chain(log):
    append(log, bump("a"))
    append(log, bump("b"))
    append(log, bump("c"))
    raw = lines(log)
    middle = raw[1].replace(b'"slug":"b"', b'"slug":"z"')
    assert middle != raw[1]
    log.write_bytes(raw[0] + middle + raw[2])
    assert_unknown(log, "chain")


def test_malformed_middle_line(log):
    append(log, bump("a"))
    append(log, bump("b"))
    append(log, bump("c"))
    raw = lines(log)
    log.write_bytes(raw[0] + b"not json at all\n"[: len(raw[1]) - 1].ljust(len(raw[1]) - 1, b" ") + b"\n" + raw[2])
    assert_unknown(log, "malformed")


@pytest.mark.parametrize("v", [2, 0, "1", None])
def test_unknown_version(log, v):
    write_raw(log, [bump("a"), bump("b")])
    raw = lines(log)
    e = json.loads(raw[1])
    e["v"] = v
    line = framing.encode(e)
    log.write_bytes(raw[0] + line)
    w = witness(log)
    w.update(length=len(raw[0]) + len(line), digest=hashlib.sha256(line).hexdigest())
    open(witness_path(str(log)), "w").write(json.dumps(w))
    assert_unknown(log, "version")


@pytest.mark.parametrize("action", ["teleport", "", None, "BUMP"])
def test_unknown_action(log, action):
    write_raw(log, [bump("a"), {**bump("b"), "action": action}])
    assert_unknown(log, "action")


@pytest.mark.parametrize(
    "event",
    [
        {"action": "bump", "slug": "a"},  # missing fields
        {**bump("a"), "moved": "a"},  # not a list
        {**bump("a"), "reason": 3},  # optional field of the wrong type
        {"action": "push", **{k: v for k, v in bump("a").items() if k != "action"}},  # push without appended
        {"action": "repair", "torn": "3", "side": "x"},
    ],
)
def test_schema_violations_are_malformed(log, event):
    write_raw(log, [event])
    assert_unknown(log, "malformed")


@pytest.mark.parametrize(("field", "value"), [
    ("at", "yesterday"), ("at", "2026-12-05T23:00:00Z"), ("at", "2026-12-05 23:00:00.000000Z"), ("at", 1.5),
    ("by", "nobody-at-all\x1b[31m"), ("by", "lane:unquoted"), ("by", "lane:"), ("by", "root:x"), ("by", "")])
def test_a_time_or_a_principal_not_written_as_the_log_writes_them_is_malformed(log, field, value):
    """verify called a chained, witnessed line sound whose at was
    "yesterday" and whose by was no principal (contract, section 4: at is
    RFC 3339 with microseconds and Z; by is operator:, source:, account: or
    lane:"..."). The reader refuses it, as the database's insert check
    does, on the quick path and the slow one."""
    write_raw(log, [bump("a"), {**bump("b"), field: value}])
    assert_unknown(log, "line 2 is malformed", f"field '{field}'")
    event = {"v": 1, "seq": 1, "at": AT, "action": "bump", "by": BY, "prev": None, **bump("a"), field: value}
    assert not framing.QUICK["bump"](event, set(), 1, None)


def test_wrong_seq_or_prev_even_if_witnessed(log):
    write_raw(log, [bump("a")])
    raw = lines(log)
    e = json.loads(raw[0])
    e["seq"] = 2
    log.write_bytes(framing.encode(e))
    w = witness(log)
    w.update(length=log.stat().st_size, seq=2, digest=hashlib.sha256(log.read_bytes()).hexdigest())
    open(witness_path(str(log)), "w").write(json.dumps(w))
    assert_unknown(log, "seq")
    e["seq"], e["prev"] = 1, "0" * 64
    log.write_bytes(framing.encode(e))
    w.update(length=log.stat().st_size, seq=1, digest=hashlib.sha256(log.read_bytes()).hexdigest())
    open(witness_path(str(log)), "w").write(json.dumps(w))
    assert_unknown(log, "chain")


def test_missing_witness_with_a_log(log):
    append(log, bump("a"))
    os.unlink(witness_path(str(log)))
    assert_unknown(log, "witness")


def test_missing_witness_with_an_empty_log(log):
    log.write_bytes(b"")
    assert_unknown(log, "witness")


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage\x00\xff",
        b"[]",
        b'{"log": "priority.log", "length": 10}',
        b'{"log": "priority.log", "length": -1, "seq": 0, "digest": null, "at": "x"}',
        b'{"log": "priority.log", "length": "0", "seq": 0, "digest": null, "at": "x"}',
        b'{"log": "priority.log", "length": true, "seq": 0, "digest": null, "at": "x"}',
    ],
)
def test_garbage_witness(log, content):
    append(log, bump("a"))
    open(witness_path(str(log)), "wb").write(content)
    assert_unknown(log, "witness")


def test_unreadable_witness_directory(log):
    append(log, bump("a"))
    os.unlink(witness_path(str(log)))
    os.mkdir(witness_path(str(log)))
    assert_unknown(log, "witness")


def test_witness_symlink_is_not_followed(log, tmp_path):
    append(log, bump("a"))
    real = tmp_path / "elsewhere"
    os.rename(witness_path(str(log)), real)
    os.symlink(real, witness_path(str(log)))
    assert_unknown(log)


def test_witness_of_another_log(log):
    append(log, bump("a"))
    w = witness(log)
    w["log"] = "other.log"
    open(witness_path(str(log)), "w").write(json.dumps(w))
    assert_unknown(log)


def test_witness_digest_disagrees(log):
    append(log, bump("a"))
    w = witness(log)
    w["digest"] = "f" * 64
    open(witness_path(str(log)), "w").write(json.dumps(w))
    assert_unknown(log)


def test_witness_length_inside_a_line(log):
    append(log, bump("a"))
    append(log, bump("b"))
    w = witness(log)
    w["length"] -= 3
    open(witness_path(str(log)), "w").write(json.dumps(w))
    assert_unknown(log)


def test_damaged_log_cannot_be_read_for_append_and_stays_untouched(log):
    append(log, bump("a"))
    append(log, bump("b"))
    log.write_bytes(lines(log)[0])
    before = (log.read_bytes(), open(witness_path(str(log)), "rb").read())
    with pytest.raises(UnknownOrder):
        append(log, refused())
    assert (log.read_bytes(), open(witness_path(str(log)), "rb").read()) == before


# -- the torn tail -------------------------------------------------------------------------

def test_torn_tail_is_ignored_with_a_warning(log):
    append(log, bump("a"))
    append(log, bump("b"))
    good = reader.read(str(log))
    torn = b'{"v":1,"seq":3,"at":"2024'
    with open(log, "ab") as f:
        f.write(torn)
    r = reader.read(str(log))
    assert r.torn == len(torn)
    assert r.warnings and "torn" in r.warnings[0]
    assert (r.state, r.seq, r.digest, r.length) == (good.state, good.seq, good.digest, good.length)


def test_next_append_repairs_torn_tail_into_side_file(log):
    append(log, bump("a"))
    append(log, bump("b"))
    clean = log.read_bytes()
    torn = b'{"v":1,"seq":3,"at":"2024-05-01T12'
    with open(log, "ab") as f:
        f.write(torn)
    events = append(log, bump("c"), at="2024-05-01T13:00:00.000000Z")
    assert [e["action"] for e in events] == ["repair", "bump"]
    repair = events[0]
    assert repair["torn"] == len(torn)
    assert repair["seq"] == 3 and events[1]["seq"] == 4
    side = log.parent / repair["side"]
    assert side.read_bytes() == torn
    assert side.name.startswith("priority.log")
    data = log.read_bytes()
    assert data.startswith(clean) and torn not in data
    raw = lines(log)
    assert len(raw) == 4
    assert json.loads(raw[2])["action"] == "repair"
    assert json.loads(raw[2])["prev"] == hashlib.sha256(raw[1]).hexdigest()
    r = reader.read(str(log))
    assert r.torn == 0 and r.warnings == [] and r.seq == 4
    assert (r.state.lane, r.state.named) == (("a", "b", "c"), ("a", "b", "c"))
    assert witness(log)["length"] == len(data) and witness(log)["seq"] == 4


def test_repair_takes_a_free_side_file_name_when_its_own_is_taken(log):
    """A writer killed after making its side file, or a clock that repeats a
    time, leaves the name taken: the repair takes the next free one, and a
    link planted there is not written through."""
    append(log, bump("a"))
    torn = b'{"v":1,"seq":2,"at":"2024-05-01T12'
    with open(log, "ab") as f:
        f.write(torn)
    at = "2024-05-01T13:00:00.000000Z"
    taken = log.parent / f"priority.log.torn-1-{at.replace(':', '')}"
    taken.write_bytes(b"left by a killed writer")
    target = log.parent / "elsewhere"
    target.write_bytes(b"keep")
    (log.parent / f"{taken.name}.1").symlink_to(target)
    events = append(log, bump("c"), at=at)
    assert events[0]["action"] == "repair" and events[0]["side"] == f"{taken.name}.2"
    assert (log.parent / events[0]["side"]).read_bytes() == torn
    assert taken.read_bytes() == b"left by a killed writer" and target.read_bytes() == b"keep"
    assert reader.read(str(log)).seq == 3


def test_torn_tail_on_a_brand_new_log(log):
    write_raw(log, [])
    log.write_bytes(b'{"v":1,"se')
    r = reader.read(str(log))
    assert r.torn == 10 and r.seq == 0
    events = writer.append(r, [bump("a")], AT, BY)
    assert [e["seq"] for e in events] == [1, 2]
    assert events[0]["action"] == "repair" and events[0]["prev"] is None
    assert reader.read(str(log)).seq == 2


def test_torn_tail_that_is_only_whitespace_or_garbage_is_still_only_torn(log):
    append(log, bump("a"))
    with open(log, "ab") as f:
        f.write(b"\x00\x00\xff")
    r = reader.read(str(log))
    assert r.torn == 3


# -- lines past a lagging witness ---------------------------------------------------------

def test_whole_lines_past_lagging_witness_are_accepted_with_warning(log):
    append(log, bump("a"))
    old_witness = open(witness_path(str(log)), "rb").read()
    append(log, bump("b"))
    append(log, unbump("a", ["a"]))
    open(witness_path(str(log)), "wb").write(old_witness)
    r = reader.read(str(log))
    assert r.seq == 3
    assert (r.state.lane, r.state.named) == (("b",), ("b",))
    assert r.warnings and "witness" in r.warnings[0]
    assert r.torn == 0
    writer.append(r, [bump("c")], AT, BY)
    w = witness(log)
    assert w["seq"] == 4 and w["length"] == log.stat().st_size
    assert reader.read(str(log)).warnings == []


def test_lines_past_witness_that_do_not_chain_are_damage(log):
    append(log, bump("a"))
    append(log, bump("b"))
    raw = lines(log)
    with open(log, "ab") as f:
        f.write(raw[1])  # a replayed copy: wrong seq and prev
    assert_unknown(log)


def test_lines_past_witness_then_torn_tail(log):
    append(log, bump("a"))
    old_witness = open(witness_path(str(log)), "rb").read()
    append(log, bump("b"))
    open(witness_path(str(log)), "wb").write(old_witness)
    with open(log, "ab") as f:
        f.write(b'{"v":1')
    r = reader.read(str(log))
    assert r.seq == 2 and r.torn == 6
    events = writer.append(r, [bump("c")], AT, BY)
    assert [e["seq"] for e in events] == [3, 4]
    r = reader.read(str(log))
    assert r.seq == 4 and r.torn == 0 and r.warnings == []


# -- framing.decode ------------------------------------------------------------------------

def test_decode_roundtrip_and_rejects():
    e = {"v": 1, "seq": 1, "at": AT, "action": "reset", "by": BY, "prev": None, "reason": "r", "abandons": 7}
    assert framing.decode(framing.encode(e)) == e
    for bad in (b"[1]\n", b"{\n", b'"x"\n', b"\xff\n"):
        with pytest.raises(framing.Malformed):
            framing.decode(bad)
    with pytest.raises(framing.Malformed):
        framing.decode(framing.encode({**e, "prev": "abc"}))
    with pytest.raises(framing.Malformed):
        framing.decode(framing.encode({k: v for k, v in e.items() if k != "prev"}))
    with pytest.raises(framing.Malformed):
        framing.decode(framing.encode({**e, "seq": True}))


def test_a_temp_file_left_by_a_killed_process_with_our_pid_is_replaced(log):
    """A writer killed between making its temp witness and renaming it leaves
    `.<name>.tmp.<pid>`; a later process given the same pid must still
    witness its line, not fail after the line is on the log."""
    append(log, bump("a"))
    w = reader.witness_path(str(log))
    left = os.path.join(os.path.dirname(w), f".{os.path.basename(w)}.tmp.{os.getpid()}")
    with open(left, "wb") as f:
        f.write(b"half a witness")
    append(log, bump("b"))
    assert not os.path.exists(left)
    r = reader.read(str(log))
    assert r.seq == 2 and r.warnings == [] and witness(log)["seq"] == 2


def test_a_read_that_meets_damage_once_looks_again(log, monkeypatch):
    """A reader racing a writer (a repair cutting a torn tail under it, or
    the first line being made) may see damage that is gone a moment later:
    it looks once more, and only damage seen twice is an unknown order."""
    append(log, bump("a"))
    real = reader._read_once
    calls = []

    def damaged_first(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise logread.Damage(str(log), "not what it was a moment ago")
        return real(*args, **kwargs)

    monkeypatch.setattr(reader, "_read_once", damaged_first)
    assert reader.read(str(log)).seq == 1 and len(calls) == 2

    calls.clear()

    def damaged_always(*args, **kwargs):
        calls.append(1)
        raise logread.Damage(str(log), "damaged for good")

    monkeypatch.setattr(reader, "_read_once", damaged_always)
    with pytest.raises(logread.Damage):
        reader.read(str(log))
    assert len(calls) == 2

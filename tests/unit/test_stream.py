"""The line-stream core of the audit (storm_queue.store.directory.log.stream) and its public
face ``verify.check_lines``: the quick path (one parse, checks compiled per
action) answers exactly what the plain checks (``framing.decode``, then seq
and the chain) answer, for every line a writer makes and for every kind of
damage; the stream audit names the same first bad line as ``verify`` does
for a file of the same bytes; memory stays flat in the number of lines.
No timing is asserted here (bench/verify.py measures it)."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from storm_queue.core import fold
from storm_queue.core import stream
from storm_queue.store.directory.log import audit, reader
from storm_queue.core import verify
from storm_queue.core import logread
from storm_queue.core import framing

AT = "2024-05-01T12:00:00.123456Z"
BY = "operator:alice"
DIGEST = "ab" * 32


def bump(slug: str, moved: list[str] | None = None, removed: tuple[str, ...] = (), **extra: Any) -> dict:
    return {"action": "bump", "slug": slug, "issue": "1", "deps": [], "moved": [slug] if moved is None else moved,
            "removed": list(removed), **extra}


BODIES: list[dict] = [
    {"action": "push", "slug": "a", "issue": "1", "deps": [], "moved": ["a"], "removed": [], "appended": True},
    bump("b", ["a", "b"], deps=["a"]),
    bump("c", reason="urgent", key="k1", fingerprint="f1"),
    {"action": "unbump", "slug": "c", "moved": [], "removed": ["c"], "reason": "not now"},
    {"action": "refused", "requested": "bump", "slug": "nope", "code": "unknown_slug", "message": "no lane nope",
     "authorised": True},
    {"action": "refused", "requested": "push", "slug": None, "code": "busy", "message": "m", "authorised": False},
    bump("b", noop="b is already named"),
    {"action": "claim", "slug": "a", "issue": "1", "holder": "runner-1", "token": 1, "ttl": 60,
     "expires": "2024-05-01T12:01:00.123456Z", "attempt": 1},
    {"action": "renew", "slug": "a", "token": 1, "ttl": 60, "expires": "2024-05-01T12:02:00.123456Z"},
    {"action": "finish", "slug": "a", "token": 1, "result": "ok", "note": "done"},
    {"action": "claim", "slug": "b", "issue": "2", "holder": "runner-2", "token": 2, "ttl": 60,
     "expires": "2024-05-01T12:01:00.123456Z", "attempt": 1},
    {"action": "expire", "slug": "b", "token": 2, "expired": "2024-05-01T12:01:00.123456Z"},
    {"action": "recover", "slug": "b", "token": None, "marker": False},
    {"action": "quarantine", "slug": "b", "attempts": 3, "budget": 3},
    {"action": "unpark", "slug": "b", "reason": "fixed"},
    {"action": "schedule", "slug": "b", "not_before": "2024-05-02T00:00:00.000000Z"},
    {"action": "schedule", "slug": "b", "not_before": None},
    bump("d", not_before="2024-05-03T00:00:00.000000Z", something_new=[1, {"x": 2}]),
    {"action": "repair", "torn": 10, "side": "priority.log.torn-1"},
    {"action": "reset", "reason": "disk trouble", "abandons": 5000},
]


def frame(bodies: list[dict], change: dict[int, Callable[[dict], bytes]] | None = None) -> list[bytes]:
    """The lines of a log of ``bodies``, chained as the writer chains them;
    ``change`` gives, by 0-based index, the bytes written instead of the
    event's own line (the lines after it chain to those bytes)."""
    out, prev = [], None
    for i, body in enumerate(bodies):
        event = {"v": 1, "seq": i + 1, "at": AT, "action": body["action"], "by": BY, "prev": prev}
        event.update((k, v) for k, v in body.items() if k != "action")
        line = (change or {}).get(i, framing.encode)(event)
        prev = hashlib.sha256(line).hexdigest()
        out.append(line)
    return out


def dump(event: dict, **kw: Any) -> bytes:
    return (json.dumps(event, **kw) + "\n").encode()


def with_(**fields: Any) -> Callable[[dict], bytes]:
    return lambda e: framing.encode({**e, **fields})


def without(name: str) -> Callable[[dict], bytes]:
    return lambda e: framing.encode({k: v for k, v in e.items() if k != name})


def raw(text: bytes) -> Callable[[dict], bytes]:
    return lambda e: text


def reordered(e: dict) -> bytes:
    return framing.encode(dict(reversed(list(e.items()))))


# Each changes line 3 (index 2) of BODIES' log, or the line of its own index.
CHANGES: dict[str, tuple[int, Callable[[dict], bytes]]] = {
    # lines decode accepts, which the quick path must take or hand on
    "spaces": (2, lambda e: dump(e)),
    "key order": (2, reordered),
    "escaped name": (2, lambda e: framing.encode(e).replace(b'"slug":"c"', b'"slug":"\\u0063"')),
    "text not ASCII": (3, lambda e: dump({**e, "reason": "caf\u00e9"}, ensure_ascii=False)),
    "a carriage return between fields": (2, lambda e: framing.encode(e).replace(b',"by"', b',\r"by"')),
    "a field repeated": (2, lambda e: framing.encode(e).replace(b'{"v":1,', b'{"v":2,"v":1,')),
    "an unknown field": (2, with_(extra={"nested": [1, 2]})),
    "NaN in an unknown field": (2, lambda e: framing.encode({**e, "f": 1})[:-2] + b',"g":NaN}\n'),
    "a long name": (2, lambda e: framing.encode(e).replace(b'"slug":"c"', b'"slug":"' + b"c" * 200 + b'"')),
    # damage
    "version 2": (2, with_(v=2)),
    "version true": (2, with_(v=True)),
    "version 1.0": (2, lambda e: framing.encode(e).replace(b'"v":1,', b'"v":1.0,')),
    "seq as text": (2, with_(seq="3")),
    "seq 3.0": (2, lambda e: framing.encode(e).replace(b'"seq":3,', b'"seq":3.0,')),
    "seq true on line 1": (0, with_(seq=True)),
    "seq skips": (2, with_(seq=4)),
    "at a number": (2, with_(at=5)),
    "unknown action": (2, with_(action="bumpp")),
    "action a list": (2, with_(action=["bump"])),
    "by null": (2, with_(by=None)),
    "slug not a name": (2, with_(slug="a..b")),
    "slug empty": (2, with_(slug="")),
    "slug too long": (2, lambda e: framing.encode(e).replace(b'"slug":"c"', b'"slug":"' + b"c" * 201 + b'"')),
    "slug a list": (2, with_(slug=["c"])),
    "moved holds a number": (2, with_(moved=["c", 1])),
    "moved text": (2, with_(moved="c")),
    "moved nested": (2, with_(moved=[["c"]])),
    "deps missing": (2, without("deps")),
    "prev missing": (2, without("prev")),
    "prev short": (2, with_(prev="abc")),
    "prev a number": (2, with_(prev=7)),
    "prev of another line": (2, with_(prev=DIGEST)),
    "prev null after line 1": (2, with_(prev=None)),
    "token 0": (7, with_(token=0)),
    "token true": (7, with_(token=True)),
    "result maybe": (9, with_(result="maybe")),
    "not_before a number": (15, with_(not_before=5)),
    "reason a number": (3, with_(reason=5)),
    "noop a list": (6, with_(noop=["x"])),
    "key null": (2, with_(key=None)),
    "marker missing": (12, without("marker")),
    "an object over two lines": (2, lambda e: framing.encode(e).replace(b',"by"', b',\n"by"')),
    "trailing garbage": (2, lambda e: framing.encode(e)[:-1] + b" x\n"),
    "two objects": (2, lambda e: framing.encode(e)[:-1] + framing.encode(e)),
    "an empty line": (2, raw(b"\n")),
    "a list": (2, raw(b"[]\n")),
    "null": (2, raw(b"null\n")),
    "not JSON": (2, raw(b"{nope\n")),
    "a byte that is not UTF-8": (2, lambda e: framing.encode(e).replace(b'"c"', b'"\xff"', 1)),
    "a leading space": (2, lambda e: b" " + framing.encode(e)),
    "a byte order mark": (2, lambda e: b"\xef\xbb\xbf" + framing.encode(e)),
    "a huge number": (2, lambda e: framing.encode(e).replace(b'"seq":3,', b'"seq":' + b"9" * 5000 + b",")),
}


def outcome(data: bytes, quick: bool, block: int | None = None) -> Any:
    """What LineCheck makes of ``data``: the damage, or what it folded."""
    check = stream.LineCheck(quick=quick, keep_events=True)
    try:
        if block is None:
            check.block(data)
        else:  # in blocks of about ``block`` bytes, cut after a newline
            start = 0
            while start < len(data):
                cut = data.find(b"\n", start + block) + 1 or len(data)
                check.block(data[start:cut])
                start = cut
    except stream.Bad as exc:
        return ("bad", exc.what, exc.line, exc.offset, check.seq, check.offset, check.digest)
    return ("sound", check.seq, check.offset, check.digest, check.state(), check.events)


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_the_quick_path_answers_what_the_plain_checks_answer(name: str) -> None:
    index, change = CHANGES[name]
    data = b"".join(frame(BODIES, {index: change}))
    plain = outcome(data, quick=False)
    assert outcome(data, quick=True) == plain
    assert outcome(data, quick=True, block=300) == plain  # lines split over blocks as a reader reads them


def test_a_sound_log_of_every_action_is_sound_on_both_paths() -> None:
    data = b"".join(frame(BODIES))
    got = outcome(data, quick=True)
    assert got == outcome(data, quick=False)
    assert got[0] == "sound" and got[1] == len(BODIES)
    assert got[4] == fold.replay(json.loads(line) for line in data.splitlines())


def test_quick_checks_accept_only_what_decode_accepts() -> None:
    """Each field of each action given a value of every JSON kind: the
    compiled check says yes only when decode does (and the chain's seq and
    prev are the line's), and it says yes to every line a writer writes."""
    values = [None, True, False, 0, 1, 2, -1, 1.5, "", "a", "ok", "a..b", "x" * 201, [], ["a"], ["a", 1], [["a"]],
              {}, {"a": 1}, DIGEST]
    for n, line in enumerate(frame(BODIES), start=1):
        event = json.loads(line)
        known: set[str] = set()
        assert framing.QUICK[event["action"]](event, known, event["seq"], event["prev"]), n
        for name in [*event, "extra", "reason", "noop", "key", "note", "not_before", "fingerprint"]:
            for value in values:
                changed = {**event, name: value}
                try:
                    framing.decode(framing.encode(changed))
                    accepted = True
                except framing.Malformed:
                    accepted = False
                try:
                    fits = framing.QUICK[changed["action"]](changed, known, event["seq"], event["prev"])
                except Exception:  # noqa: BLE001 -- a no, said by raising
                    fits = False
                assert accepted or not fits, (n, name, value)
                if accepted and name in ("seq", "prev") and value != event[name]:
                    assert not fits, (n, name, value)  # the chain's, not the line's


def test_check_lines_names_what_verify_names_for_a_file(tmp_path: Path) -> None:
    """The stream audit and the file audit of the same bytes agree, sound or not."""
    cases = {name: CHANGES[name] for name in ("unknown action", "prev of another line", "seq skips", "slug not a name",
                                                "not JSON", "spaces", "an unknown field")}
    for name, (index, change) in cases.items():
        lines = frame(BODIES, {index: change})
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}" / "priority.log"
        path.parent.mkdir()
        path.write_bytes(b"".join(lines))
        last = hashlib.sha256(lines[-1]).hexdigest()
        Path(reader.witness_path(str(path))).write_text(json.dumps(
            {"log": "priority.log", "length": len(b"".join(lines)), "seq": len(lines), "digest": last, "at": AT}))
        from_file, from_stream = audit.audit(str(path)), verify.check_lines(iter(lines), log="table")
        assert from_stream.problem == from_file.problem, name
        assert (from_stream.lines, from_stream.length, from_stream.lane, from_stream.named) == \
               (from_file.lines, from_file.length, from_file.lane, from_file.named), name
        if from_file.sound:
            assert from_stream.state == from_file.state and from_stream.digest == last


def test_check_lines_reports_instead_of_raising() -> None:
    lines = frame(BODIES)
    good = verify.check_lines(lines, log="priority_log table")
    assert good.sound and good.log == "priority_log table" and good.lines == len(BODIES)
    assert good.length == sum(map(len, lines)) and good.digest == hashlib.sha256(lines[-1]).hexdigest()
    assert good.state == fold.replay(json.loads(line) for line in lines)
    assert verify.check_lines([]).sound and verify.check_lines([]).lines == 0
    missing = verify.check_lines(lines[:3] + lines[4:])
    assert missing.problem == verify.Problem("line 4 has seq 5, expected 4", 4, sum(map(len, lines[:3])))
    assert missing.lines == 0 and missing.state == fold.EMPTY  # nothing else is filled in, as for a file
    unended = verify.check_lines(lines[:2] + [lines[2][:-1]] + lines[3:])
    assert unended.problem == verify.Problem("line 3 is malformed: it is not one line ending in a newline", 3,
                                            sum(map(len, lines[:2])))
    two = verify.check_lines([lines[0] + lines[1]])
    assert two.problem is not None and two.problem.line == 1 and "not one line" in two.problem.what
    assert verify.check_lines([bytearray(line) for line in lines]).state == good.state
    seen: list[int] = []
    verify.check_lines(lines, progress=seen.append)
    assert seen[-1] == good.length


def test_check_lines_first_line_must_start_the_chain() -> None:
    lines = frame(BODIES)
    out = verify.check_lines(lines[1:])
    assert out.problem == verify.Problem("line 1 has seq 2, expected 1", 1, 0)


def generated(count: int) -> Iterator[bytes]:
    """``count`` chained lines, made as they are consumed."""
    prev = None
    for i in range(count):
        body = BODIES[i % 4]
        event = {"v": 1, "seq": i + 1, "at": AT, "action": body["action"], "by": BY, "prev": prev}
        event.update((k, v) for k, v in body.items() if k != "action")
        line = framing.encode(event)
        prev = hashlib.sha256(line).hexdigest()
        yield line


def peak_while_checking(count: int) -> int:
    tracemalloc.start()
    try:
        out = verify.check_lines(generated(count))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.sound and out.lines == count
    return peak


def test_memory_is_flat_in_the_number_of_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines are checked a block at a time (a small block here, so that both
    runs hold many): the peak does not grow with the number of lines."""
    monkeypatch.setattr(stream, "BLOCK", 64 << 10)
    small, large = peak_while_checking(3_000), peak_while_checking(12_000)  # about 0.7 MB and 3 MB of lines
    assert large < small * 1.2 + (64 << 10), (small, large)


def peak_while_auditing(directory: Path, count: int) -> int:
    """The peak memory of the audit of a log file of ``count`` lines (and its
    witness), as ``verify`` runs it."""
    directory.mkdir()
    log = directory / "priority.log"
    length, seq, last = 0, 0, None
    with open(log, "wb") as f:
        for line in generated(count):
            f.write(line)
            length, seq, last = length + len(line), seq + 1, line
    witness = {"log": "priority.log", "length": length, "seq": seq, "digest": framing.digest(last), "at": AT}
    (directory / ".priority.log.witness").write_text(json.dumps(witness) + "\n")
    tracemalloc.start()
    try:
        out = audit.audit(str(log))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.sound and out.lines == count and out.length == length, out.problem
    return peak


def test_the_audit_of_a_file_is_flat_in_its_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``verify`` of a log file reads it a block at a time and keeps no line
    it has checked: ten times the lines, about the same peak."""
    monkeypatch.setattr(reader, "BLOCK", 64 << 10)
    small, large = peak_while_auditing(tmp_path / "small", 2_000), peak_while_auditing(tmp_path / "large", 20_000)
    assert large < small * 1.2 + (64 << 10), (small, large)


def read_both(path: Path) -> list[Any]:
    """What a read of ``path`` finds on the quick path and on the plain one."""
    out = []
    for quick in (True, False):
        try:
            got = reader.read(str(path), use_checkpoint=False, keep_events=True, quick=quick)
            out.append((got.seq, got.digest, got.length, got.torn, got.state, got.events, got.warnings))
        except logread.Damage as exc:
            out.append((exc.what, exc.line, exc.offset))
    return out


@pytest.mark.parametrize(("witnessed", "tail"), [
    (None, b""), (5, b""), (9, b""), (None, b'{"v":1,"se'), (12, b'{"v":1,"se'), (None, b"garbage"),
])
@pytest.mark.parametrize("cut", [0, -7, 3])
def test_the_reader_in_small_blocks_finds_what_the_plain_read_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     witnessed: int | None, tail: bytes,
                                                                     cut: int) -> None:
    """Blocks much smaller than the log, the witnessed length at a line's end,
    inside a line (``cut``) or past the end, a torn tail: the same answers."""
    monkeypatch.setattr(reader, "BLOCK", 500)
    lines = frame(BODIES)
    path = tmp_path / "priority.log"
    path.write_bytes(b"".join(lines) + tail)
    upto = len(lines) if witnessed is None else witnessed
    length = sum(map(len, lines[:upto])) + (cut if upto < len(lines) or cut <= 0 else 0)
    Path(reader.witness_path(str(path))).write_text(json.dumps(
        {"log": "priority.log", "length": length, "seq": upto, "digest": hashlib.sha256(lines[upto - 1]).hexdigest(),
         "at": AT}))
    quick, plain = read_both(path)
    assert quick == plain

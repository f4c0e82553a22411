"""The checkpoint (storm_queue.store.directory.log.checkpoint): the fold from any valid
checkpoint equals the fold of the whole log; a checkpoint that does not
describe the log is ignored; writers refresh it; deleting it changes
nothing but speed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.service import storm as desk
from storm_queue.core import fold
from storm_queue.store.directory.log import checkpoint, reader, writer
from storm_queue.core import logread
from storm_queue.core import framing
from storm_queue.core import statebody
from storm_queue.store.directory.log.checkpoint import Checkpoint, checkpoint_path, line_ending_at
from storm_queue.core.framing import digest
from tests.conftest import make_storm

AT = "2024-05-01T12:00:00.123456Z"
SLUGS = ("a", "b", "c", "d", "e")


def write_log(path: Path, bodies: list[dict], batch: int = 7) -> list[dict]:
    """Append ``bodies`` through the real reader and writer, ``batch`` at a time."""
    events: list[dict] = []
    for i in range(0, len(bodies), batch):
        events += writer.append(reader.read(str(path)), bodies[i:i + batch], AT, "operator:alice")
    return events


def line_ends(path: Path) -> list[int]:
    ends, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        offset += len(line)
        ends.append(offset)
    return ends


def put(path: Path, events: list[dict], k: int) -> Checkpoint:
    """A true checkpoint after the first ``k`` lines."""
    data = path.read_bytes()
    end = line_ends(path)[k - 1]
    last = data[:end].splitlines(keepends=True)[-1]
    cp = Checkpoint(end, k, digest(last), fold.replay(events[:k]))
    checkpoint.save(str(path), cp)
    return cp


def full(path: Path) -> logread.LogRead:
    return reader.read(str(path), use_checkpoint=False)


body = st.one_of(
    st.builds(lambda s, m, r, noop, reason: {"action": "bump", "slug": s, "issue": "1", "deps": [], "moved": m, "removed": r,
                                               **({"noop": "done"} if noop else {}), **({"reason": reason} if reason else {})},
              st.sampled_from(SLUGS), st.lists(st.sampled_from(SLUGS), max_size=3), st.lists(st.sampled_from(SLUGS), max_size=2),
              st.booleans(), st.text(max_size=5)),
    st.builds(lambda s, m, r, appended: {"action": "push", "slug": s, "issue": "2", "deps": [], "moved": m, "removed": r,
                                         "appended": appended},
              st.sampled_from(SLUGS), st.lists(st.sampled_from(SLUGS), max_size=3), st.lists(st.sampled_from(SLUGS), max_size=2),
              st.booleans()),
    st.builds(lambda s, r: {"action": "unbump", "slug": s, "moved": [], "removed": r},
              st.sampled_from(SLUGS), st.lists(st.sampled_from(SLUGS), max_size=3)),
    st.builds(lambda s: {"action": "refused", "requested": "bump", "slug": s, "code": "unknown_slug",
                         "message": "no", "authorised": True}, st.text(max_size=4)),
    st.builds(lambda a, s, noop: {"action": a, "slug": s, "reason": "r", **({"noop": "n"} if noop else {})},
              st.sampled_from(("hold", "unhold")), st.sampled_from(SLUGS), st.booleans()),  # issue 33 item 3
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(body, min_size=1, max_size=40), data=st.data())
def test_the_fold_from_any_valid_checkpoint_equals_the_full_fold(tmp_path_factory, bodies, data) -> None:
    path = tmp_path_factory.mktemp("cp") / "priority.log"
    events = write_log(path, bodies, batch=data.draw(st.integers(1, 9)))
    whole = full(path)
    assert whole.state == fold.replay(events)
    for k in data.draw(st.lists(st.integers(1, len(events)), min_size=1, max_size=4)):
        put(path, events, k)
        fast = reader.read(str(path))
        assert fast.checkpoint_seq == k  # the read really started there
        assert (fast.state, fast.seq, fast.digest, fast.length) == (whole.state, whole.seq, whole.digest, whole.length)
        os.unlink(checkpoint_path(str(path)))
        assert reader.read(str(path)).state == whole.state  # deleting it changes nothing but speed


def test_marks_and_every_lane_field_survive_the_file(tmp_path: Path) -> None:
    path = tmp_path / "priority.log"
    events = write_log(path, [{"action": "bump", "slug": "a", "issue": "1", "deps": [], "moved": ["b", "a"],
                               "removed": [], "reason": "out\nage \u2028"}])
    cp = put(path, events, 1)
    got, why = checkpoint.examine(str(path), os.open(path, os.O_RDONLY), reader.read_witness(str(path)))
    assert why is None and got == cp
    assert got.state.marks["a"].reason == "out\nage \u2028"
    assert isinstance(got.state.lane, tuple) and got.state.lane == ("b", "a")


def test_a_mark_many_slugs_share_is_kept_once(tmp_path: Path) -> None:
    path = tmp_path / "priority.log"
    moved = [f"s{i}" for i in range(1000)]
    events = write_log(path, [{"action": "bump", "slug": "s999", "issue": "1", "deps": [], "moved": moved, "removed": []}])
    put(path, events, 1)
    body = json.loads(Path(checkpoint_path(str(path))).read_bytes())
    assert [row["@"] for row in body["records"]] == ["Mark", "LaneState"]
    assert reader.read(str(path)).state == full(path).state


def test_references_out_of_the_table_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "priority.log"
    events = write_log(path, [{"action": "bump", "slug": "a", "issue": "1", "deps": [], "moved": ["a"], "removed": []}])
    put(path, events, 1)
    body = json.loads(Path(checkpoint_path(str(path))).read_bytes())
    body["records"][0], body["records"][1] = body["records"][1], body["records"][0]  # a record refers to a later one
    body["state"] = {"@ref": 0}
    Path(checkpoint_path(str(path))).write_text(json.dumps(body))
    ignored(path, "its state cannot be read")


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, list[dict]]:
    path = tmp_path / "priority.log"
    bodies = [{"action": "bump", "slug": s, "issue": "1", "deps": [], "moved": [s], "removed": []} for s in "abcdefgh"]
    bodies += [{"action": "unbump", "slug": s, "moved": [], "removed": [s]} for s in "ace"]
    return path, write_log(path, bodies)


def ignored(path: Path, why_part: str) -> None:
    """The checkpoint is not used, says why, and the read equals the full replay."""
    wit = reader.read_witness(str(path))
    fd = os.open(path, os.O_RDONLY)
    try:
        cp, why = checkpoint.examine(str(path), fd, wit)
    finally:
        os.close(fd)
    assert cp is None and why_part in (why or "")
    got, whole = reader.read(str(path)), full(path)
    assert got.checkpoint_seq == 0
    assert (got.state, got.seq, got.digest, got.warnings) == (whole.state, whole.seq, whole.digest, whole.warnings)


def rewrite(path: Path, **changes) -> None:
    cpath = checkpoint_path(str(path))
    body = json.loads(Path(cpath).read_bytes())
    body.update(changes)
    Path(cpath).write_text(json.dumps(body))


def test_a_wrong_digest_is_ignored(logged) -> None:
    path, events = logged
    put(path, events, 5)
    rewrite(path, digest=digest(b"another line\n"))
    ignored(path, "another digest")


def test_a_forged_seq_is_ignored(logged) -> None:
    path, events = logged
    put(path, events, 5)
    rewrite(path, seq=6)
    ignored(path, "seq 5, not 6")


def test_an_offset_mid_line_is_ignored(logged) -> None:
    path, events = logged
    cp = put(path, events, 5)
    rewrite(path, offset=cp.offset - 3)
    ignored(path, "no line of the log ends")


def test_an_offset_past_the_witness_is_ignored(logged) -> None:
    """Lines a writer wrote but never witnessed: a checkpoint there is not trusted."""
    path, events = logged
    wit = reader.read_witness(str(path))
    log = reader.read(str(path))
    framed = framing.frame([{"action": "unbump", "slug": "b", "moved": [], "removed": ["b"]}], log.seq, log.digest, AT, "operator:alice")
    with open(path, "ab") as f:
        f.write(framed[0][1])
    checkpoint.save(str(path), Checkpoint(wit.length + len(framed[0][1]), log.seq + 1, digest(framed[0][1]),
                                          fold.apply(log.state, framed[0][0])))
    ignored(path, "past the witnessed length")


def test_an_offset_past_the_end_is_ignored(logged) -> None:
    path, events = logged
    cp = put(path, events, len(events))
    with open(path, "r+b") as f:  # a log cut short: damage, found by the full replay
        f.truncate(cp.offset - 1)
    with pytest.raises(logread.Damage):
        reader.read(str(path))


def test_garbage_a_link_a_directory_and_a_shared_file_are_ignored(logged, tmp_path: Path) -> None:
    path, events = logged
    cpath = Path(checkpoint_path(str(path)))
    cpath.write_bytes(b"\x00garbage{")
    ignored(path, "not JSON")
    cpath.write_text('{"v": %d}' % statebody.FORMAT)  # this format, but written by no storm-queue
    ignored(path, "written by storm-queue")
    cpath.unlink()
    put(path, events, 4)
    real = tmp_path / "elsewhere"
    cpath.rename(real)
    cpath.symlink_to(real)
    ignored(path, "cannot be opened")
    cpath.unlink()
    cpath.mkdir()
    ignored(path, "not a regular file")
    cpath.rmdir()
    put(path, events, 4)
    os.chmod(cpath, 0o666)
    ignored(path, "writable by others than its owner")
    os.chmod(cpath, 0o644)
    assert reader.read(str(path)).checkpoint_seq == 4


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another account needs root (CI runs as root)")
def test_a_checkpoint_owned_by_another_account_is_ignored(logged) -> None:
    path, events = logged
    put(path, events, 4)
    os.chown(checkpoint_path(str(path)), 65534, 65534)
    ignored(path, "not owned by the log's owner")


def test_another_version_or_format_of_the_state_is_ignored(logged) -> None:
    path, events = logged
    put(path, events, 4)
    rewrite(path, storm_queue="0.0.1")
    ignored(path, "0.0.1")
    put(path, events, 4)
    body = json.loads(Path(checkpoint_path(str(path))).read_bytes())
    del body["records"][body["state"]["@ref"]]["marks"]  # a state written before a field was added
    Path(checkpoint_path(str(path))).write_text(json.dumps(body))
    ignored(path, "fields of LaneState differ")
    put(path, events, 4)
    rewrite(path, log="other.log")
    ignored(path, "other.log")


def test_at_the_witness_it_must_be_the_witnessed_line(logged) -> None:
    path, events = logged
    put(path, events, len(events))
    rewrite(path, seq=1)
    ignored(path, "another line")


def test_line_ending_at_reads_backwards(tmp_path: Path) -> None:
    f = tmp_path / "f"
    long = b"x" * 20000 + b"\n"
    f.write_bytes(b"one\n" + long + b"three\n")
    fd = os.open(f, os.O_RDONLY)
    try:
        assert line_ending_at(fd, 4) == b"one\n"
        assert line_ending_at(fd, 4 + len(long)) == long
        assert line_ending_at(fd, 4 + len(long) + 6) == b"three\n"
        assert line_ending_at(fd, 3) is None
        assert line_ending_at(fd, 0) is None
    finally:
        os.close(fd)
    f.write_bytes(b"y" * (checkpoint.MAX_LINE + 10) + b"\n")
    fd = os.open(f, os.O_RDONLY)
    try:
        assert line_ending_at(fd, checkpoint.MAX_LINE + 11) is None
    finally:
        os.close(fd)


# -- writers refresh it -------------------------------------------------


def test_writers_refresh_it_every_EVERY_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "EVERY", 3)
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\nc 3\n")
    storm = desk.Storm(str(root), env={})
    log = str(root / "priority.log")
    for n in range(1, 8):
        storm.bump("b") if n % 2 else storm.unbump("b")
        seen = reader.read(log)
        assert seen.checkpoint_seq == (n // 3) * 3
        assert seen.state == full(root / "priority.log").state
    assert oct(os.stat(checkpoint_path(log)).st_mode & 0o777) == "0o644"


def test_a_checkpoint_that_cannot_be_written_does_not_fail_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "EVERY", 1)
    root = make_storm(tmp_path / "storm", "a 1\n")
    os.mkdir(checkpoint_path(str(root / "priority.log")))  # a rename over it fails
    out = desk.Storm(str(root), env={}).bump("a")
    assert out.outcome == "done" and out.recorded
    assert reader.read(str(root / "priority.log")).state.lane == ("a",)


def test_reset_moves_the_checkpoint_aside_with_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "EVERY", 1)
    root = make_storm(tmp_path / "storm", "a 1\n")
    storm = desk.Storm(str(root), env={})
    storm.bump("a")
    assert os.path.exists(checkpoint_path(str(root / "priority.log")))
    with open(root / "priority.log", "ab") as f:
        f.write(b"damage\n")
    assert storm.reset("disk trouble").outcome == "done"
    assert [p for p in os.listdir(root) if p.startswith(".priority.log.checkpoint.abandoned-")]
    fresh = reader.read(str(root / "priority.log"))  # the new log's own checkpoint, at its reset line
    assert fresh.seq == 1 and fresh.checkpoint_seq == 1 and fresh.state == fold.LaneState(token_floor=fresh.state.token_floor, requests={"reset": {"done": 1}})
    assert fresh.state.token_floor > 0


def test_a_reader_racing_a_refresh_still_starts_from_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer appends, re-witnesses and refreshes the checkpoint between the
    reader's look at the witness and at the log: the checkpoint the reader
    loaded first still describes the log, so it folds a few lines, not all."""
    monkeypatch.setattr(checkpoint, "EVERY", 1)
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    storm = desk.Storm(str(root), env={})
    for i in range(60):
        storm.bump("a") if i % 2 == 0 else storm.unbump("a")
    log = str(root / "priority.log")
    real_witness, real_decode = reader.read_witness, reader.decode
    racing, decoded = [True], [0]

    def witness_then_a_writer(path: str):
        w = real_witness(path)
        if racing[0]:
            racing[0] = False
            storm.bump("b")  # appends, re-witnesses, refreshes the checkpoint past w
        return w

    def counting(line: bytes):
        decoded[0] += 1
        return real_decode(line)

    monkeypatch.setattr(reader, "read_witness", witness_then_a_writer)
    monkeypatch.setattr(reader, "decode", counting)
    got = reader.read(log)
    monkeypatch.setattr(reader, "decode", real_decode)
    assert decoded[0] < 10  # each of the two looks folded from a checkpoint
    assert got.seq == 61 and got.state == full(root / "priority.log").state

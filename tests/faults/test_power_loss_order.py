"""Power-loss ordering (issue 5 item 2): every write, fsync and rename a
request makes, recorded by wrapping the os calls, comes in the order that
keeps the log whole across a power cut. The log line is written and fsynced
before the witness is replaced; the witness's temporary file is fsynced
before its rename; the directory is fsynced after every rename and after the
log (or ``queue.txt``, or a side file) is first created; and all of it
happens before the request returns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storm_queue.service.storm import Storm
from tests.conftest import make_storm
from tests.faults.oscalls import Tracer

LOG, WITNESS = "priority.log", ".priority.log.witness"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}


def _traced(monkeypatch, root: Path, ask) -> Tracer:
    storm = Storm(str(root), env=_env())
    t = Tracer(monkeypatch)
    t.on = True
    out = ask(storm)
    t.stop()
    assert out.recorded, out.message
    return t


def is_(op: str, name: str, is_dir: bool = False):
    return lambda c: c.op == op and c.name == name and c.is_dir == is_dir


def _dir_fsync_after(t: Tracer, i: int, directory: str) -> int:
    j = t.index(lambda c: c.op == "fsync" and c.is_dir and os.path.samefile(c.path, directory), i + 1)
    assert j > i, f"no fsync of {directory} after call {i} ({t.calls[i]}):\n{t}"
    return j


def check_log_then_witness(t: Tracer, root: Path) -> None:
    """The promises every append keeps, whatever else it did."""
    writes = [i for i, c in enumerate(t.calls) if is_("write", LOG)(c)]
    assert writes, f"no write to the log:\n{t}"
    last_write = writes[-1]
    fsync = t.index(is_("fsync", LOG), last_write + 1)
    assert fsync > last_write, f"the log is not fsynced after its line:\n{t}"
    renames = [i for i, c in enumerate(t.calls) if c.op == "rename" and os.path.basename(c.dest) == WITNESS]
    final = renames[-1]
    assert final > fsync, f"the witness was replaced before the log's line was durable:\n{t}"
    tmp = t.calls[final].path
    tmp_write = max(i for i, c in enumerate(t.calls[:final]) if c.op == "write" and c.path == tmp)
    tmp_fsync = t.index(lambda c: c.op == "fsync" and c.path == tmp, tmp_write + 1)
    assert tmp_write < tmp_fsync < final, f"the witness's temporary file is not fsynced before its rename:\n{t}"
    # every rename is followed by an fsync of its directory
    for i, c in enumerate(t.calls):
        if c.op == "rename":
            _dir_fsync_after(t, i, os.path.dirname(c.dest))
    # every file created (O_CREAT on a new name) is followed by an fsync of its directory,
    # except the lock (whose loss loses nothing) and progress.log (a courtesy, not a record)
    for i, c in enumerate(t.calls):
        if c.op == "open" and c.flags & os.O_CREAT and c.flags & os.O_EXCL and ".tmp." not in c.name \
                and c.name not in ("priority.log.lock", "progress.log"):
            _dir_fsync_after(t, i, os.path.dirname(c.path))
    # the request returns at the end of the trace: nothing durable is left for later
    assert t.calls[-1].op in ("close", "write", "open") and not any(
        c.op in ("fsync", "rename") for c in t.calls[_dir_fsync_after(t, final, str(root)) + 1:]
    ), f"durable work after the witness:\n{t}"


def test_a_request_on_a_fresh_storm(monkeypatch, tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\n")
    t = _traced(monkeypatch, root, lambda s: s.bump("b", reason="first"))
    check_log_then_witness(t, root)
    # the witness (length 0) exists, durably, before the log is created
    created = t.index(lambda c: c.op == "open" and c.name == LOG and bool(c.flags & os.O_CREAT))
    first_witness = t.index(lambda c: c.op == "rename" and os.path.basename(c.dest) == WITNESS)
    assert 0 <= first_witness < created, str(t)
    assert _dir_fsync_after(t, first_witness, str(root)) < created, str(t)
    # the new log's directory entry is durable before its first line
    dir_sync = _dir_fsync_after(t, created, str(root))
    assert dir_sync < t.index(is_("write", LOG)), str(t)


def test_a_request_on_a_storm_with_a_log(monkeypatch, tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\n")
    assert Storm(str(root), env=_env()).bump("a").recorded
    t = _traced(monkeypatch, root, lambda s: s.bump("b"))
    check_log_then_witness(t, root)
    assert not any(c.op == "open" and c.name == LOG and c.flags & os.O_CREAT for c in t.calls)


def test_a_recorded_refusal(monkeypatch, tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\n")
    assert Storm(str(root), env=_env()).bump("a").recorded
    t = _traced(monkeypatch, root, lambda s: s.unbump("zz"))
    check_log_then_witness(t, root)


def test_push_makes_queue_txt_durable_before_the_log(monkeypatch, tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\n")
    t = _traced(monkeypatch, root, lambda s: s.push("z", "26", reason="new"))
    check_log_then_witness(t, root)
    q_write = t.index(is_("write", "queue.txt"))
    q_fsync = t.index(is_("fsync", "queue.txt"), q_write + 1)
    assert 0 <= q_write < q_fsync < t.index(is_("write", LOG)), str(t)


def test_settle_makes_a_ledger_it_creates_durable_before_the_log(monkeypatch, tmp_path):
    """A file the request creates (here the first integrated.txt; a storm
    whose queue.txt is gone answers exit 3, and push never makes one) is
    in its directory, durably, before the log's line."""
    root = make_storm(tmp_path / "storm", "a 1\n")
    (root / "integrated.txt").unlink(missing_ok=True)
    t = _traced(monkeypatch, root, lambda s: s.settle("a", "integrated"))
    check_log_then_witness(t, root)
    created = t.index(lambda c: c.op == "open" and c.name == "integrated.txt")
    assert created < t.index(is_("fsync", "integrated.txt"), created) < t.index(is_("write", LOG)), str(t)
    assert _dir_fsync_after(t, created, str(root)) < t.index(is_("write", LOG)), str(t)


def test_a_torn_tail_is_kept_durably_before_it_is_cut(monkeypatch, tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert Storm(str(root), env=_env()).bump("a").recorded
    with open(root / LOG, "ab") as f:
        f.write(b'{"v":1,"seq":2,"ac')
    t = _traced(monkeypatch, root, lambda s: s.bump("b"))
    check_log_then_witness(t, root)
    side = t.index(lambda c: c.op == "open" and ".torn-" in c.name)
    side_name = t.calls[side].name
    side_fsync = t.index(lambda c: c.op == "fsync" and c.name == side_name, side)
    cut = t.index(is_("ftruncate", LOG))
    assert 0 <= side < side_fsync < _dir_fsync_after(t, side, str(root)) < cut, str(t)
    assert cut < t.index(is_("fsync", LOG), cut) < t.index(is_("write", LOG)), str(t)


def test_reset_sets_the_old_log_aside_durably_before_the_new_one(monkeypatch, tmp_path):
    root = make_storm(tmp_path / "storm", "a 1\n")
    assert Storm(str(root), env=_env()).bump("a").recorded
    (root / WITNESS).unlink()
    t = _traced(monkeypatch, root, lambda s: s.reset("lost the witness"))
    check_log_then_witness(t, root)
    aside = t.index(lambda c: c.op == "rename" and c.name == LOG)
    created = t.index(lambda c: c.op == "open" and c.name == LOG and bool(c.flags & os.O_CREAT))
    assert aside < _dir_fsync_after(t, aside, str(root)) < created, str(t)


def test_the_trace_is_real(monkeypatch, tmp_path):
    """The checks above can fail: a writer that replaced the witness before
    fsyncing its line is caught."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    assert Storm(str(root), env=_env()).bump("a").recorded
    t = _traced(monkeypatch, root, lambda s: s.bump("b"))
    bad = Tracer.__new__(Tracer)
    calls = list(t.calls)
    fsync = next(i for i, c in enumerate(calls) if c.op == "fsync" and c.name == LOG)
    calls.append(calls.pop(fsync))  # the log's fsync moved to the very end
    bad.calls = calls
    with pytest.raises(AssertionError):
        check_log_then_witness(bad, root)

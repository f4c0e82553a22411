"""I/O errors (issue 5 item 3): a full disk (ENOSPC) or a failing one (EIO)
at each durable step of a request in turn, once or from that step on. The
request fails with a typed error, exit 4, and a message that says truthfully
what is on disk (nothing recorded; recorded but not witnessed; or, when the
disk fails even to cut a line back, that it cannot tell). It leaves nothing a
later request misreads: once the fault clears, the storm lists, the next
request succeeds, and the log verifies. A failed fsync of the log is never
taken as if it had worked: that line is never witnessed by its writer, and
its request is never acknowledged."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from storm_queue.store.directory import queuefile
from storm_queue.service.storm import Storm
from storm_queue.core.errors import RecordFailed, UnknownOrder
from storm_queue.store.directory.log import reader
from tests.conftest import make_storm
from tests.faults.crash_harness import _check_log
from tests.faults.oscalls import Tracer

LOG, WITNESS = "priority.log", ".priority.log.witness"
QUEUE = "a 1\nb 2 a\nc 3\n"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}


def _with_log(root: Path) -> None:
    assert Storm(str(root), env=_env()).bump("a", reason="before").recorded


def _torn(root: Path) -> None:
    _with_log(root)
    with open(root / LOG, "ab") as f:
        f.write(b'{"v":1,"seq":2,"act')


def _damaged(root: Path) -> None:
    _with_log(root)
    (root / WITNESS).unlink()


def _cut_short(root: Path) -> None:
    """Three lines, the last cut in half: two verify from line 1."""
    _with_log(root)
    storm = Storm(str(root), env=_env())
    assert storm.bump("b", reason="before").recorded and storm.bump("c", reason="before").recorded
    os.truncate(root / LOG, (root / LOG).stat().st_size - 20)


TOKEN = "the request under test"
SCENARIOS = {
    "bump-on-a-fresh-storm": (lambda root: None, lambda s: s.bump("b", reason=TOKEN)),
    "bump": (_with_log, lambda s: s.bump("c", reason=TOKEN)),
    "push-a-new-lane": (_with_log, lambda s: s.push("z", "26", "c", reason=TOKEN)),
    "recorded-refusal": (_with_log, lambda s: s.unbump("c", reason=TOKEN)),
    "bump-after-a-torn-tail": (_torn, lambda s: s.bump("c", reason=TOKEN)),
    "reset": (_damaged, lambda s: s.reset(TOKEN)),
    "reset-keep-intact": (_cut_short, lambda s: s.reset(TOKEN, keep_intact=True)),  # issue 20 item 4
}


def _counted(root: Path) -> list[dict]:
    """The events readers count now, the torn tail and lines past the witness included."""
    if not (root / LOG).exists():
        return []
    try:
        return reader.read(str(root / LOG), keep_events=True).events or []
    except UnknownOrder:  # only reset's damaged log, still in place when the reset did not happen
        assert not list(root.glob(LOG + ".abandoned-*"))
        return []


def _durable_steps(tmp_path: Path, setup, ask) -> int:
    root = make_storm(tmp_path / "clean", QUEUE)
    setup(root)
    with pytest.MonkeyPatch.context() as mp:
        t = Tracer(mp)
        t.on = True
        ask(Storm(str(root), env=_env()))
        t.stop()
    assert t.durable > 5
    return t.durable


@pytest.mark.parametrize("sticky", [False, True], ids=["once", "from-then-on"])
@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_io_error_at_each_step(tmp_path, scenario, error, sticky):
    setup, ask = SCENARIOS[scenario]
    steps = _durable_steps(tmp_path, setup, ask)
    seen = set()
    for step in range(1, steps + 1):
        where = f"{scenario}: {os.strerror(error)} at durable step {step} of {steps}"
        root = make_storm(tmp_path / f"s{step}", QUEUE)
        setup(root)
        before = _counted(root) if not scenario.startswith("reset") else []  # reset's log is damaged on purpose
        outcome, failure = None, None
        with pytest.MonkeyPatch.context() as mp:
            t = Tracer(mp, fail_at=step, error=error, sticky=sticky)
            t.on = True
            try:
                outcome = ask(Storm(str(root), env=_env()))
            except RecordFailed as exc:
                failure = exc
            finally:
                t.stop()
        failed = next(c for c in t.calls if c.failed)
        where += f" ({failed})\n{t}"

        # what the answer says is what is on disk
        counted = [e for e in _counted(root) if e.get("reason") == TOKEN]
        assert len(counted) <= 1, where
        if failure is not None:
            seen.add(failure.recorded)
            assert failure.exit_code == 4, where
            text = str(failure)
            assert os.strerror(error) in text, where
            if failure.recorded is True:
                assert counted and "recorded but not witnessed" in text and "do not ask again" in text, where
            elif failure.recorded is False:
                assert not counted, where
                assert "did not happen" in text or "without the reset's record" in text, where
            else:
                assert "may or may not" in text, where
        else:
            assert outcome is not None
            assert outcome.code != "storm_unwritable", where
            assert outcome.recorded == bool(counted), where
            if scenario != "recorded-refusal":
                assert outcome.recorded and outcome.outcome == "done", where
            elif not outcome.recorded:
                assert "not recorded" in outcome.message and os.strerror(error) in outcome.message, where

        # a failed fsync of the log is never taken as if it had worked
        if failed.op == "fsync" and failed.name == LOG:
            i = t.calls.index(failed)
            assert not any(c.op == "rename" and os.path.basename(c.dest) == WITNESS for c in t.calls[i:]), where
            if failure is None:
                assert outcome.outcome == "refused" and not outcome.recorded and not counted, where
            else:
                assert failure.recorded is not True, where
                if failure.recorded is False:
                    assert not counted, where

        # nothing a later request misreads: the storm lists, the next request succeeds, the log verifies
        storm = Storm(str(root), env=_env())
        if scenario.startswith("reset") and not list(root.glob(LOG + ".abandoned-*")):
            with pytest.raises(UnknownOrder):  # the reset did not happen: the order is as unknown as before
                storm.listing()
            assert storm.reset(TOKEN, keep_intact=scenario.endswith("intact")).recorded, where
            counted = [e for e in _counted(root) if e.get("reason") == TOKEN]
        storm.listing()
        after = storm.bump("a", reason="after the fault")
        assert after.recorded and after.outcome in ("done", "noop"), where
        events = _check_log(root)
        assert [e for e in events if e.get("reason") == TOKEN] == counted, where
        assert sum(e["action"] == "repair" for e in events) <= 2, where
        assert events[: len(before)] == before or scenario.startswith("reset"), where
        queue = queuefile.read(str(root / "queue.txt"))
        assert queue.skipped == (), where
        if scenario == "push-a-new-lane" and counted:
            assert [ln.slug for ln in queue.lanes].count("z") == 1, where
    # the faults reached every kind of answer an append can give
    assert False in seen, seen
    if scenario != "recorded-refusal":
        assert True in seen, seen
    if sticky:  # a disk that fails the log's fsync and then the cut back too: the answer says it cannot tell
        assert None in seen, seen


BATCH = "y 24\nz 26 y\n"


@pytest.mark.parametrize("sticky", [False, True], ids=["once", "from-then-on"])
@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_an_io_error_at_each_step_of_a_batch(tmp_path, error, sticky):
    """``add --from`` (issue 21, item 5): at each durable step, the whole
    batch is on the log or none of it; queue.txt carries its lanes exactly
    when the log does, or the answer says it may still carry them
    unrecorded (the disk failed to cut them back off too); and after the fault the
    storm lists, takes requests and verifies."""
    steps = _durable_steps(tmp_path, _with_log, lambda s: s.add_batch(BATCH, reason=TOKEN))
    seen = set()
    for step in range(1, steps + 1):
        root = make_storm(tmp_path / f"b{step}", QUEUE)
        _with_log(root)
        queue_before = (root / "queue.txt").read_bytes()
        outcome, failure = None, None
        with pytest.MonkeyPatch.context() as mp:
            t = Tracer(mp, fail_at=step, error=error, sticky=sticky)
            t.on = True
            try:
                outcome = Storm(str(root), env=_env()).add_batch(BATCH, reason=TOKEN)
            except RecordFailed as exc:
                failure = exc
            finally:
                t.stop()
        where = f"{os.strerror(error)} at durable step {step} of {steps} ({next(c for c in t.calls if c.failed)})\n{t}"
        counted = [e["slug"] for e in _counted(root) if e.get("reason") == TOKEN]
        queued = [ln.slug for ln in queuefile.read(str(root / "queue.txt")).lanes]
        assert counted in ([], ["y", "z"]), where
        if failure is None:
            assert outcome.recorded and outcome.added == ["y", "z"] and counted, where
        else:
            seen.add(failure.recorded)
            assert failure.exit_code == 4 and os.strerror(error) in str(failure), where
            assert failure.recorded is not False or not counted, where
        if "may still carry (some of) the batch's 2 lanes, unrecorded" in str(failure):
            seen.add("kept")
            assert not counted, where
            assert queued[-2:] == ["y", "z"] or (root / "queue.txt").read_bytes() == queue_before, where
        elif counted or (failure is not None and failure.recorded is None):
            assert queued[-2:] == ["y", "z"], where
        else:
            assert (root / "queue.txt").read_bytes() == queue_before, where
        storm = Storm(str(root), env=_env())
        storm.listing()
        assert storm.bump("a", reason="after the fault").recorded, where
        assert [e["slug"] for e in _check_log(root) if e.get("reason") == TOKEN] == counted, where
    assert {False, True} <= seen, seen
    if sticky:
        assert "kept" in seen, seen


SETTLE_QUEUE = "a 1\nb 2\nc 3\n"


def _finished(root: Path) -> None:
    """A log, and lanes a and c finished, awaiting review."""
    _with_log(root)
    for slug in ("a", "c"):
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True)
        (marks / "result.json").write_text('{"completed": true}\n')


@pytest.mark.parametrize("sticky", [False, True], ids=["once", "from-then-on"])
@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_an_io_error_at_each_step_of_a_batch_review(tmp_path, error, sticky):
    """``settle --finished`` (issue 33, item 2): at each durable step, the
    whole batch is on the log or none of it; integrated.txt carries its
    lanes exactly when the log does, or the answer says it may still carry
    them unrecorded (the disk failed to cut them back off too); and after
    the fault the storm lists, takes requests and verifies."""
    steps = _durable_steps(tmp_path, _finished, lambda s: s.settle_batch("integrated", reason=TOKEN))
    seen = set()
    for step in range(1, steps + 1):
        root = make_storm(tmp_path / f"r{step}", SETTLE_QUEUE)
        _finished(root)
        outcome, failure = None, None
        with pytest.MonkeyPatch.context() as mp:
            t = Tracer(mp, fail_at=step, error=error, sticky=sticky)
            t.on = True
            try:
                outcome = Storm(str(root), env=_env()).settle_batch("integrated", reason=TOKEN)
            except RecordFailed as exc:
                failure = exc
            finally:
                t.stop()
        where = f"{os.strerror(error)} at durable step {step} of {steps} ({next(c for c in t.calls if c.failed)})\n{t}"
        counted = [e["slug"] for e in _counted(root) if e.get("reason") == TOKEN]
        ledger = root / "integrated.txt"
        settled = ledger.read_text().split() if ledger.exists() else []
        assert counted in ([], ["a", "c"]), where
        if failure is None:
            assert outcome.recorded and outcome.settled == ["a", "c"] and counted, where
        else:
            seen.add(failure.recorded)
            assert failure.exit_code == 4 and os.strerror(error) in str(failure), where
            assert failure.recorded is not False or not counted, where
        if "may still carry (some of) the lanes it settles, unrecorded" in str(failure):
            seen.add("kept")
            assert not counted, where
        elif counted or (failure is not None and failure.recorded is None):
            assert settled == ["a", "c"], where
        else:
            assert settled == [], where
        storm = Storm(str(root), env=_env())
        storm.listing()
        assert storm.bump("b", reason="after the fault").recorded, where
        assert [e["slug"] for e in _check_log(root) if e.get("reason") == TOKEN] == counted, where
    assert {False, True} <= seen, seen


@pytest.mark.parametrize("as_json", [False, True], ids=["words", "json"])
def test_a_claim_recorded_but_not_witnessed_still_prints_its_line(tmp_path, as_json):
    """Issue 33, item 8: on a full disk a claim whose line is on the log
    (the lease counts) but whose witness could not be replaced exits 4 as
    before, and prints its decision line on stdout with its token (with
    ``--json``: ``decision`` and ``token`` in the one document), so the
    runner can use its slot, or give the lease back. At every durable step
    of the claim: the line is printed exactly when the lease counts."""
    from tests.conftest import run_main

    def ask(root: Path):
        return run_main(["claim", "--holder", "r1", *(["--json"] if as_json else []), "--root", str(root)], env=_env())

    clean = make_storm(tmp_path / "clean", QUEUE)
    with pytest.MonkeyPatch.context() as mp:
        t = Tracer(mp)
        t.on = True
        assert ask(clean).returncode == 0
        t.stop()
    steps = t.durable
    seen = set()
    for step in range(1, steps + 1):
        root = make_storm(tmp_path / f"c{step}", QUEUE)
        with pytest.MonkeyPatch.context() as mp:
            t = Tracer(mp, fail_at=step, error=errno.ENOSPC)
            t.on = True
            try:
                done = ask(root)
            finally:
                t.stop()
        where = f"ENOSPC at durable step {step} of {steps}\n{t}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, where
        leases = [e for e in _counted(root) if e["action"] == "claim"]
        if done.returncode == 0:
            continue
        assert done.returncode == 4, where
        if not leases:
            assert "run a" not in done.stdout, where
            continue
        seen.add("recorded")
        line = f"run a 1 {leases[0]['token']}"
        assert "recorded but not witnessed" in done.stderr and "do not ask again" in done.stderr, where
        if as_json:
            doc = json.loads(done.stdout)
            assert (doc["outcome"], doc["exit"], doc["recorded"]) == ("error", 4, True), where
            assert (doc["decision"], doc["token"], doc["holder"], doc["slug"]) == (line, leases[0]["token"], "r1", "a")
            assert "recorded but not witnessed" in doc["message"], where
        else:
            assert done.stdout == line + "\n", where
        # the lease it printed counts: its token renews and finishes the lane
        storm = Storm(str(root), env=_env())
        assert storm.renew("a", leases[0]["token"]).outcome == "done", where
        assert storm.finish("a", leases[0]["token"], "ok").outcome == "done", where
    assert seen == {"recorded"}

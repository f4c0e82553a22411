"""The Python runner API (issue 32, item 4) on both stores (tests/stores.py):
``Storm.claim``, ``renew``, ``finish`` and ``release`` answer the very
document the command's ``--json`` prints; ``Storm.lease`` claims, renews
in the background at a third of the TTL, finishes ok on a clean exit,
failed (the exception's type name as the note) on an exception, which it
re-raises, releases when the runner itself is stopped, and stops renewing
and tells the block (a flag and an event) when the lease ends under it.

Real time, short TTLs (3 s: a renewal each second); the waits here only
bound a hang (no assertion on speed: bench/ measures)."""

from __future__ import annotations

import json
import re
import threading
import time
from decimal import Decimal

import pytest

from storm_queue import Lease, NothingLeased, Refused, Storm
from tests.conftest import clean_env

TTL = "[runner]\nttl = 3\nttl_min = 1\nattempts = 3\n"
#: how long a test waits for what a renewal interval (1 s) brings about, before it calls it a hang
PATIENCE = 20.0


def opened(store) -> Storm:
    return Storm.find(store.root, env=clean_env())


def cli(store, *args: str) -> dict:
    done = store.cli(*args, "--json")
    assert done.returncode in (0, 1, 2), (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def actions(store, slug: str) -> list[tuple]:
    """(action, token, extra) of every line about ``slug``, in order."""
    return [(e["action"], e.get("token"), e.get("result") or e.get("code") or e.get("note"))
            for e in store.events() if e.get("slug") == slug]


def until(check, what: str) -> None:
    end = time.monotonic() + PATIENCE
    while not check():
        assert time.monotonic() < end, f"{what}: not within {PATIENCE} s"
        time.sleep(0.05)


# -- the requests: the Python answer is the command's --json document ------------

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def same_shape(doc: dict, slug: str, issue: str) -> str:
    """``doc`` with its stamps, its lane and its issue made placeholders."""
    text = STAMP.sub("<at>", json.dumps(doc, sort_keys=True))
    return text.replace(slug, "<slug>").replace(f" {issue} ", " <issue> ")


def test_the_python_answer_is_the_cli_json_document(store):
    store.make("alpha-lane 101\nbeta-lane 202\ngamma-lane 303\ndelta-lane 404\n", toml=TTL + "slots = 4\n",
               unattended=True)  # (no review holds the storm: the second claims lease)
    storm = opened(store)
    try:
        pairs = []
        # Python asks of one lane, the command of the next, each the same request
        py = storm.claim(holder="h", ttl=60)
        pairs.append((py, cli(store, "claim", "--holder", "h", "--ttl", "60"), "alpha-lane", "beta-lane"))
        assert py.decision == "run alpha-lane 101 1"
        pairs.append((storm.renew("alpha-lane", 1, 30), cli(store, "renew", "beta-lane", "--token", "1", "--ttl", "30"),
                      "alpha-lane", "beta-lane"))
        pairs.append((storm.renew("alpha-lane", 9), cli(store, "renew", "beta-lane", "--token", "9"),
                      "alpha-lane", "beta-lane"))  # a refusal: stale_fence
        pairs.append((storm.finish("alpha-lane", 1, "ok", note="fine"),
                      cli(store, "finish", "beta-lane", "--token", "1", "--result", "ok", "--note", "fine"),
                      "alpha-lane", "beta-lane"))
        pairs.append((storm.claim(holder="h", ttl=60, key="k-1"),
                      cli(store, "claim", "--holder", "h", "--ttl", "60", "--key", "k-2"),
                      "gamma-lane", "delta-lane"))
        pairs.append((storm.release("gamma-lane", 1), cli(store, "release", "delta-lane", "--token", "1"),
                      "gamma-lane", "delta-lane"))
        pairs.append((storm.finish("gamma-lane", 1, "failed"),
                      cli(store, "finish", "delta-lane", "--token", "1", "--result", "failed"),
                      "gamma-lane", "delta-lane"))  # a refusal: the lease was released
    finally:
        storm.close()
    issues = {"alpha-lane": "101", "beta-lane": "202", "gamma-lane": "303", "delta-lane": "404"}
    for py, doc, ours, theirs in pairs:
        assert py.outcome in ("done", "refused")
        assert same_shape(py.to_json(), ours, issues[ours]) == same_shape(doc, theirs, issues[theirs]), py.action
    assert [p[0].outcome for p in pairs] == ["done", "done", "refused", "done", "done", "done", "refused"]
    assert [p[0].code for p in pairs if p[0].outcome == "refused"] == ["stale_fence", "stale_fence"]
    assert (pairs[4][0].decision, pairs[4][1]["decision"]) == ("run gamma-lane 303 1", "run delta-lane 404 1")


def test_a_finish_then_claim_answers_the_pair_the_command_prints(store):
    """``finish --then-claim --json`` prints two documents, the finish's
    and the claim's: from Python they are ``{"finish": out.to_json(),
    "claim": out.claim.to_json()}`` (``"claim": null`` for a refused
    finish, which claims nothing), as docs/python-api.md says;
    ``out.to_json()`` alone is the finish's."""
    store.make("alpha-lane 101\nbeta-lane 202\ngamma-lane 303\ndelta-lane 404\n", toml=TTL + "slots = 4\n",
               unattended=True)
    storm = opened(store)
    try:
        assert storm.claim(holder="h", ttl=60).decision == "run alpha-lane 101 1"
        assert cli(store, "claim", "--holder", "h", "--ttl", "60")["decision"] == "run beta-lane 202 1"
        pairs = []
        for token in (9, 1):  # refused (stale_fence), then done
            py = storm.finish("alpha-lane", token, "ok", then_claim=True, holder="h", ttl=60)
            doc = cli(store, "finish", "beta-lane", "--token", str(token), "--result", "ok", "--then-claim",
                      "--holder", "h", "--ttl", "60")
            pairs.append((py, doc))
    finally:
        storm.close()
    for py, doc in pairs:
        ours = {"finish": py.to_json(), "claim": None if py.claim is None else py.claim.to_json()}
        assert py.to_json() == ours["finish"] and set(doc) == {"finish", "claim"}
        shown = same_shape(ours, "alpha-lane", "101").replace("gamma-lane", "<slug>").replace(" 303 ", " <issue> ")
        assert shown == same_shape(doc, "beta-lane", "202").replace("delta-lane", "<slug>").replace(" 404 ", " <issue> ")
    assert (pairs[0][0].code, pairs[0][0].claim, pairs[0][1]["claim"]) == ("stale_fence", None, None)
    assert (pairs[1][0].claim.decision, pairs[1][1]["claim"]["decision"]) == ("run gamma-lane 303 1",
                                                                            "run delta-lane 404 1")


# -- the lease: a context manager --------------------------------------------------


def test_a_clean_exit_finishes_ok(store):
    store.make("a 1\nb 2\n", toml=TTL)
    storm = opened(store)
    try:
        with storm.lease(holder="r1") as lane:
            assert isinstance(lane, Lease)
            assert (lane.slug, lane.issue, lane.token, lane.holder, lane.ttl) == ("a", "1", 1, "r1", 3)
            assert lane.claim.decision == "run a 1 1" and not lane.cancelled
            assert storm.tenure("a", 1).ended is None  # live while the block runs
        assert lane.finished is not None and lane.finished.to_json()["action"] == "finish"
        assert lane.finished.outcome == "done" and not lane.cancelled
        tenure = storm.tenure("a", 1)
        assert (tenure.ended, tenure.result) == ("finished", "ok")
        assert store.result("a") is not None  # awaiting review
    finally:
        storm.close()
    assert ("finish", 1, "ok") in actions(store, "a")


def test_an_exception_finishes_failed_with_its_type_and_is_raised_again(store):
    store.make("a 1\n", toml=TTL)
    storm = opened(store)

    class LaneBroke(Exception):
        pass

    try:
        with pytest.raises(LaneBroke, match="tests failed") as raised:
            with storm.lease(holder="r1") as lane:
                raise LaneBroke("tests failed")
        assert lane.finished is not None and lane.finished.outcome == "done"
        assert not getattr(raised.value, "__notes__", None)  # recorded: nothing to add to it
    finally:
        storm.close()
    finish = [e for e in store.events() if e["action"] == "finish"]
    assert [(f["slug"], f["token"], f["result"], f.get("note")) for f in finish] == [("a", 1, "failed", "LaneBroke")]
    assert store.result("a") is None  # failed: claimable again, not awaiting review


def test_a_stopped_runner_releases_the_lease(store):
    store.make("a 1\n", toml=TTL)
    storm = opened(store)
    try:
        with pytest.raises(KeyboardInterrupt):
            with storm.lease(holder="r1") as lane:
                raise KeyboardInterrupt
        assert lane.finished is not None and lane.finished.action == "release"
    finally:
        storm.close()
    assert [e["action"] for e in store.events() if e.get("slug") == "a"][-1] == "release"


def test_renewals_keep_the_lease_past_its_ttl(store):
    store.make("a 1\n", toml=TTL)
    storm = opened(store)
    try:
        with storm.lease(holder="r1") as lane:
            first = lane.expires
            from storm_queue.core.clock import seconds

            until(lambda: time.time() > seconds(first) + 1 and lane.renewals >= 2, "two renewals, past the first expiry")
            assert storm.tenure("a", 1).ended is None  # the lease outlived the TTL it was claimed for
            assert lane.expires > first and lane.trouble is None
        assert lane.finished.outcome == "done"
    finally:
        storm.close()
    renews = [e for e in store.events() if e["action"] == "renew"]
    assert len(renews) >= 2 and all((e["slug"], e["token"], e["ttl"]) == ("a", 1, 3) for e in renews)


def test_a_cancel_while_inside_stops_the_renewals_and_tells_the_block(store):
    store.make("a 1\n", toml=TTL)
    storm = opened(store)
    try:
        with storm.lease(holder="r1") as lane:
            until(lambda: lane.renewals >= 1, "a first renewal")
            assert cli(store, "cancel", "a", "--reason", "wrong branch")["outcome"] == "done"
            assert lane.stopped.wait(PATIENCE), "the block was not told within a renewal interval or so"
            assert lane.cancelled
            assert (lane.ending.ended, lane.ending.reason) == ("cancelled", "wrong branch")
            seen = len(store.events())
            time.sleep(2 * lane.interval)  # two intervals more: no renewal is tried after the end
            assert len(store.events()) == seen
        assert lane.finished is None  # nothing recorded at the end: the lease had ended
    finally:
        storm.close()
    after = [e for e in store.events() if e["action"] in ("renew", "finish", "refused")]
    cancel = next(e["seq"] for e in store.events() if e["action"] == "cancel")
    assert [e["action"] for e in after if e["seq"] > cancel] in ([], ["refused"])  # at most the one renewal refused


def test_a_cancel_after_the_last_renewal_is_met_by_the_finish(store):
    """The lease ends under the block, and the block ends before a renewal
    could tell it: the finish is refused, and the block is told the same way."""
    store.make("a 1\n", toml=TTL.replace("ttl = 3", "ttl = 30"))
    storm = opened(store)
    try:
        with storm.lease(holder="r1") as lane:
            assert cli(store, "cancel", "a", "--reason", "stop")["outcome"] == "done"
        assert lane.cancelled and lane.ending.ended == "cancelled"
        assert lane.finished.outcome == "refused" and lane.finished.code == "lane_cancelled"
    finally:
        storm.close()


def test_a_claim_that_leases_nothing_raises_nothing_leased_with_its_answer(store):
    store.make("a 1\nb 2 a\n", toml=TTL)
    storm = opened(store)
    try:
        with storm.lease(holder="r1"):
            with pytest.raises(NothingLeased) as nothing:  # b waits on a
                with storm.lease(holder="r2"):
                    raise AssertionError("a block of a lease that leased nothing ran")
            assert nothing.value.decision == "wait" and nothing.value.outcome.decision == "wait"
            assert not nothing.value.final  # b can run once a is integrated: ask again
        assert cli(store, "halt", "--reason", "maintenance")["outcome"] == "done"
        with pytest.raises(NothingLeased) as nothing:
            with storm.lease(holder="r1", wait=0.2):
                pass
        assert nothing.value.decision == "halted" and nothing.value.outcome.halt.reason == "maintenance"
        assert not nothing.value.final
        assert cli(store, "resume", "--reason", "done")["outcome"] == "done"
        with pytest.raises(NothingLeased) as nothing:
            with storm.lease(holder="r1"):
                pass
        assert nothing.value.decision == "review" and nothing.value.final  # a finished, awaiting review
        with pytest.raises(Refused) as refused:  # a refused claim raises Refused
            with storm.lease(holder="not a name"):
                pass
        assert refused.value.code
    finally:
        storm.close()


def test_only_reviews_left_is_final_and_empty_is(store):
    store.make("a 1\n", toml=TTL, unattended=True)
    storm = opened(store)
    try:
        with storm.lease(holder="r1"):
            pass
        with pytest.raises(NothingLeased) as nothing:
            with storm.lease(holder="r1", wait=30):  # answered at once: nothing more can run
                pass
        assert nothing.value.outcome.decision == "wait a" and nothing.value.final
        assert cli(store, "settle", "a", "integrated")["outcome"] == "done"
        with pytest.raises(NothingLeased) as nothing:
            with storm.lease(holder="r1"):
                pass
        assert nothing.value.decision == "empty" and nothing.value.final
    finally:
        storm.close()


def test_a_lease_is_entered_once(store):
    store.make("a 1\nb 2\n", toml=TTL)
    storm = opened(store)
    try:
        lease = storm.lease(holder="r1")
        with lease:
            pass
        with pytest.raises(RuntimeError, match="entered once"):
            with lease:
                pass
    finally:
        storm.close()


def test_the_runner_api_is_annotated_and_documented():
    """Typed (the package ships py.typed): every parameter and return of
    the runner's API is annotated, and each has a docstring."""
    import inspect
    from pathlib import Path

    import storm_queue

    assert (Path(storm_queue.__file__).parent / "py.typed").exists()
    for f in (Storm.claim, Storm.renew, Storm.finish, Storm.release, Storm.lease, Storm.tenure, Storm.close,
              Lease.__init__, Lease.__enter__, Lease.__exit__, Lease.cancelled.fget, Lease.interval.fget, NothingLeased.__init__):
        sig = inspect.signature(f)
        unannotated = [p.name for p in sig.parameters.values() if p.name != "self" and p.annotation is p.empty]
        assert not unannotated, (f.__qualname__, unannotated)
        assert sig.return_annotation is not sig.empty, f.__qualname__
    for f in (Storm.claim, Storm.renew, Storm.finish, Storm.release, Storm.lease, Storm.tenure, Lease, NothingLeased):
        assert (f.__doc__ or "").strip(), f.__qualname__
    assert list(inspect.signature(Storm.claim).parameters)[:5] == ["self", "holder", "ttl", "wait", "key"]
    assert list(inspect.signature(Storm.lease).parameters) == ["self", "holder", "ttl", "wait"]


def test_a_renewal_refused_while_the_lease_lives_stops_renewing_and_tells_the_block_at_its_expiry(store):
    """Past ``max_lease_age`` a renewal is refused while the lease still
    lives: the refusal is kept (``trouble``), no renewal is asked again,
    and the block is told once the lease expires."""
    store.make("a 1\n", toml=TTL + "max_lease_age = 4\n")
    storm = opened(store)
    try:
        with storm.lease(holder="r1") as lane:
            assert lane.stopped.wait(PATIENCE), "not told of the expiry"
            assert lane.cancelled and lane.ending.ended == "expired"
            assert "lease_age_exceeded" in str(lane.trouble)
        assert lane.finished is None
    finally:
        storm.close()
    refused = [e for e in store.events() if e["action"] == "refused" and e["requested"] == "renew"]
    assert [e["code"] for e in refused] == ["lease_age_exceeded"]  # asked once, then only watched


class Paced:
    """A lease's renewals made one at a time, when the test says
    (``step``), not every third of its TTL: the lease's one wait between
    renewals (``Lease._pause``) waits for the test's word instead, so a
    test moves the injected clock (the ``clock`` fixture) between two
    renewals and no assertion hangs on the real time. Set before the
    lease is entered."""

    def __init__(self, lease: Lease) -> None:
        self.lease, self.paused, self.let = lease, 0, 0
        lease._pause = self._pause

    def _pause(self) -> bool:  # in the renewing thread
        self.paused += 1
        end = time.monotonic() + PATIENCE
        while self.let < self.paused and not self.lease._halt.wait(0.01):
            if time.monotonic() > end:  # the test stopped stepping: renew no more (its step says so)
                return True
        return self.lease._halt.is_set()

    def step(self) -> None:
        """One turn of the renewals (a renewal, or a look at the lease), made and done."""
        until(lambda: self.paused > self.let, "the renewals waiting for their turn")
        self.let += 1
        until(lambda: self.paused > self.let or not self.lease._thread.is_alive(), "the renewal's turn done")


def test_a_renewal_refused_while_the_lease_lives_is_asked_again_at_the_next_interval(store, clock):
    """A renewal refused for a reason that does not end the lease (here
    a ``[runner]`` the operator broke: ``declaration_unreadable``, until
    it is fixed) is kept as ``trouble`` and asked again at the next
    interval: the lease is renewed once the storm answers again, and
    lives on past the expiry it had when the renewal was refused. (One
    refusal stopped the renewals for good: the lease expired under the
    block and another runner took the lane.)"""
    good = "[runner]\nttl = 60\n"
    store.make("a 1\n", toml=good)
    storm = opened(store)
    try:
        lease = storm.lease(holder="r1")
        paced = Paced(lease)
        with lease as lane:
            first = lane.expires
            store.declare(good + "slots = 0\n")  # the operator's typo
            paced.step()
            assert "declaration_unreadable" in str(lane.trouble) and lane.renewals == 0 and not lane.cancelled
            store.declare(good)  # fixed
            clock.advance(40)
            paced.step()
            assert lane.renewals == 1 and lane.expires > first and not lane.cancelled
            clock.advance(40)  # past the expiry the lease had when the renewal was refused
            paced.step()
            assert lane.renewals == 2 and not lane.cancelled, lane.ending
            assert storm.tenure("a", 1).ended is None
            assert storm.claim(holder="r2").decision == "wait"  # the lane is r1's still
        assert lane.finished.outcome == "done" and lane.finished.action == "finish"
    finally:
        storm.close()
    asked = [(e["action"], e.get("code")) for e in store.events() if e.get("slug") == "a"]
    assert [a for a in asked if a[0] != "refused"] == [("claim", None), ("renew", None), ("renew", None), ("finish", None)]
    assert {a for a in asked if a[0] == "refused"} <= {("refused", "declaration_unreadable")}


def test_a_ctrl_c_as_the_claim_is_recorded_releases_the_lease_it_took(tmp_path, monkeypatch):
    """A Ctrl-C that lands while ``Storm.lease`` claims: a directory
    storm's writers' lock holds SIGINT back until the claim's line is
    written, and ``KeyboardInterrupt`` was raised as it let go, before the
    claim could answer: the lease stayed held, released by no one. The
    request now carries its recorded answer on the interrupt
    (``errors.recorded_before``), and the lease is released as one
    interrupted in the block is. (A directory storm's: the lock that holds
    the signal back is its own.)"""
    import signal

    from storm_queue.store.directory.log import writer
    from tests.conftest import make_storm

    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml=TTL + "slots = 2\n")
    real = writer.append

    def append(*args, **kwargs):  # Ctrl-C under the lock, as the claim is written (once), to this (main) thread:
        monkeypatch.setattr(writer, "append", real)  # (a process's, in a process of one thread; the test's has more)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return real(*args, **kwargs)

    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    storm = Storm.find(str(root), env=clean_env())
    try:
        monkeypatch.setattr(writer, "append", append)
        lease, ran = storm.lease(holder="r1"), []
        with pytest.raises(KeyboardInterrupt) as stopped:
            with lease:
                ran.append(True)
        assert not ran and lease.claim.decision == "run a 1 1"
        assert (lease.finished.action, lease.finished.event["reason"]) == ("release", "runner stopped: KeyboardInterrupt")
        assert storm.tenure("a", 1).ended == "released"
        assert any("(token 1) the claim took as it was interrupted was released" in n for n in stopped.value.__notes__)
        from storm_queue.core.errors import recorded_before

        monkeypatch.setattr(writer, "append", append)  # the request path alone: the claim's answer is on the interrupt
        with pytest.raises(KeyboardInterrupt) as stopped:
            storm.claim(holder="r2")
        assert recorded_before(stopped.value).decision == "run a 1 2" and storm.tenure("a", 2).ended is None
        assert recorded_before(KeyboardInterrupt()) is None
    finally:
        signal.signal(signal.SIGINT, handler)
        storm.close()


def _blocked(native_id: int) -> set[int]:
    """The signals the thread ``native_id`` of this process holds back (/proc: its SigBlk mask)."""
    with open(f"/proc/self/task/{native_id}/status") as f:
        mask = int(next(row for row in f if row.startswith("SigBlk:")).split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def test_the_renewing_thread_leaves_ctrl_c_to_the_main_thread(store):
    """The kernel hands a Ctrl-C to any thread of the process that does
    not hold SIGINT back, and Python then raises it in the main thread at
    once: handed to the renewing thread, it interrupted a request of the
    block under a directory storm's writers' lock (which holds the signals
    back in its own thread alone) before its record. The renewing thread
    holds SIGINT and SIGTERM back."""
    import signal

    store.make("a 1\n", toml=TTL)
    storm = opened(store)
    try:
        with storm.lease(holder="r1") as lane:
            until(lambda: lane._thread.native_id is not None, "the renewing thread")
            until(lambda: {signal.SIGINT, signal.SIGTERM} <= _blocked(lane._thread.native_id),
                  "SIGINT and SIGTERM held back in the renewing thread")
            assert signal.SIGINT not in _blocked(threading.main_thread().native_id)
    finally:
        storm.close()


# -- waits ---------------------------------------------------------------------------


@pytest.mark.parametrize("wait", [float("nan"), float("inf"), -1.0, 86400.5, 1e300, "5", None, True])
def test_a_wait_that_is_not_0_to_86400_seconds_is_refused_before_anything_is_asked(store, wait):
    """Every wait the API takes (the writers' lock's, a claim's for work,
    a finish --then-claim's, a lease's, a tenure's): a NaN would wait
    forever, a huge one would fail on the server after the finish was
    recorded. Each is ``BadArgument`` (exit 2) and nothing is recorded."""
    from storm_queue import BadArgument

    store.make("a 1\nb 2\n", toml=TTL)
    with pytest.raises(BadArgument) as refused:
        Storm.find(store.root, env=clean_env(), wait=wait)
    assert refused.value.exit_code == 2 and "0 to 86,400" in str(refused.value)
    storm = opened(store)
    try:  # every call below would return at once, were its wait taken: a lane is claimable, lease 1 has ended
        assert storm.claim(holder="r").decision == "run a 1 1" and storm.release("a", 1).outcome == "done"
        before = store.lines()
        calls = [lambda: storm.claim(holder="r", wait=wait),
                 lambda: storm.finish("a", 1, "ok", then_claim=True, holder="r", wait=wait),
                 lambda: storm.lease(holder="r", wait=wait).__enter__(),
                 lambda: storm.tenure("a", 1, wait=wait)]
        for call in calls:
            with pytest.raises(BadArgument):
                call()
        assert store.lines() == before
    finally:
        storm.close()


@pytest.mark.parametrize("ttl", [120.5, 120.0, True, "120"])
def test_a_ttl_that_is_not_whole_seconds_is_a_type_error_before_anything_is_asked(store, ttl):
    """A TTL the Python API takes is an int: a claim of ``ttl=120.5`` was
    recorded on a directory storm with a TTL its log's reader refuses
    (every later command: exit 3, the log damaged), ``ttl="120"`` raised
    a bare comparison's TypeError, ``ttl=True`` was recorded as a refusal
    of "a lease TTL of True s". Each is a ``TypeError`` in words for
    every request that takes a TTL, nothing recorded, the log sound."""
    store.make("a 1\nb 2\n", toml="[runner]\nttl = 300\nslots = 2\n")
    storm = opened(store)
    try:
        assert storm.claim(holder="r").decision == "run a 1 1"
        before = store.lines()
        calls = [lambda: storm.claim(holder="r", ttl=ttl),
                 lambda: storm.renew("a", 1, ttl=ttl),
                 lambda: storm.finish("a", 1, "ok", then_claim=True, holder="r", ttl=ttl),
                 lambda: storm.lease(holder="r", ttl=ttl).__enter__()]
        for call in calls:
            with pytest.raises(TypeError, match=r"expected a TTL in whole seconds \(an int\), not "):
                call()
        assert store.lines() == before
        assert storm.renew("a", 1, ttl=200).outcome == "done" and store.cli("verify").returncode == 0
    finally:
        storm.close()


@pytest.mark.parametrize("given", [{"holder": "r2"}, {"holder": 5}, {"ttl": 60}, {"ttl": "60"},
                                   {"holder": "r2", "ttl": 60}])
def test_a_finish_that_claims_nothing_refuses_a_holder_or_a_ttl_before_anything_is_asked(store, given):
    """``holder`` and ``ttl`` are the claim's: a finish without
    ``then_claim`` dropped them unseen (their type unchecked too). It is
    ``BadArgument`` in the command's words (``finish --holder`` without
    ``--then-claim``), nothing asked, nothing recorded."""
    from storm_queue import BadArgument

    store.make("a 1\n", toml=TTL)
    storm = opened(store)
    try:
        assert storm.claim(holder="r1").decision == "run a 1 1"
        before = store.lines()
        with pytest.raises(BadArgument) as refused:
            storm.finish("a", 1, "ok", **given)
        words = "--holder and --ttl are the claim's: add --then-claim, or leave them out; nothing was done"
        assert refused.value.exit_code == 2 and str(refused.value) == words
        done = store.cli("finish", "a", "--token", "1", "--result", "ok", "--holder", "r2")
        assert done.returncode == 2 and words in done.stderr, (done.stdout, done.stderr)
        assert store.lines() == before and storm.tenure("a", 1).ended is None
    finally:
        storm.close()


#: an int ``str`` does not write (more than 4,300 digits: sys.get_int_max_str_digits)
BIG = 10**5000


def test_a_number_too_long_to_write_is_answered_as_any_number_out_of_range(store):
    """A token, a TTL or a wait of more than 4,300 digits raised a bare
    ``ValueError`` of ``str`` from the message (or the key's fingerprint)
    that says it. Each is answered as a number out of range is: the
    refusal, recorded (under its key: asked again, a repeat), or
    ``BadArgument``; the number said as its first digits and its length.
    A database storm's driver cannot send such a number: ``not_carried``
    (exit 2, never recorded), as for text it cannot carry."""
    from storm_queue import BadArgument

    store.make("a 1\nb 2\n", toml="[runner]\nttl = 300\nslots = 2\n")
    storm = opened(store)
    try:
        assert storm.claim(holder="r1").decision == "run a 1 1"
        refused = [(lambda: storm.claim(holder="r2", ttl=BIG), "lease_ttl_out_of_range"),
                   (lambda: storm.claim(holder="r2", ttl=-BIG, key="k0"), "lease_ttl_out_of_range"),
                   (lambda: storm.renew("a", BIG), "stale_fence"),
                   (lambda: storm.renew("a", 1, BIG), "lease_ttl_out_of_range"),
                   (lambda: storm.renew("a", -BIG, key="k1"), "invalid_token"),
                   (lambda: storm.release("a", BIG, key="k2"), "stale_fence"),
                   (lambda: storm.finish("a", BIG, "ok", key="k3"), "stale_fence"),
                   (lambda: storm.finish("a", 1, "ok", then_claim=True, ttl=BIG, key="k4"), "lease_ttl_out_of_range")]
        for call, code in refused:
            out = call()
            if store.kind == "database":  # a shape's refusal says why; a fence the server would judge: not_carried
                assert (out.outcome, out.code, out.recorded) == (
                    "refused", "not_carried" if code == "stale_fence" else code, False), out.text()
                assert ("more than 4,300 digits" if code == "stale_fence" else "1000000000...(5,001 digits)") in out.message
                continue
            assert (out.outcome, out.code, out.recorded) == ("refused", code, True), out.text()
            assert "1000000000...(5,001 digits)" in out.message, out.message
        if store.kind == "directory":
            again = storm.release("a", BIG, key="k2")
            assert (again.code, again.repeat is not None, again.recorded) == ("stale_fence", True, False)
        for call in (lambda: Storm.find(store.root, env=clean_env(), wait=BIG),
                     lambda: storm.claim(holder="r2", wait=BIG),
                     lambda: storm.tenure("a", BIG),
                     lambda: storm.tenure("a", 1, wait=-BIG)):
            with pytest.raises(BadArgument, match=r"1000000000\.\.\.\(5,001 digits\)"):
                call()
        assert storm.tenure("a", 1).ended is None
    finally:
        storm.close()
    assert store.cli("verify").returncode == 0


@pytest.mark.parametrize("token", [Decimal(1), 1.0, object(), "1"])
def test_a_token_that_is_no_int_is_answered_alike_with_a_key_or_without(store, token):
    """A token that is not an int was refused ``invalid_token`` without a
    key, but with one raised the JSON encoder's ``TypeError`` (its key's
    fingerprint could not be written): renew, release and finish (with
    ``then_claim`` too) answer the same refusal either way, and asked
    again under the key, a repeat."""
    store.make("a 1\n", toml=TTL)
    storm = opened(store)
    try:
        assert storm.claim(holder="r1").decision == "run a 1 1"
        calls = [lambda key: storm.renew("a", token, key=key), lambda key: storm.release("a", token, key=key),
                 lambda key: storm.finish("a", token, "ok", key=key),
                 lambda key: storm.finish("a", token, "ok", then_claim=True, key=key)]
        for n, call in enumerate(calls):
            bare, keyed = call(None), call(f"k{n}")
            assert keyed.outcome == "refused" and (keyed.code, keyed.message) == (bare.code, bare.message)
            assert keyed.code in ("invalid_token", "not_carried"), keyed.text()
            again = call(f"k{n}")
            assert (again.code, again.message.startswith(bare.message)) == (bare.code, True), again.text()
        assert storm.tenure("a", 1).ended is None
    finally:
        storm.close()
    assert store.cli("verify").returncode == 0


@pytest.mark.parametrize("args", [("claim", "--wait", "nan"), ("finish", "a", "--token", "1", "--result", "ok",
                                  "--then-claim", "--wait", "nan"), ("bump", "a", "--wait", "nan"),
                                  ("bump", "a", "--wait", "inf"), ("bump", "a", "--wait", "1e300"),
                                  ("lease", "a", "--token", "1", "--wait", "-nan")])
def test_the_command_refuses_a_wait_that_is_no_number_of_seconds(store, args):
    store.make("a 1\n", toml=TTL)
    before = store.lines()
    done = store.cli(*args)
    assert done.returncode == 2 and "Invalid value for '--wait'" in done.stderr, (done.stdout, done.stderr)
    assert store.lines() == before

"""Claims that wait for work (issue 21, item 4): ``claim --wait SECONDS``
on both stores (tests/stores.py). A claim that would answer ``wait`` or
``halted`` (or ``review``, from a runner role, which may not settle: issue
33) waits for a change that can make a lane claimable (a finish,
add, push, settle, resume, waive, unpark, a runner role's finish; a lease
expiring, a schedule coming due), then answers exactly as ``claim`` does;
a change that leaves nothing claimable (a bump) sends it back to waiting; one that times out answers as
``claim`` would, with the same exit code, and records nothing; Ctrl-C
exits 130 with nothing recorded.

The waiting claim runs in a thread through the library (an in-process
call of the command line swaps the process's streams, so only the main
thread makes those), its store's ``changes`` spied on so the test acts
only once the claim is really waiting; the change that wakes it is the
command line's, in this process. Expiries and schedules move the
injected clock. Ctrl-C is sent to a real process, since the signal to
the process is what is under test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from tests.conftest import PYTHON_M, clean_env

#: the longest a woken claim may take to return before the test calls it not woken (it waits far longer)
WOKEN_WITHIN = 60
#: what a waiting claim under test waits at most: long past WOKEN_WITHIN, so a claim that timed out is told apart
LONG = 600


class Waiting:
    """A claim with ``wait`` in a thread, through the library: ``ready``
    is set once it waits for a change (its store's first ``Changes.wait``)."""

    def __init__(self, root: str, wait: float = LONG, **kwargs):
        from storm_queue.service.storm import Storm

        self.storm = Storm.find(root, env=clean_env())
        self.ready = threading.Event()
        self.woken: list[bool] = []  # what each wait for a change returned, in turn
        self.calls = 0  # the waits for a change begun
        self.out = None
        self.error: BaseException | None = None
        opened = self.storm.store.changes
        ready, woken, me = self.ready, self.woken, self

        class Spied:
            def __init__(self):
                self.inner = opened()

            def __enter__(self):
                self.inner.__enter__()
                return self

            def __exit__(self, *exc):
                return self.inner.__exit__(*exc)

            def wait(self, timeout):
                me.calls += 1
                ready.set()
                woken.append(self.inner.wait(timeout))
                return woken[-1]

        self.storm.store.changes = Spied
        self.thread = threading.Thread(target=self._run, args=(wait, kwargs), daemon=True)
        self.thread.start()
        assert self.ready.wait(WOKEN_WITHIN) or self.error, "the claim never began to wait"
        assert self.error is None, self.error

    def _run(self, wait: float, kwargs: dict) -> None:
        try:
            self.out = self.storm.claim(wait=wait, **kwargs)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            self.error = exc
            self.ready.set()
        finally:
            self.storm.close()

    def answer(self):
        self.thread.join(WOKEN_WITHIN)
        assert not self.thread.is_alive(), "the waiting claim was not woken"
        assert self.error is None, self.error
        return self.out


def ok(store, *args: str) -> dict:
    done = store.cli(*args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


#: how each change is made, on a storm where claim answers wait (or halted), and what claim says after it
WAKERS = {
    # a finish frees the one slot
    "finish": ("a 1\nb 2\n", "[runner]\nslots = 1\n", [("claim",)], ("finish", "a", "--token", "1", "--result", "failed"),
               "run a 1 2"),
    # a lane added where a slot is free
    "add": ("a 1\n", "[runner]\nslots = 2\n", [("claim",)], ("add", "b", "2"), "run b 2 1"),
    "push": ("a 1\n", "[runner]\nslots = 2\n", [("claim",)], ("push", "b", "2"), "run b 2 1"),
    # the dependency still running, waived
    "waive": ("a 1\nb 2 a\n", "[runner]\nslots = 2\n", [("claim",)], ("waive", "b", "a", "--reason", "ships apart"),
              "run b 2 1"),
    # the dependency settled
    "settle": ("a 1\nb 2 a\n", "[runner]\nslots = 2\nunattended = true\n",
               [("claim",), ("finish", "a", "--token", "1", "--result", "ok")], ("settle", "a", "integrated"),
               "run b 2 1"),
    # the operator's halt ended
    "resume": ("a 1\n", None, [("halt", "--reason", "maintenance")], ("resume", "--reason", "done"), "run a 1 1"),
    # a quarantined lane unparked
    "unpark": ("a 1\n", "[runner]\nattempts = 1\n", [("claim",), ("finish", "a", "--token", "1", "--result", "failed")],
               ("unpark", "a", "--reason", "fixed"), "run a 1 2"),
}


@pytest.mark.parametrize("change", sorted(WAKERS))
def test_a_waiting_claim_is_woken_by_a_change_and_answers_as_claim_does(store, change):
    queue, toml, before, trigger, decision = WAKERS[change]
    store.make(queue, toml=toml)
    for args in before:
        ok(store, *args)
    first = ok(store, "claim")
    assert first["decision"].split()[0] in ("wait", "halted"), first
    seen = len(store.events())
    waiting = Waiting(store.root)
    ok(store, *trigger)
    out = waiting.answer()
    assert (out.outcome, out.decision, out.recorded) == ("done", decision, True)
    events = store.events()
    assert [e["action"] for e in events[seen:]] == [trigger[0], "claim"], events[seen:]  # the wait added no line


def test_a_change_that_leaves_nothing_claimable_sends_the_claim_back_to_waiting(store):
    """A bump while the one slot is busy wakes the claim; it asks, finds
    nothing, records nothing, and waits again, until a finish frees the
    slot (its lane then awaits review: answered at once, not waited out)."""
    store.make("a 1\nb 2\nc 3\n", toml="[runner]\nslots = 1\n")
    ok(store, "claim")
    waiting = Waiting(store.root)
    ok(store, "bump", "c")
    seen = len(store.events())
    deadline = time.monotonic() + WOKEN_WITHIN
    while not (True in waiting.woken and waiting.calls > len(waiting.woken)):  # woken, and in a wait once more
        assert time.monotonic() < deadline and waiting.thread.is_alive(), (waiting.woken, waiting.out)
        time.sleep(0.01)
    assert len(store.events()) == seen  # its ask after the bump recorded nothing
    ok(store, "finish", "a", "--token", "1", "--result", "ok")
    assert waiting.answer().decision == "review a"


@pytest.mark.parametrize("how", ["expiry", "schedule", "backoff"])
def test_a_waiting_claim_is_woken_when_a_lease_expires_or_a_schedule_comes_due(store, clock, how, monkeypatch):
    """No change is made: time alone lets a lane run (the injected clock
    moves on; the claim reads it again every TICK, here 50 ms, not 1 s)."""
    from storm_queue.service import leases

    monkeypatch.setattr(leases, "TICK", 0.05)
    if how == "expiry":
        store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
        assert ok(store, "claim", "--ttl", "600")["decision"] == "run a 1 1"
    elif how == "backoff":  # the storm's own backoff after a failed attempt (issue 33): a schedule on the finish line
        store.make("a 1\n", toml="[runner]\nretry_delay = 600\n")
        ok(store, "claim")
        ok(store, "finish", "a", "--token", "1", "--result", "failed")
    else:
        store.make("a 1\n")
        ok(store, "schedule", "a", "--not-before", "+1h")
    seen = len(store.events())
    waiting = Waiting(store.root)
    clock.advance(3601 if how == "schedule" else 601)
    out = waiting.answer()
    actions = [e["action"] for e in store.events()[seen:]]
    if how == "expiry":
        assert out.decision == "run a 1 2" and actions == ["expire", "claim"], (out, actions)
    elif how == "backoff":
        assert out.decision == "run a 1 2" and actions == ["claim"], (out, actions)
    else:
        assert out.decision == "run a 1 1" and actions == ["claim"], (out, actions)


@pytest.mark.parametrize("halted", [False, True], ids=["wait", "halted"])
def test_a_claim_that_waits_in_vain_answers_exactly_as_claim_and_records_nothing(store, halted):
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    ok(store, "claim")
    if halted:
        ok(store, "halt", "--reason", "maintenance")
    lines = store.lines()
    for json_flag in ((), ("--json",)):
        plain = store.cli("claim", *json_flag)
        waited = store.cli("claim", "--wait", "0.3", *json_flag)
        assert (waited.returncode, waited.stdout, waited.stderr) == (plain.returncode, plain.stdout, plain.stderr)
        assert plain.stdout.startswith("halted" if halted else "wait") or json.loads(plain.stdout)["decision"] == \
            ("halted" if halted else "wait")
    assert store.lines() == lines


def test_a_claim_that_can_lease_or_is_refused_does_not_wait(store):
    """Only wait and halted are waited out: run and a refusal answer at once (here --wait is a day)."""
    store.make("a 1\n")
    refused = store.cli("claim", "--wait", "86400", "--ttl", "999999")
    assert refused.returncode == 2 and "lease_ttl_out_of_range" in refused.stderr, refused.stderr
    done = store.cli("claim", "--wait", "86400")
    assert (done.returncode, done.stdout) == (0, "run a 1 1\n")


def test_a_directory_storm_without_inotify_is_polled(tmp_path, monkeypatch):
    from storm_queue.store.directory import changes
    from tests.stores import DirectoryStorm

    monkeypatch.setattr(changes.Waker, "__init__", lambda self: setattr(self, "fd", None))
    store = DirectoryStorm(tmp_path)
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    ok(store, "claim")
    waiting = Waiting(store.root)
    ok(store, "finish", "a", "--token", "1", "--result", "failed")
    assert waiting.answer().decision == "run a 1 2"


@pytest.mark.postgresql
def test_a_runner_roles_finish_wakes_a_waiting_claim(pg_server, pg_url, pg_role, tmp_path):
    """A runner role writes through the operator's functions: its commit notifies too."""
    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    role = pg_role(prefix="runner")
    ok(store, "grant", "runner", role)
    runner = DatabaseStorm(pg_server.url_as(pg_url, role), tmp_path / "lanes")
    assert ok(runner, "claim")["decision"] == "run a 1 1"
    waiting = Waiting(pg_url)
    ok(runner, "finish", "a", "--token", "1", "--result", "failed")
    assert waiting.answer().decision == "run a 1 2"


def test_the_operators_waiting_claim_answers_review_at_once(store):
    """Issue 33, item 1: a review is the operator's to act on, so the
    operator's claim (and a declared source's) answers it, however long
    it was told to wait."""
    store.make("a 1\nb 2\n", toml='[priority]\nsources = ["cron"]\n')
    ok(store, "claim")
    ok(store, "finish", "a", "--token", "1", "--result", "ok")
    for source in ((), ("--source", "cron")):
        done = store.cli("claim", "--wait", "86400", *source, timeout=WOKEN_WITHIN)
        assert (done.returncode, done.stdout) == (0, "review a\n"), done.stderr


def test_a_wait_on_nothing_but_finished_lanes_is_answered_at_once_as_nothing_more_can_run(store):
    """Issue 33, item 1: under a batch review (unattended), a ``wait`` that
    names finished lanes when they are all that is left waits for nothing
    that can come by itself (only a lane added can run): the waiting claim
    answers it at once, and one that waited while another lane ran answers
    it as soon as that lane finishes, not at the end of its --wait."""
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 2\n", unattended=True)
    ok(store, "claim")
    ok(store, "finish", "a", "--token", "1", "--result", "ok")
    assert ok(store, "claim")["decision"] == "run b 2 1"
    waiting = Waiting(store.root)  # b runs: this claim waits
    assert waiting.thread.is_alive()
    ok(store, "finish", "b", "--token", "1", "--result", "ok")
    out = waiting.answer()  # within WOKEN_WITHIN, long before its --wait of LONG
    assert (out.outcome, out.decision, out.recorded) == ("done", "wait a b", False)
    done = store.cli("claim", "--wait", "86400", timeout=WOKEN_WITHIN)
    assert (done.returncode, done.stdout) == (0, "wait a b\n"), done.stderr


@pytest.mark.postgresql
def test_a_runner_roles_waiting_claim_waits_out_the_review_until_the_operator_settles(pg_server, pg_url, pg_role,
                                                                                      tmp_path):
    """Issue 33, item 1: a runner role may not settle, so to its claim
    ``review`` is no work at all: ``claim --wait`` waits it out, as it
    waits out ``wait``, and answers once the operator has settled the lane
    (a lane it may then run). Past its --wait it answers ``review``."""
    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    role = pg_role(prefix="runner")
    ok(store, "grant", "runner", role)
    runner = DatabaseStorm(pg_server.url_as(pg_url, role), tmp_path / "lanes")
    assert ok(runner, "claim")["decision"] == "run a 1 1"
    ok(runner, "finish", "a", "--token", "1", "--result", "ok")
    assert ok(runner, "claim")["decision"] == "review a"  # without --wait: answered as ever
    waited = runner.cli("claim", "--wait", "0.5", timeout=WOKEN_WITHIN)
    assert (waited.returncode, waited.stdout) == (0, "review a\n")  # waited in vain: answered as claim does
    seen = len(store.events())
    waiting = Waiting(runner.root)
    assert waiting.thread.is_alive()  # not answered: it waits
    ok(store, "settle", "a", "integrated")  # the operator's review
    out = waiting.answer()
    assert (out.outcome, out.decision, out.by) == ("done", "run b 2 1", f"runner:{role}")
    assert [e["action"] for e in store.events()[seen:]] == ["settle", "claim"]  # the wait recorded nothing


@pytest.mark.postgresql
def test_a_listening_connection_lost_while_waiting_is_made_again(pg_server, pg_url, tmp_path):
    """The server ends the claim's LISTEN connection: the claim counts it as
    a change, asks (nothing), listens on a new connection, and a finish
    then still wakes it."""
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    ok(store, "claim")
    waiting = Waiting(pg_url)
    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as admin:
        ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN storm_queue' "
                              "AND datname = current_database()").fetchall()
        assert ended == [(True,)], ended
        deadline = time.monotonic() + WOKEN_WITHIN
        while not (True in waiting.woken and waiting.calls > len(waiting.woken) and admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE query = 'LISTEN storm_queue' "
                "AND datname = current_database()").fetchone()):
            assert time.monotonic() < deadline and waiting.thread.is_alive(), (waiting.woken, waiting.error)
            time.sleep(0.01)
    ok(store, "finish", "a", "--token", "1", "--result", "failed")
    assert waiting.answer().decision == "run a 1 2"


def _fd_links(pid: int) -> list[str]:
    """What a live process's descriptors point to now; one it closes
    while they are read (the interpreter starting up opens and closes
    many) is left out rather than raised."""
    links = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError):
        return links
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return links


def _waiting_process(store, argv: list[str]) -> subprocess.Popen:
    """A real ``claim --wait``, returned once it waits for a change: it
    holds an inotify descriptor (a directory storm), or its LISTEN
    connection is open (a database storm)."""
    proc = subprocess.Popen([*PYTHON_M, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env())
    deadline = time.monotonic() + WOKEN_WITHIN
    while time.monotonic() < deadline and proc.poll() is None:
        if store.kind == "directory":
            if "anon_inode:inotify" in _fd_links(proc.pid):
                return proc
        else:
            from storm_queue.store.postgres import driver

            with driver.connect(store.root) as conn:
                if conn.execute("SELECT 1 FROM pg_stat_activity WHERE query = 'LISTEN storm_queue' "
                                "AND datname = current_database()").fetchone():
                    return proc
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"the claim never began to wait: {proc.communicate(timeout=30)}")


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_ctrl_c_while_waiting_exits_130_and_records_nothing(store, as_json):
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    ok(store, "claim")
    lines = store.lines()
    proc = _waiting_process(store, ["claim", "--wait", str(LONG), "--root", store.root, *(["--json"] if as_json else [])])
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=WOKEN_WITHIN)
    assert proc.returncode == 130, (out, err)
    said = re.fullmatch(r"\nstorm-queue: (interrupted while claim --wait waited for work \(since \S+Z\): nothing was "
                        r"recorded at the interrupt)\n", err)
    assert said and "Traceback" not in err, err
    if as_json:
        assert json.loads(out) == {"outcome": "error", "message": said.group(1), "exit": 130, "recorded": False}
    assert store.lines() == lines


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_ctrl_c_says_a_quarantine_was_recorded_when_the_claim_began_not_at_the_interrupt(store, as_json):
    """Issue 33, item 11: the claim that began the wait took back an
    expired lease and quarantined its lane (its last attempt); Ctrl-C
    during the wait recorded nothing, and says so, and when the rest was."""
    store.make("a 1\nb 2 a\n", toml="[runner]\nttl_min = 1\nattempts = 1\n")
    ok(store, "claim", "--ttl", "1")
    time.sleep(1.2)  # a real process keeps the real clock: the lease runs out
    proc = _waiting_process(store, ["claim", "--wait", str(LONG), "--root", store.root, *(["--json"] if as_json else [])])
    lines = store.lines()
    assert [e["action"] for e in store.events()[-2:]] == ["expire", "quarantine"]
    seq = store.events()[-1]["seq"]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=WOKEN_WITHIN)
    assert proc.returncode == 130, (out, err)
    words = json.loads(out)["message"] if as_json else err.strip().removeprefix("storm-queue: ")
    assert words.startswith("interrupted while claim --wait waited for work (since "), words
    assert "nothing was recorded at the interrupt; when the claim began it recorded " in words, words
    if store.kind == "directory":  # its lines, by number
        assert f"the expire a (line {seq - 1}), the quarantine a (line {seq})" in words, words
    else:
        assert "what it found (expired leases, quarantines)" in words, words
    assert "storm-queue log --last" in words and "Traceback" not in err
    assert store.lines() == lines  # nothing more at the interrupt


def test_next_due_is_the_first_expiry_or_schedule_after_now():
    from storm_queue.core.fold import Lease, Run
    from storm_queue.core.runs import next_due

    now = "2026-12-02T10:00:00.000000Z"
    runs = [Run(lease=Lease("h", 1, "operator:o", now, "2026-12-02T10:05:00.000000Z")),
            Run(not_before="2026-12-02T10:03:00.000000Z"),
            Run(not_before="2026-12-02T09:00:00.000000Z"),  # past: due already, nothing to wait for
            Run(lease=Lease("h", 2, "operator:o", now, now))]  # expiring now: the claim asked now sees it
    assert next_due(runs, now) == "2026-12-02T10:03:00.000000Z"
    assert next_due(runs[2:], now) is None
    assert next_due([], now) is None


def test_at_a_terminal_a_waiting_claim_says_once_that_it_waits(tmp_path):
    """A real process: its stderr is a pseudo-terminal. Not at a terminal it
    says nothing of the wait (the tests above compare its every byte)."""
    import select

    from tests.stores import DirectoryStorm

    store = DirectoryStorm(tmp_path)
    store.make("a 1\nb 2\n", toml="[runner]\nslots = 1\n")
    ok(store, "claim")
    master, slave = os.openpty()
    try:
        done = subprocess.run([*PYTHON_M, "claim", "--wait", "0.5", "--root", store.root], stdout=subprocess.PIPE,
                              stderr=slave, text=True, env=clean_env(), timeout=WOKEN_WITHIN)
        os.close(slave)
        seen = b""
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert (done.returncode, done.stdout) == (0, "wait\n")
    said = [line for line in seen.decode().replace("\r\n", "\n").splitlines() if line]
    assert said == ["storm-queue: nothing to lease now (wait); waiting up to --wait 0.5 seconds for a change that can "
                    "make a lane claimable (Ctrl-C stops, recording nothing)"], said

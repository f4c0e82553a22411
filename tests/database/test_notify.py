"""Issue 32, item 2: a database storm notifies only when something claimable
may have changed, or a lease may have ended (sql/functions/announce_change.sql):
a finish, release, cancel, add, push, settle, resume, waive, unpark, hold,
unhold, expire, recover (and a hand edit of a lane row) each send one
notice; a claim, a renew, a refusal and a no-op send none, and so does a
transaction whose own claim left every declared slot held (schema
version 14: a runner's finish --then-claim, a claim that took an expired
lease back). A notice is
signed with the storm's key, so a stranger's ``NOTIFY storm_queue`` (or a
copy of a real notice, sent again) makes a waiting claim ask again not
once; and a process's waiters share one LISTEN connection
(store/postgres/changes.py).

What a request sent is read on a LISTEN connection of the test's own: after
the request, another connection sends a marker NOTIFY, and everything that
arrives before the marker is what the request sent (notices arrive in the
order their transactions committed): no timer decides that none came."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.conftest import clean_env
from tests.stores import DatabaseStorm

pytestmark = pytest.mark.postgresql

#: the longest anything here may take before the test calls it stuck
WITHIN = 60


def ok(store, *args: str) -> dict:
    done = store.cli(*args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


class Ear:
    """A LISTEN connection of the test's own on the storm's channel."""

    def __init__(self, url: str):
        from storm_queue.store.postgres import driver

        self.url = url
        self.conn = driver.connect(url)
        self.key = bytes(self.conn.execute("SELECT key FROM storm_queue.notice").fetchone()[0])
        self.conn.execute("LISTEN storm_queue")

    def sent(self) -> list[str]:
        """The payloads on the channel before a marker sent now, from another connection."""
        from storm_queue.store.postgres import driver
        from storm_queue.store.wake import readable

        with driver.connect(self.url) as other:
            other.execute("NOTIFY storm_queue, 'marker'")
        heard: list[str] = []
        deadline = time.monotonic() + WITHIN
        while "marker" not in heard:
            assert time.monotonic() < deadline, heard
            readable(self.conn.fileno(), 1.0)
            heard += [payload for channel, payload in self.conn.notifies() if channel == "storm_queue"]
        return heard[:heard.index("marker")]

    def close(self) -> None:
        self.conn.close()


#: a request, the storm it meets, the requests before it, and the action of the line it records
QUIET = {
    "claim": ("a 1\n", [], ("claim",), "claim"),
    "renew": ("a 1\n", [("claim",)], ("renew", "a", "--token", "1"), "renew"),
    "refusal": ("a 1\n", [("claim",)], ("finish", "a", "--token", "7", "--result", "ok"), "refused"),
    "no-op": ("a 1\n", [("hold", "a", "--reason", "flaky")], ("hold", "a", "--reason", "again"), "hold"),
    "claim that waits": ("a 1\nb 2 a\n", [("claim",)], ("claim",), None),
}
NOTIFYING = {
    "finish": ("a 1\n", [("claim",)], ("finish", "a", "--token", "1", "--result", "failed"), "finish"),
    "release": ("a 1\n", [("claim",)], ("release", "a", "--token", "1"), "release"),
    "cancel": ("a 1\n", [("claim",)], ("cancel", "a", "--reason", "wrong"), "cancel"),
    "add": ("a 1\n", [], ("add", "b", "2"), "add"),
    "push": ("a 1\n", [], ("push", "b", "2"), "push"),
    "settle": ("a 1\n", [("claim",), ("finish", "a", "--token", "1", "--result", "ok")], ("settle", "a", "integrated"),
               "settle"),
    "resume": ("a 1\n", [("halt", "--reason", "maintenance")], ("resume", "--reason", "done"), "resume"),
    "waive": ("a 1\nb 2 a\n", [], ("waive", "b", "a", "--reason", "ships apart"), "waive"),
    "unpark": ("a 1\n", [("claim",), ("finish", "a", "--token", "1", "--result", "failed")], ("unpark", "a", "--reason", "fixed"),
               "unpark"),
    "hold": ("a 1\n", [], ("hold", "a", "--reason", "flaky"), "hold"),
    "unhold": ("a 1\n", [("hold", "a", "--reason", "flaky")], ("unhold", "a", "--reason", "fixed"), "unhold"),
    "recover": ("a 1\n", [("claim",)], ("recover", "a", "--force", "--reason", "host died"), "recover"),
}


def _storm(pg_url, tmp_path, queue: str, before, toml: str = "[runner]\nattempts = 1\n") -> DatabaseStorm:
    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    store.make(queue, toml=toml)
    for args in before:
        ok(store, *args)
    return store


@pytest.mark.parametrize("name", sorted(QUIET))
def test_a_request_that_frees_nothing_sends_no_notice(pg_url, tmp_path, name):
    queue, before, request, action = QUIET[name]
    store = _storm(pg_url, tmp_path, queue, before)
    ear = Ear(pg_url)
    seen = len(store.events())
    store.cli(*request, "--json")
    events = store.events()[seen:]
    if action is None:  # nothing to lease: nothing recorded
        assert events == [], events
    else:
        assert [e["action"] for e in events] == [action], events
    if name == "no-op":
        assert "noop" in events[-1], events
    assert ear.sent() == []
    ear.close()


@pytest.mark.parametrize("name", sorted(NOTIFYING))
def test_a_request_that_may_free_work_or_end_a_lease_sends_one_signed_notice(pg_url, tmp_path, name):
    from storm_queue.store.postgres.changes import signed

    queue, before, request, action = NOTIFYING[name]
    store = _storm(pg_url, tmp_path, queue, before)
    ear = Ear(pg_url)
    seen = len(store.events())
    ok(store, *request)
    events = store.events()[seen:]
    assert action in [e["action"] for e in events] and not any("noop" in e for e in events), events
    sent = ear.sent()
    assert len(sent) == 1, sent  # one a transaction, however many lines and rows it wrote
    number, mac = sent[0].split(" ")
    assert mac == signed(ear.key, int(number))
    ear.close()


@pytest.mark.parametrize("slots", [1, 2])
def test_a_lease_taken_back_by_a_claim_notifies_only_while_a_slot_is_left_free(pg_url, tmp_path, clock, slots):
    """A claim that finds a lease expired records the expire, then leases:
    one notice (the expire's) when a slot is left free after it, where a
    claim alone sends none; none when its claim took the last slot (no
    waiting claim could lease anything)."""
    store = _storm(pg_url, tmp_path, "a 1\nb 2\nc 3\n", [], toml=f"[runner]\nslots = {slots}\n")
    assert ok(store, "claim", "--ttl", "600")["decision"] == "run a 1 1"
    ear = Ear(pg_url)
    clock.advance(601)
    seen = len(store.events())
    assert ok(store, "claim")["decision"] == "run a 1 2"
    assert [e["action"] for e in store.events()[seen:]] == ["expire", "claim"]
    assert len(ear.sent()) == (1 if slots == 2 else 0)
    ear.close()


@pytest.mark.parametrize("slots, queue, notices", [(1, "a 1\nb 2\n", 0), (2, "a 1\nb 2\nc 3\n", 1),
                                                   (1, "a 1\n", 1)])
def test_a_finish_then_claim_notifies_unless_its_claim_took_the_last_slot(pg_url, tmp_path, slots, queue, notices):
    """A runner's finish --then-claim frees a slot and takes it again: with
    every slot held after it, no waiting claim could lease anything, and
    no notice is sent (issue 32, item 5: idle waiters beside busy
    runners); with a slot left free, or when its claim leased nothing,
    the finish's notice is sent, once."""
    from storm_queue.store.postgres.changes import signed

    store = _storm(pg_url, tmp_path, queue, [], toml=f"[runner]\nslots = {slots}\nunattended = true\n")
    assert ok(store, "claim")["decision"] == "run a 1 1"
    ear = Ear(pg_url)
    seen = len(store.events())
    done = ok(store, "finish", "a", "--token", "1", "--result", "ok", "--then-claim")
    leased = done["claim"]["decision"].startswith("run ")
    assert [e["action"] for e in store.events()[seen:]] == ["finish", "claim"] if leased else ["finish"]
    sent = ear.sent()
    assert len(sent) == notices, (sent, done)
    for payload in sent:
        number, mac = payload.split(" ")
        assert mac == signed(ear.key, int(number))
    ear.close()


def test_a_runner_roles_finish_notifies_as_the_operators_does(pg_server, pg_url, pg_role, tmp_path):
    """A line is announced when its transaction commits, outside the
    serving function that wrote it: a runner role's finish (which may not
    write the notice row itself) sends its one signed notice, and its
    finish --then-claim that took the last slot sends none."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.changes import signed

    store = _storm(pg_url, tmp_path, "a 1\nb 2\nc 3\n", [], toml="[runner]\nslots = 1\nunattended = true\n")
    role = pg_role(prefix="runner")
    ok(store, "grant", "runner", role)
    ear = Ear(pg_url)
    storm = Storm.find(pg_server.url_as(pg_url, role))
    try:
        assert storm.claim(holder="r").decision == "run a 1 1"
        assert ear.sent() == []
        assert storm.finish("a", 1, "ok", then_claim=True, holder="r").claim.decision == "run b 2 1"
        assert ear.sent() == []  # the slot freed and taken again: no waiting claim could lease anything
        assert storm.finish("b", 1, "failed").outcome == "done"
        sent = ear.sent()
        assert len(sent) == 1 and sent[0].split(" ")[1] == signed(ear.key, int(sent[0].split(" ")[0])), sent
    finally:
        storm.close()
        ear.close()


def test_a_hand_edit_of_the_lanes_notifies_and_numbers_only_grow(pg_url, tmp_path):
    """The operator's INSERT into the lane table (no line) notifies too, and
    each notice's number is the one after the last."""
    store = _storm(pg_url, tmp_path, "a 1\n", [])
    ear = Ear(pg_url)
    ok(store, "add", "b", "2")
    store._sql("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)", [("c", "3")])
    sent = ear.sent()
    assert [int(p.split(" ")[0]) for p in sent] == [int(sent[0].split(" ")[0]) + i for i in range(2)], sent
    ear.close()


class Asking:
    """A waiting claim in a thread, through the library, counting its asks
    of the server (``leases._claim``: one round trip each) and holding its
    ``Changes`` (``changes``) once it waits."""

    def __init__(self, url: str, monkeypatch):
        from storm_queue.service import leases
        from storm_queue.service.storm import Storm

        self.asks = 0
        real = leases._claim

        def counted(*args, **kwargs):
            self.asks += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(leases, "_claim", counted)
        self.storm = Storm.find(url, env=clean_env())
        self.changes = None
        ready = threading.Event()
        opened = self.storm.store.changes
        me = self

        class Spied:
            def __enter__(self):
                me.changes = opened().__enter__()
                return self

            def __exit__(self, *exc):
                return me.changes.__exit__(*exc)

            def wait(self, timeout):
                ready.set()
                return me.changes.wait(timeout)

        self.storm.store.changes = Spied
        self.out, self.error = None, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert ready.wait(WITHIN), "the claim never began to wait"

    def _run(self) -> None:
        try:
            self.out = self.storm.claim(wait=600)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            self.error = exc
        finally:
            self.storm.close()

    def answer(self):
        self.thread.join(WITHIN)
        assert not self.thread.is_alive() and self.error is None, self.error
        return self.out


def test_a_strangers_flood_of_notices_makes_a_waiting_claim_ask_again_not_once(pg_server, pg_url, pg_role, tmp_path,
                                                                              monkeypatch):
    """A role of no standing in the storm (it may connect, as any role may)
    sends 300 notices on the storm's channel: empty, made up, and copies of
    a real one the storm sent while the claim waited (which the claim asked
    again for, once). The claim asks again only for the real ones."""
    from storm_queue.store.postgres import driver

    store = _storm(pg_url, tmp_path, "a 1\nb 2\nc 3\n", [("claim",)], toml="[runner]\nslots = 1\n")
    stranger = pg_server.url_as(pg_url, pg_role(prefix="stranger"))
    with driver.connect(stranger) as spy:
        spy.execute("LISTEN storm_queue")
        asking = Asking(pg_url, monkeypatch)
        assert asking.asks == 2  # the first ask, and the one once it listens
        ok(store, "hold", "c", "--reason", "flaky")  # a real notice: c may not run now (the slot is busy still)
        deadline = time.monotonic() + WITHIN
        while asking.asks < 3:
            assert time.monotonic() < deadline and asking.thread.is_alive(), asking.error
            time.sleep(0.01)
        from storm_queue.store.wake import readable

        copied: list[str] = []
        while not copied:
            assert time.monotonic() < deadline
            readable(spy.fileno(), 1.0)
            copied += [p for c, p in spy.notifies() if c == "storm_queue"]
        number, mac = copied[0].split(" ")
        made_up = ["", "x", copied[0], f"{int(number) + 1} {mac}", f"{int(number) + 1} {'0' * 64}",
                   f"{10 ** 30} {mac}", f"-1 {mac}", copied[0] + " ", "1e9 " + mac]
        flood = [made_up[i % len(made_up)] for i in range(300)]
        for payload in flood:  # each a transaction of its own
            spy.execute("SELECT pg_notify('storm_queue', %s)", (payload,))
        while asking.changes.strangers < len(flood):  # every one reached the claim's connection, and was passed over
            assert time.monotonic() < deadline and asking.thread.is_alive(), (asking.changes.strangers, asking.error)
            time.sleep(0.01)
        assert asking.asks == 3  # 0 extra
    ok(store, "finish", "a", "--token", "1", "--result", "failed")
    assert asking.answer().decision == "run a 1 2"
    assert asking.asks == 4


def _listening(pg_server, url: str) -> int:
    from storm_queue.store.postgres import driver

    with pg_server.admin(driver.conninfo(url)["dbname"]) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN storm_queue' "
                            "AND datname = current_database()").fetchone()[0]


def test_the_waiters_of_one_process_share_one_listen_connection(pg_server, pg_url, tmp_path):
    """Three waits at once, from two Storm objects on the same URL, in
    three threads: one LISTEN connection; one notice wakes all three; the
    connection is closed when the last leaves."""
    from storm_queue.service.storm import Storm

    store = _storm(pg_url, tmp_path, "a 1\n", [])
    storms = [Storm.find(pg_url, env=clean_env()) for _ in range(2)]
    entered, woken = threading.Barrier(4), []
    done = threading.Event()

    def waiter(storm) -> None:
        with storm.store.changes() as changes:
            entered.wait(WITHIN)
            deadline = time.monotonic() + WITHIN
            while not changes.wait(0.2):
                if time.monotonic() > deadline:
                    return
            woken.append(True)
            done.wait(WITHIN)

    threads = [threading.Thread(target=waiter, args=(s,), daemon=True) for s in (storms[0], storms[1], storms[1])]
    for t in threads:
        t.start()
    entered.wait(WITHIN)
    assert _listening(pg_server, pg_url) == 1
    ok(store, "add", "b", "2")
    deadline = time.monotonic() + WITHIN
    while len(woken) < 3:
        assert time.monotonic() < deadline, woken
        time.sleep(0.01)
    assert _listening(pg_server, pg_url) == 1
    done.set()
    for t in threads:
        t.join(WITHIN)
    for storm in storms:
        storm.close()
    deadline = time.monotonic() + WITHIN
    while _listening(pg_server, pg_url):
        assert time.monotonic() < deadline, "the listening connection outlived its last waiter"
        time.sleep(0.02)


def test_a_view_waiting_for_every_change_sees_a_renew_that_notifies_no_one(pg_url, tmp_path):
    """``serve``'s wait (``changes(every=True)``) reads the log's head on the
    shared connection twice a second: a renew, which sends no notice, wakes
    it; a wait with nothing appended is not woken."""
    from storm_queue.service.storm import Storm

    store = _storm(pg_url, tmp_path, "a 1\n", [("claim",)])
    storm = Storm.find(pg_url, env=clean_env())
    ear = Ear(pg_url)
    with storm.store.changes(every=True) as changes:
        assert changes.wait(1.2) is False  # nothing appended: two readings of the head, unmoved
        ok(store, "renew", "a", "--token", "1")
        deadline = time.monotonic() + WITHIN
        while not changes.wait(0.2):
            assert time.monotonic() < deadline, "the renew never reached the view"
    assert ear.sent() == []  # and it was not told by a notice
    storm.close()
    ear.close()


def test_a_request_of_many_lines_reads_each_line_a_bounded_number_of_times_to_announce_it(pg_server, pg_url,
                                                                                          tmp_path):
    """An ``add --from`` of n lanes records n lines in one transaction, and
    the deferred check fired at its commit for each asked every later line
    whether it was a claim: n*n/2 reads (20,000 lanes took ten minutes to
    commit). A line's check now ends at once once its transaction has sent
    its one notice. Counted by the server's function statistics of the
    request's own backend (a real process: its backend's statistics are
    flushed when it ends)."""
    from storm_queue.store.postgres.driver import conninfo

    store = _storm(pg_url, tmp_path, "", [])
    dbname = conninfo(pg_url)["dbname"]
    with pg_server.admin(dbname) as admin:
        admin.execute(f'ALTER DATABASE "{dbname}" SET track_functions = \'all\'')
        admin.execute("SELECT pg_stat_reset()")
    n = 300
    batch = tmp_path / "batch.txt"
    batch.write_text("".join(f"l{i} {i + 1}\n" for i in range(n)))
    ear = Ear(pg_url)
    done = store.cli("add", "--from", str(batch), process=True)
    assert done.returncode == 0, done.stderr
    assert len([e for e in store.events() if e["action"] == "add"]) == n
    assert len(ear.sent()) == 1
    ear.close()
    deadline = time.monotonic() + WITHIN
    with pg_server.admin(dbname) as admin:
        while True:
            admin.execute("SELECT pg_stat_clear_snapshot()")
            calls = admin.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
                                  "WHERE funcname = 'line_jsonb'").fetchone()[0]
            if calls or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert 0 < calls <= 3 * n, calls

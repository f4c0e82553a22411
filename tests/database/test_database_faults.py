"""Faults on a storm kept in PostgreSQL (issue 11), each one real: a backend
terminated in the middle of a request, the server restarted under load, a
writer killed mid-transaction, a runner killed while its lease holds.

After each: no acknowledged request lost (every request that exited 0 is on
the log, found by its own --reason or --key), none recorded twice, verify
says sound, and the lane ``list`` shows is what the log's events replay to."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from tests.conftest import REPO, clean_env, run_cli
from tests.faults.crash_harness import replayed

pytestmark = pytest.mark.postgresql


# -- helpers -----------------------------------------------------------------

def argv(url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "storm_queue", *args, "--root", url]


def ok(url: str, *args: str) -> dict:
    done = run_cli(url, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def dbname(url: str) -> str:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    return conninfo_to_dict(url)["dbname"]


def events(pg_server, url: str) -> list[dict]:
    with pg_server.admin(dbname(url)) as conn:
        rows = conn.execute("SELECT line FROM storm_queue.event ORDER BY seq").fetchall()
    return [json.loads(bytes(r[0])) for r in rows]


def on_log(evs: list[dict], field: str, value: str) -> int:
    """How many lines carry FIELD (reason or key) = VALUE."""
    return sum(1 for e in evs if e.get(field) == value)


def assert_sound_and_derived(pg_server, url: str) -> list[dict]:
    """verify says sound, and ``list``'s prioritised rows (and verify's lane)
    are what the log replays to; returns the events."""
    audit = ok(url, "verify")
    evs = events(pg_server, url)
    assert audit["sound"] is True, audit
    assert audit["lines"] == len(evs) == evs[-1]["seq"]
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
    lane, named = replayed(evs)
    assert audit["lane"] == lane and sorted(audit["named"]) == sorted(named), (audit, lane, named)
    rows = ok(url, "list")["rows"]
    assert [r["slug"] for r in rows if r["prioritised"]] == lane, (rows, lane)
    return evs


#: what a session runs (in a transaction) to hold the storm's lock as every writer takes it (queries.sql lock_storm)
HOLD_THE_STORM = "LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE"


def backend_waiting(watcher, db: str, event: str, timeout: float = 20.0) -> int:
    """The pid of the storm-queue backend on DB waiting on a lock of kind EVENT
    (polled from WATCHER, a separate autocommit connection)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = watcher.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'storm-queue' "
            "AND wait_event_type = 'Lock' AND wait_event = %s", (db, event)).fetchone()
        if row:
            return row[0]
        time.sleep(0.05)
    raise AssertionError(f"no storm-queue backend waited on a {event} lock within {timeout} s")


def backend_gone(watcher, pid: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
        assert time.monotonic() < deadline, f"backend {pid} still there after {timeout} s"
        time.sleep(0.05)


@pytest.fixture
def db(pg_url: str) -> str:
    done = run_cli(None, "init", pg_url)
    assert done.returncode == 0, done.stderr
    return pg_url


def test_the_worktree_package_is_the_one_under_test() -> None:
    import storm_queue

    assert os.path.dirname(storm_queue.__file__) == str(REPO / "storm_queue")


# -- 1. pg_terminate_backend in the middle of a request -----------------------

def test_a_backend_terminated_while_waiting_for_the_storm_is_not_recorded_and_a_retry_succeeds(pg_server, db) -> None:
    """A real process: it waits for the storm while the test ends its backend,
    and what the driver logs while closing its broken pipeline must not
    reach the process's stderr. Nothing of the bump's line was sent: exit 5,
    nothing changed, a retry is safe."""
    ok(db, "add", "a", "1")
    ok(db, "add", "b", "2")
    acked = {"r-bump-b": ok(db, "bump", "b", "--reason", "r-bump-b")}
    before = events(pg_server, db)
    name = dbname(db)
    with pg_server.admin(name) as holder, pg_server.admin(name) as watcher:
        holder.execute("BEGIN")
        holder.execute(HOLD_THE_STORM)
        proc = subprocess.Popen(argv(db, "bump", "a", "--json", "--reason", "r-killed"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            pid = backend_waiting(watcher, name, "relation")
            assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            holder.execute("ROLLBACK")
    assert proc.returncode == 5, (out, err)
    answer = json.loads(out)
    assert answer["recorded"] is False and answer["exit"] == 5, answer
    assert "nothing changed, a retry is safe" in answer["message"]
    assert err.splitlines() == [f"storm-queue: {answer['message']}"]  # no driver noise ("error ignored ...")
    assert events(pg_server, db) == before  # nothing was appended
    acked["r-retry"] = ok(db, "bump", "a", "--reason", "r-retry")
    assert acked["r-retry"]["moved"] == ["a"]
    evs = assert_sound_and_derived(pg_server, db)
    for reason in acked:
        assert on_log(evs, "reason", reason) == 1, reason
    assert on_log(evs, "reason", "r-killed") == 0
    assert replayed(evs)[0] == ["b", "a"]


# -- 2. the server restarted (immediate) under load ---------------------------

def test_the_server_restarted_under_load_every_answer_is_truthful(pg_server, db) -> None:
    """Real processes: four writers at once, from threads, while the server restarts."""
    lanes = [f"l{i}" for i in range(4)]
    for i, slug in enumerate(lanes):
        ok(db, "add", slug, str(100 + i))
    answers: list[tuple[str, tuple[str, ...], subprocess.CompletedProcess]] = []
    lock = threading.Lock()
    done_count = [0]

    def worker(w: int) -> None:
        for j in range(15):
            verb = "bump" if (w + j) % 3 != 2 else "unbump"
            slug = lanes[(w + j * 3) % len(lanes)]
            key = f"w{w}-r{j}"
            args = (verb, slug, "--key", key, "--json")
            done = subprocess.run(argv(db, *args), capture_output=True, text=True, env=clean_env(), timeout=60)
            with lock:
                answers.append((key, args, done))
                done_count[0] += 1

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while done_count[0] < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    # in the middle of requests, not between them: hold the storm a moment
    # so that writers are inside their transactions when the server goes
    name = dbname(db)
    holder, watcher = pg_server.admin(name), pg_server.admin(name)
    try:
        holder.execute("BEGIN")
        holder.execute(HOLD_THE_STORM)
        backend_waiting(watcher, name, "relation")
        time.sleep(0.5)
        pg_server.restart("immediate")
    finally:
        for conn in (holder, watcher):
            conn.close()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert len(answers) == 60

    after = ok(db, "bump", lanes[0], "--key", "after-restart")  # the storm goes on
    assert after["recorded"] is True
    evs = assert_sound_and_derived(pg_server, db)
    assert on_log(evs, "key", "after-restart") == 1
    print("answers (exit, recorded):", Counter(
        (d.returncode, repr(json.loads(d.stdout).get("recorded", "absent")) if d.stdout.strip() else "-")
        for _, _, d in answers))
    failed = 0
    for key, args, done in answers:
        assert "Traceback" not in done.stderr and "crashed" not in done.stderr, (args, done.stderr)
        count = on_log(evs, "key", key)
        assert count <= 1, (key, count)  # none recorded twice
        doc = json.loads(done.stdout) if done.stdout.strip() else {}
        if done.returncode == 0:
            assert count == 1, (args, done.stdout)  # no acknowledged request lost
            continue
        failed += 1
        recorded = doc.get("recorded", "absent")
        if recorded is True:
            assert count == 1, (args, done.returncode, done.stdout, done.stderr)
        elif recorded is False:
            assert count == 0, (args, done.returncode, done.stdout, done.stderr)
        elif recorded is None:
            pass  # "cannot be asked whether it was written": no claim either way
        else:  # no answer on the record at all
            raise AssertionError((args, done.returncode, done.stdout, done.stderr))
        if done.returncode == 5:  # the server was away, or the connection went before the request was sent
            assert recorded is False and "a retry is safe" in doc["message"], (args, done.stdout)
        if doc.get("outcome") == "error":  # not a refusal: 2 is a refusal's, never a server away's
            assert done.returncode in (4, 5), (args, done.stdout)
            assert done.stderr.splitlines() == [f"storm-queue: {doc['message']}"], done.stderr  # no driver noise
    # the restart happened under load: at least one request felt it
    assert failed >= 1, [(a, d.returncode) for _, a, d in answers]
    # and at least one was waiting inside its transaction: exit 5, nothing changed
    assert any(d.returncode == 5 and json.loads(d.stdout).get("recorded") is False for _, _, d in answers)


# -- 3. a writer killed with SIGKILL mid-transaction --------------------------

def test_a_writer_killed_mid_transaction_leaves_no_line_and_the_next_request_chains_on(pg_server, db) -> None:
    """A real process: the test kills it with SIGKILL mid-transaction."""
    ok(db, "add", "a", "1")
    ok(db, "add", "b", "2")
    acked = {"r-first": ok(db, "bump", "b", "--reason", "r-first")}
    before = events(pg_server, db)
    name = dbname(db)
    with pg_server.admin(name) as blocker, pg_server.admin(name) as watcher:
        blocker.execute("BEGIN")
        blocker.execute("SELECT * FROM storm_queue.state FOR UPDATE")
        proc = subprocess.Popen(argv(db, "bump", "a", "--json", "--reason", "r-killed"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            pid = backend_waiting(watcher, name, "transactionid")  # its line's insert check, moving the head
            query = watcher.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]
            assert "INSERT INTO storm_queue.event" in query
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            blocker.execute("ROLLBACK")
        assert proc.returncode == -signal.SIGKILL
        backend_gone(watcher, pid)
    assert events(pg_server, db) == before  # the killed transaction never committed
    acked["r-next"] = ok(db, "bump", "a", "--reason", "r-next")
    evs = assert_sound_and_derived(pg_server, db)
    assert evs[-1]["seq"] == before[-1]["seq"] + 1 and evs[-1]["reason"] == "r-next"
    for reason in acked:
        assert on_log(evs, "reason", reason) == 1, reason
    assert on_log(evs, "reason", "r-killed") == 0
    assert replayed(evs)[0] == ["b", "a"]


# -- 4. a runner killed with SIGKILL while its lease holds ---------------------

def test_a_killed_runners_lease_expires_and_its_late_finish_is_refused(pg_server, db, tmp_path) -> None:
    """A real process: the runner is killed with SIGKILL."""
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nttl_min = 1\nttl = 2\n")
    assert ok(db, "declare", str(toml))["outcome"] == "done"
    ok(db, "add", "a", "1")
    ok(db, "add", "b", "2")
    ok(db, "bump", "b", "--reason", "r-bump")
    # a runner: claims, then goes on working (sleeping) until it is killed
    script = ("import subprocess, sys, time\n"
              "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "print(done.returncode, done.stdout.strip(), flush=True)\n"
              "time.sleep(60)\n")
    runner = subprocess.Popen([sys.executable, "-c", script,
                               *argv(db, "claim", "--holder", "first", "--ttl", "2", "--json")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        first_line = runner.stdout.readline()
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=30)
    code, _, doc = first_line.partition(" ")
    assert code == "0", first_line
    claimed = json.loads(doc)
    assert claimed["token"] == 1 and claimed["decision"].startswith("run b 2"), claimed
    time.sleep(3)  # the lease (ttl 2) expires; nobody renews it
    again = ok(db, "claim", "--holder", "other", "--ttl", "60")
    assert again["token"] == 2 and again["decision"].startswith("run b 2"), again
    late = run_cli(db, "finish", "b", "--token", "1", "--result", "ok", "--json")
    assert late.returncode == 2, (late.stdout, late.stderr)
    assert json.loads(late.stdout)["code"] == "stale_fence"
    evs = assert_sound_and_derived(pg_server, db)
    runs = [(e["action"], e.get("token"), e.get("holder")) for e in evs
            if e["action"] in ("claim", "expire", "finish", "recover")]
    assert runs[0] == ("claim", 1, "first")
    expire = next(i for i, r in enumerate(runs) if r[:2] == ("expire", 1))  # the lease of token 1 ran out
    assert runs[expire + 1] == ("claim", 2, "other"), runs
    assert not any(a == "finish" for a, _, _ in runs)  # the late finish changed nothing
    refused = [e for e in evs if e["action"] == "refused"]
    assert refused[-1]["code"] == "stale_fence" and refused[-1]["requested"] == "finish"
    assert on_log(evs, "reason", "r-bump") == 1
    listing = ok(db, "list")
    lease = next(r for r in listing["rows"] if r["slug"] == "b")["lease"]
    assert lease["token"] == 2 and lease["holder"] == "other", lease
    assert ok(db, "finish", "b", "--token", "2", "--result", "ok")["outcome"] == "done"


# -- 5. a long-lived storm object whose connection ends between requests -------

def test_a_long_lived_storm_whose_connection_ended_while_idle_reconnects_and_answers(pg_server, db) -> None:
    """Nothing of the next request was sent on the dead connection, so the
    storm opens a new one before it sends it: answered normally, recorded once."""
    from storm_queue.service.storm import Storm

    ok(db, "add", "a", "1")
    storm = Storm.find(db, env=clean_env())
    assert storm.bump("a", reason="r-first").outcome == "done"
    pid = storm.store.conn.info.backend_pid
    with pg_server.admin(dbname(db)) as watcher:
        assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
        backend_gone(watcher, pid)
    assert storm.unbump("a", reason="r-after").outcome == "done"  # on a new connection
    assert storm.store.conn.info.backend_pid != pid
    evs = assert_sound_and_derived(pg_server, db)
    assert [on_log(evs, "reason", r) for r in ("r-first", "r-after")] == [1, 1]


def test_a_connection_that_died_unseen_is_asked_again_once_on_a_new_one(pg_server, db, monkeypatch) -> None:
    """The server's end of an idle connection can arrive after the storm
    looked (``alive``): the request's first statement, a read, then fails,
    and is sent again once on a new connection; the request goes on."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres import store as database

    ok(db, "add", "a", "1")
    storm = Storm.find(db, env=clean_env())
    assert storm.bump("a", reason="r-first").outcome == "done"
    pid = storm.store.conn.info.backend_pid
    with pg_server.admin(dbname(db)) as watcher:
        assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
        backend_gone(watcher, pid)
    looked = []
    monkeypatch.setattr(database, "alive", lambda conn: looked.append(conn) or not conn.closed)  # sees nothing yet
    assert storm.unbump("a", reason="r-after").outcome == "done"
    assert looked and storm.store.conn.info.backend_pid != pid
    evs = assert_sound_and_derived(pg_server, db)
    assert [on_log(evs, "reason", r) for r in ("r-first", "r-after")] == [1, 1]


def test_looking_whether_an_idle_connection_lives_loses_no_notification(pg_server, db) -> None:
    """``alive`` reads what waits on the socket: a notification among it
    still reaches ``notifies()`` at once (a waiting claim is woken by one)."""
    from storm_queue.store.postgres.store import Database

    store = Database(db, env=clean_env())
    listening = store.conn
    listening.execute("LISTEN storm_probe")
    with pg_server.admin(dbname(db)) as other:
        other.execute("NOTIFY storm_probe, 'hello'")
    assert select.select([listening.fileno()], [], [], 20)[0]  # it has arrived, unread
    assert store.conn is listening  # looked, read it, and found the connection alive
    got = listening.notifies()
    assert got == [("storm_probe", "hello")]
    store.close()


# -- 6. a server that cannot be reached: exit 5, never 2 -----------------------

def test_a_stopped_server_answers_exit_5_nothing_changed_and_the_storm_goes_on(pg_server, db) -> None:
    """Real processes: the answer of a server that is down, stderr included."""
    from storm_queue.core.errors import Unreachable
    from storm_queue.service.storm import Storm

    ok(db, "add", "a", "1")
    storm = Storm.find(db, env=clean_env())
    assert storm.bump("a", reason="r-first").outcome == "done"
    before = events(pg_server, db)
    with pg_server.stopped():
        for args in (("unbump", "a", "--reason", "r-down"), ("list",), ("claim",)):
            done = subprocess.run(argv(db, *args, "--json"), capture_output=True, text=True, env=clean_env(),
                                  timeout=60)
            assert done.returncode == 5, (args, done.stdout, done.stderr)
            answer = json.loads(done.stdout)
            assert answer["exit"] == 5 and answer["recorded"] is False, answer
            assert answer["message"].startswith("cannot connect to the database storm ") and \
                answer["message"].endswith("; nothing changed, a retry is safe"), answer
            assert done.stderr.splitlines() == [f"storm-queue: {answer['message']}"], done.stderr
        with pytest.raises(Unreachable, match="a retry is safe"):  # the long-lived storm: its connection died
            storm.unbump("a", reason="r-down")
    assert events(pg_server, db) == before
    assert storm.unbump("a", reason="r-back").outcome == "done"  # the same object, once the server is back
    evs = assert_sound_and_derived(pg_server, db)
    assert [on_log(evs, "reason", r) for r in ("r-first", "r-down", "r-back")] == [1, 0, 1]


def test_a_port_nobody_listens_on_is_exit_5_and_a_database_that_does_not_exist_is_exit_2(pg_server, db) -> None:
    from tests.pgserver import free_port

    closed = f"postgresql://nobody@127.0.0.1:{free_port()}/storm?connect_timeout=3"
    for args in (("bump", "a"), ("list",), ("init",)):
        done = run_cli(None if args == ("init",) else closed, *(("init", closed) if args == ("init",) else args),
                       "--json")
        assert done.returncode == 5, (args, done.stdout, done.stderr)
        answer = json.loads(done.stdout)
        assert answer["recorded"] is False and "Connection refused" in answer["message"], answer
        assert "a retry is safe" in answer["message"], answer
    missing = db.replace(f"/{dbname(db)}", "/no_such_storm_db")
    done = run_cli(missing, "bump", "a", "--json")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert 'database "no_such_storm_db" does not exist' in json.loads(done.stdout)["message"]


# -- 7. a backend ended between a request's first query and its second ---------

@pytest.mark.parametrize("how", ["library", "command line"])
def test_a_backend_ended_between_the_declaration_and_the_schema_version_is_no_crash(pg_server, db, monkeypatch,
                                                                                    how) -> None:
    """Issue 21 item 7: the database crash harness (bench/crash.py --store
    postgresql) met a request whose backend was ended by
    pg_terminate_backend right after it read the declaration, before it
    read the schema's version (read once a connection): the driver's
    OperationalError escaped, a crash (exit 4 "crashed", a traceback from
    the library), until issue 21 item 8 read the version under the storm's
    errors. Here the backend is ended at exactly that moment, its last
    words not yet read when the storm looks whether its connection lives
    (``alive`` sees nothing): nothing was sent of the request, so it is
    Unreachable (exit 5, recorded false), and asking again under its key
    works."""
    from storm_queue.core.errors import Unreachable
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres import store as database
    from storm_queue.store.postgres import version

    ok(db, "add", "a", "1")
    before = events(pg_server, db)
    real = version.read

    def ended_first(store, fresh=False):
        pid = store.conn.info.backend_pid
        with pg_server.admin(dbname(db)) as watcher:
            assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0] is True
            backend_gone(watcher, pid)
        monkeypatch.setattr(database, "alive", lambda conn: not conn.closed)  # the ending not yet seen
        monkeypatch.setattr(version, "read", real)  # once
        return real(store, fresh)

    monkeypatch.setattr(version, "read", ended_first)
    if how == "library":
        storm = Storm.find(db, env=clean_env())
        with pytest.raises(Unreachable, match="a retry is safe") as lost:
            storm.bump("a", key="k-ended")
        assert lost.value.recorded is False
        assert storm.bump("a", key="k-ended").outcome == "done"  # asked again under its key, on a new connection
    else:
        done = run_cli(db, "bump", "a", "--key", "k-ended", "--json")
        assert done.returncode == 5, (done.stdout, done.stderr)
        assert "crashed" not in done.stderr and json.loads(done.stdout)["recorded"] is False, done.stdout
        assert events(pg_server, db) == before
        assert ok(db, "bump", "a", "--key", "k-ended")["outcome"] == "done"
    evs = assert_sound_and_derived(pg_server, db)
    assert on_log(evs, "key", "k-ended") == 1


# -- a statement the server cancels; a server that is read-only ------------------------------

def test_a_cancelled_statement_or_a_read_only_server_is_exit_5_and_nothing_is_recorded(pg_server, db, tmp_path) -> None:
    """The server refuses the whole transaction: a role's, a database's or
    the URL's statement_timeout cancels a request waiting for the storm's
    lock (it was "another writer held the storm", or for the operator's
    path "the connection was lost"), and a read-only server (a standby,
    default_transaction_read_only) refuses its first insert (it was a
    crash, exit 4). Each is exit 5, in its own words, nothing recorded;
    the operator's request path (bump, add) and the served one (claim:
    the storm declares a runner policy) alike."""
    from urllib.parse import quote

    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nslots = 2\n")
    for args in (("add", "a", "1"), ("add", "b", "2"), ("declare", str(toml))):
        ok(db, *args)
    before = events(pg_server, db)

    def with_options(options: str) -> str:
        return f"{db}{'&' if '?' in db else '?'}options={quote(options)}"

    read_only = with_options("-c default_transaction_read_only=on")
    for args in (("bump", "a"), ("add", "c", "3"), ("claim", "--holder", "h")):
        done = run_cli(read_only, *args)
        assert done.returncode == 5 and "is read-only now" in done.stderr and "crashed" not in done.stderr, \
            (args, done.stderr)
    impatient = with_options("-c statement_timeout=300")
    with pg_server.admin(dbname(db)) as holder:
        holder.execute("BEGIN")
        holder.execute(HOLD_THE_STORM)
        for args in (("bump", "a"), ("claim", "--holder", "h")):
            done = run_cli(impatient, *args)
            assert done.returncode == 5 and "the server cancelled the" in done.stderr, (args, done.stderr)
        holder.execute("ROLLBACK")
    assert events(pg_server, db) == before
    assert ok(db, "claim", "--holder", "h")["decision"] == "run a 1 1"


def test_a_served_call_cancelled_after_its_commit_says_it_was_recorded(pg_server, db, tmp_path, monkeypatch) -> None:
    """A served call is its function's transaction, committed, then a
    statement that makes it durable: a statement_timeout (or a cancel)
    that lands after the commit must not say "nothing changed". Planted:
    a pause after the commit, longer than the URL's statement_timeout. The
    server is asked by the call's token: recorded (exit 4, recorded True,
    "do not ask again"), the claim on the log once."""
    from urllib.parse import quote

    from storm_queue import RecordFailed, Storm
    from storm_queue.store.postgres import served

    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nslots = 2\n")
    for args in (("add", "a", "1"), ("declare", str(toml))):
        ok(db, *args)
    real = served.q
    monkeypatch.setattr(served, "q", lambda name: real(name).rstrip().rstrip(";") + ";\nSELECT pg_sleep(5);"
                        if name == "served_durably" else real(name))
    storm = Storm.find(f"{db}{'&' if '?' in db else '?'}options={quote('-c statement_timeout=1000')}")
    try:
        with pytest.raises(RecordFailed) as failed:
            storm.claim(holder="h")
    finally:
        storm.close()
    assert failed.value.recorded is True and "do not ask again" in str(failed.value), str(failed.value)
    assert [e["action"] for e in events(pg_server, db)].count("claim") == 1

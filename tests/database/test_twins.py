"""The served claim's parts, each held to its Python twin (issue 31, item
2): serve_claim (sql/functions/serve_claim.sql) is a sequence of server
functions named after the core functions they mirror, and each one is
asked here on random inputs, beside its twin, in one storm's database.

The pure parts, on drawn values:

- ``next_due``: core/runs.py ``next_due`` (the moment time alone changes the decision);
- ``decide``: core/resolver.py ``decide`` (the decision line);
- ``lease``: core/runs.py ``lease`` (the token, attempt and expiry a claim takes);
- ``stamp``: core/clock.py ``stamp`` (a POSIX time as the log writes it).

The parts that read the storm's tables, on random storms written as rows
(in a transaction rolled back after each), beside the Python path's
``lane.Snapshot`` of the same rows:

- ``expiries``: core/runs.py ``expiries`` (the lines a claim writes first);
- ``decided`` (its walks ``walk_priority`` and ``walk_queue``, the mark
  ``open_mark``): core/resolver.py ``decided`` (the ready lane, the blocked
  lanes met before it and their abandoned dependencies);
- ``finished_in_run_order``: core/resolver.py ``in_run_order`` of
  ``decided``'s finished lanes;
- ``claim_decision``: core/runs.py ``plan_claim``'s decision (the slots);
- ``serve_lease`` (with ``fold_claim``): ``plan_claim``'s lease and claim
  line, and core/fold.py's run after that line.

The fold of a line, on random runs of log lines folded into an empty
storm: ``fold_line`` (``fold_shift``, ``fold_storm``, ``fold_run``,
``fold_lease``) against core/fold.py ``Fold.step``, compared as
store/postgres/folded.py reads both sides.

serve_claim whole is held to core/runs.py ``plan_claim`` by the served-claim
property test of tests/database/test_served.py."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from storm_queue.core import clock, resolver, runs
from storm_queue.core.fold import Lease, Run
from tests.conftest import examples, run_cli

pytestmark = pytest.mark.postgresql

EXAMPLES = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: POSIX times from 1970 to 2200, in microseconds (the stamps a storm writes)
times = st.integers(min_value=0, max_value=7_258_118_400_000_000).map(lambda us: us / 1_000_000)
stamps = times.map(clock.stamp)
names = st.text(alphabet="abcxyz019._-", min_size=1, max_size=6).filter(lambda s: s[0] not in "._-" and ".." not in s)


@pytest.fixture(scope="module")
def conn(pg_server, tmp_path_factory):
    """An operator's connection to a storm of its own (the functions as init applies them)."""
    import secrets

    from storm_queue.store.postgres import driver

    tag = secrets.token_hex(4)
    role, name = f"op_{tag}", f"storm_{tag}"
    pg_server.create_role(role)
    pg_server.create_database(name, owner=role)
    url = pg_server.url(name, role)
    assert run_cli(None, "init", url).returncode == 0
    with driver.connect(url) as c:
        c.execute("SET search_path = pg_catalog, pg_temp")
        yield c
    pg_server.drop_database(name)
    pg_server.drop_role(role)


@EXAMPLES
@given(leases=st.lists(st.tuples(st.none() | stamps, st.none() | stamps), max_size=6), now=stamps)
def test_next_due_is_its_twins(conn, leases, now) -> None:
    runs_now = [Run(lease=None if e is None else Lease("h", 1, "runner:r", now, e), not_before=n) for e, n in leases]
    times = [t for e, n in leases for t in (e, n) if t is not None]
    served = conn.execute("SELECT storm_queue.next_due(%s::text[], %s)", (times, now)).fetchone()[0]
    assert served == runs.next_due(runs_now, now)


@EXAMPLES
@given(states=st.lists(st.sampled_from(resolver.STATES[:-1]), max_size=8), unattended=st.booleans(),
       halted=st.booleans())
def test_decide_is_its_twins(conn, states, unattended, halted) -> None:
    rows = tuple(resolver.Row(i + 1, f"l{i}", str(i + 1), (), False, state, "") for i, state in enumerate(states))
    finished = [r.slug for r in rows if r.state == resolver.FINISHED]
    ready = next((r for r in rows if r.state == resolver.READY), None)
    pending = any(r.state not in (resolver.READY, resolver.FINISHED) for r in rows)
    served = conn.execute("SELECT storm_queue.decide(%s::text[], %s, %s, %s, %s, %s)",
                          (finished, ready and ready.slug, ready and ready.issue, pending, unattended, halted)).fetchone()[0]
    assert served == resolver.decide(rows, unattended, halted)


@EXAMPLES
@given(token=st.integers(0, 2**40), attempts=st.integers(0, 1000), floor=st.integers(0, 2**40), t=times,
       ttl=st.integers(1, 10**7))
def test_lease_is_its_twins(conn, token, attempts, floor, t, ttl) -> None:
    served = conn.execute("SELECT token, attempt, expires FROM storm_queue.lease(%s, %s, %s, %s::float8, %s)",
                          (token, attempts, floor, t, ttl)).fetchone()
    assert tuple(served) == runs.lease(token, attempts, floor, t, ttl)


@EXAMPLES
@given(t=times | st.floats(min_value=0, max_value=7e9, allow_nan=False))
def test_stamp_is_its_twins(conn, t) -> None:
    assert conn.execute("SELECT storm_queue.stamp(%s::float8)", (t,)).fetchone()[0] == clock.stamp(t)


#: the table-reading parts: 200 drawn storms in the full run, 20 under --hypothesis-profile quick
STORMS = settings(max_examples=examples(200, 20), deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- the parts that read the storm's tables: each example's rows written in a transaction rolled back after --

SLUGS = ("a", "b", "c", "d", "e", "f")
T = 1_800_000_000.0
NOW = clock.stamp(T)


@st.composite
def storms(draw) -> dict:
    """A storm as plain data, the rows a database storm holds: lanes in
    queue order (slug, issue, deps), settled slugs (integrated, abandoned),
    result rows (slug: the token their body carries, or None), runs (slug:
    token, the lease's token or None and its expiry (past, now or to come),
    attempts, quarantined, not_before, held), the priority lane's slugs (a
    stray one too)."""
    queued = draw(st.lists(st.sampled_from(SLUGS), unique=True, max_size=6))
    lanes = [(s, str(i + 1), draw(st.lists(st.sampled_from(SLUGS + ("gone",)), unique=True, max_size=2)))
             for i, s in enumerate(queued)]
    settled = draw(st.dictionaries(st.sampled_from(SLUGS + ("gone",)), st.sampled_from(["integrated", "abandoned"]),
                                   max_size=4))
    runs = {}
    for i, s in enumerate(draw(st.lists(st.sampled_from(SLUGS), unique=True, max_size=6))):
        token = draw(st.integers(1, 4))
        runs[s] = dict(since=i + 1, token=token, lease=draw(st.none() | st.integers(1, token)),
                       expires=draw(st.sampled_from([clock.stamp(T - 60), NOW, clock.stamp(T + 30)])),
                       attempts=draw(st.integers(0, 3)), quarantined=draw(st.none() | st.just(clock.stamp(T - 5))),
                       not_before=draw(st.sampled_from([None, clock.stamp(T - 60), NOW, clock.stamp(T + 60)])),
                       held=draw(st.sampled_from([None, None, 7])))
    results = draw(st.dictionaries(st.sampled_from(SLUGS), st.none() | st.integers(1, 4), max_size=4))
    lane = draw(st.lists(st.sampled_from(SLUGS + ("stray",)), unique=True, max_size=4))
    return dict(lanes=lanes, settled=settled, runs=runs, results=results, lane=lane)


def snapshot(storm: dict, unattended: bool = True, halt=None):
    """The ``lane.Snapshot`` the Python path reads of ``storm``'s rows at NOW (``unattended``: by default, so the
    decision names the ready lane; ``halt``: the operator's halt in force)."""
    from storm_queue.core.fold import Act, LaneState
    from storm_queue.core.lane import Snapshot
    from storm_queue.core.ledgers import Ledgers
    from storm_queue.core.queuetext import Lane

    lanes = {s: Lane(s, issue, tuple(deps), i + 1) for i, (s, issue, deps) in enumerate(storm["lanes"])}
    settled = storm["settled"]
    led = Ledgers(frozenset(s for s, g in settled.items() if g == "integrated"),
                  frozenset(s for s, g in settled.items() if g == "abandoned"), frozenset(storm["results"]), {}, unattended)
    runs = {s: Run(r["token"], None if r["lease"] is None else Lease("h", r["lease"], "by", clock.stamp(T - 100),
                                                                     r["expires"], 30),
                   r["attempts"], (), r["quarantined"], r["not_before"],
                   held=None if r["held"] is None else Act(r["held"], NOW, "operator:op", "r"))
            for s, r in storm["runs"].items()}
    results = {s: t for s, t in storm["results"].items() if s in runs and runs[s].lease is not None}
    lane = tuple(storm["lane"])
    return Snapshot(lanes, led, LaneState(lane, lane, runs=runs, halt=halt), NOW, results)


@contextmanager
def written(conn, storm: dict):
    """``storm``'s rows in ``conn``'s tables, in a transaction rolled back on leaving."""
    import json

    cur = conn
    cur.execute("BEGIN")
    try:
        cur.execute("SELECT set_config('storm_queue.folding', 'on', true)")
        for slug, issue, deps in storm["lanes"]:
            cur.execute("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)", (slug, issue, deps))
        for slug, ledger in storm["settled"].items():
            cur.execute("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, 'then')", (slug, ledger))
        for slug, token in storm["results"].items():
            cur.execute("INSERT INTO storm_queue.result (slug, body) VALUES (%s, %s::jsonb)",
                        (slug, json.dumps({} if token is None else {"token": token})))
        for slug, r in storm["runs"].items():
            leased = r["lease"] is not None
            cur.execute("INSERT INTO storm_queue.run (slug, since, token, holder, lease_token, lease_by, claimed, expires, "
                        "ttl, attempts, quarantined, not_before, held_seq, held_at, held_by, held_reason) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (slug, r["since"], r["token"], "h" if leased else None, r["lease"], "by" if leased else None,
                         clock.stamp(T - 100) if leased else None, r["expires"] if leased else None,
                         30 if leased else None, r["attempts"], r["quarantined"], r["not_before"], r["held"],
                         NOW if r["held"] else None, "operator:op" if r["held"] else None, "r" if r["held"] else None))
        for place, slug in enumerate(storm["lane"]):
            cur.execute("INSERT INTO storm_queue.priority (slug, place) VALUES (%s, %s)", (slug, place + 1))
        yield cur
    finally:
        cur.execute("ROLLBACK")


@STORMS
@given(storm=storms())
def test_decided_and_its_parts_are_their_twins(conn, storm) -> None:
    """decided (decided_lane, then decided_queue or decided_mark) walks the
    run order to the first ready lane as core/resolver.py decided does: the
    lane it names, and the blocked lanes met before it with their abandoned
    dependencies."""
    twin = resolver.decided(snapshot(storm))
    with written(conn, storm) as cur:
        ready, issue, blocked, gones = cur.execute("SELECT ready, issue, blocked, gones FROM storm_queue.decided(%s)",
                                                   (NOW,)).fetchone()
    assert (f"run {ready} {issue}" if ready else None) == (twin.decision if twin.decision.startswith("run ") else None)
    assert (blocked, gones) == ([r.slug for r in twin.to_block], [" ".join(r.waits_on) for r in twin.to_block])


@STORMS
@given(storm=storms())
def test_finished_in_run_order_is_its_twins(conn, storm) -> None:
    """The finished lanes (a result row the live lease's own finish wrote, or no lease) in run order: core/resolver.py
    in_run_order of decided's finished."""
    snap = snapshot(storm)
    with written(conn, storm) as cur:
        served = cur.execute("SELECT storm_queue.finished_in_run_order()").fetchone()[0]
    assert served == list(resolver.in_run_order(snap, resolver.decided(snap).finished))


@STORMS
@given(storm=storms(), budget=st.integers(1, 4))
def test_expiries_are_their_twins(conn, storm, budget) -> None:
    """What a claim takes back first, in the fold's order of runs: an expire for each lease past its expiry (and a
    quarantine when it spent the last attempt), a quarantine for each lane not held that spent its budget: core/runs.py
    expiries, the lines' fields equal."""
    import json

    from storm_queue.core.config import Policy

    twin = runs.expiries(snapshot(storm), Policy(attempts=budget))
    with written(conn, storm) as cur:
        actions, rests, slugs = cur.execute("SELECT * FROM storm_queue.expiries(%s, %s)", (NOW, budget)).fetchone()
    assert [json.loads(f'{{"action":"{a}"{rest}}}') for a, rest in zip(actions, rests)] == twin
    assert slugs == [e["slug"] for e in twin]


@STORMS
@given(storm=storms(), slots=st.integers(1, 3), unattended=st.booleans(), halted=st.booleans())
def test_claim_decision_is_its_twins(conn, storm, slots, unattended, halted) -> None:
    """claim_decision on decided's ready lane decides as core/runs.py
    plan_claim does on a storm with nothing to take back (every lease live,
    no attempts spent): halted, review, run (the lane; the token is
    serve_lease's), wait naming the finished lanes when every slot is held,
    or empty."""
    import json

    from storm_queue.core.config import Policy
    from storm_queue.core.fold import Act

    for r in storm["runs"].values():  # nothing for the claim to take back first (expiries has its own twin)
        r["expires"] = clock.stamp(T + 30)
    snap = snapshot(storm, unattended, Act(1, NOW, "operator:op", None) if halted else None)
    policy = Policy(slots=slots, attempts=100, unattended=unattended)
    twin = runs.plan_claim(snap, policy, "h", 30, T)
    with written(conn, storm) as cur:
        served = cur.execute("SELECT storm_queue.claim_decision(w.ready, w.issue, %s::jsonb, %s) "
                             "FROM storm_queue.decided(%s) w",
                             (json.dumps({"slots": slots, "unattended": unattended}), halted, NOW)).fetchone()[0]
    assert twin.events == () or twin.events[-1]["action"] == "claim"
    assert served == (twin.decision.rsplit(" ", 1)[0] if twin.slug is not None else twin.decision)


@STORMS
@given(storm=storms(), floor=st.integers(0, 6), ttl=st.integers(1, 86400))
def test_serve_lease_is_its_twins(conn, storm, floor, ttl) -> None:
    """serve_lease leases a lane as core/runs.py plan_claim does (lease:
    the next token above the run's and the floor, the attempt, the expiry)
    and writes the claim line plan_claim plans, folded at once (fold_claim)
    into the run core/fold.py makes of that line."""
    import json

    from storm_queue.core.fold import Fold, LaneState
    from storm_queue.store.postgres.folded import folded_runs, read_runs

    assume(storm["lanes"])
    slug, issue, _ = storm["lanes"][0]
    snap = snapshot(storm)
    run = snap.state.run(slug)
    token, attempt, expires = runs.lease(run.token, run.attempts, floor, T, ttl)
    twin = {"action": "claim", "slug": slug, "issue": issue, "holder": "h", "token": token, "ttl": ttl,
            "expires": expires, "attempt": attempt}
    with written(conn, storm) as cur:
        served = cur.execute("SELECT * FROM storm_queue.serve_lease(%s, %s, 'h', %s, %s, %s, %s, 'runner:r', "
                             "NULL, NULL, NULL, NULL)", (slug, issue, ttl, floor, T, NOW)).fetchone()
        folded = dict(read_runs(cur)["runs"])[slug]
    line = json.loads(served[2])
    assert (served[0], served[1]) == (token, expires)
    assert {k: v for k, v in line.items() if k in twin} == twin and line["by"] == "runner:r" and line["at"] == NOW
    fold = Fold(LaneState(runs={s: r for s, r in snap.state.runs.items()}))
    fold.step({**line, "seq": 1})
    assert folded == dict(folded_runs(fold.state())["runs"])[slug][:8] + (folded[8],)


# -- the fold of a line: random lines folded into an empty storm, beside core/fold.py's fold of the same lines --

HOLDERS = ("h", "k")


@st.composite
def lines(draw) -> list[dict]:
    """A run of log lines (seq and at in order) of every kind fold_line folds
    into a run or the storm: the runner actions, with tokens that are and
    are not the live lease's; quarantine, unpark, schedule; hold, unhold,
    halt and resume, some no-ops; a reset's floor; waivers; bumps (some
    scheduling their lane) and un-bumps."""
    out = []
    for seq in range(1, draw(st.integers(1, 12)) + 1):
        at = clock.stamp(T + seq)
        slug = draw(st.sampled_from(SLUGS[:3]))
        action = draw(st.sampled_from(["claim", "claim", "renew", "finish", "finish", "expire", "recover", "release",
                                       "cancel", "quarantine", "unpark", "schedule", "hold", "unhold", "halt",
                                       "resume", "reset", "waive", "bump", "unbump"]))
        e = {"v": 1, "seq": seq, "at": at, "action": action, "by": draw(st.sampled_from(["runner:r", "operator:op"]))}
        noop = draw(st.sampled_from([None, None, "already so"]))
        if action in ("claim", "renew", "finish", "expire", "recover", "release", "cancel"):
            e.update(slug=slug, token=draw(st.integers(1, 4)))
        if action == "claim":
            e.update(issue="1", holder=draw(st.sampled_from(HOLDERS)), ttl=30, expires=clock.stamp(T + seq + 30),
                     attempt=1)
        elif action == "renew":
            e.update(ttl=draw(st.integers(1, 90)), expires=clock.stamp(T + seq + 60))
        elif action == "finish":
            e.update(result=draw(st.sampled_from(["ok", "failed"])))
            if e["result"] == "failed" and draw(st.booleans()):
                e["not_before"] = clock.stamp(T + seq + 10)
        elif action in ("cancel", "hold", "unhold", "halt", "resume", "bump", "waive"):
            e["reason"] = draw(st.none() | st.just("why"))
            if noop:
                e["noop"] = noop
        if action in ("quarantine", "unpark", "hold", "unhold", "bump", "unbump", "waive"):
            e["slug"] = slug
        if action == "schedule":
            e.update(slug=slug, not_before=draw(st.sampled_from([NOW, clock.stamp(T + 99)])))
        elif action == "reset":
            e["abandons"] = draw(st.integers(0, 9))
        elif action == "waive":
            e.update(dep=draw(st.sampled_from(SLUGS[3:])), undo=draw(st.booleans()))
        elif action == "bump":
            e["moved"] = [] if noop else [slug]
            if not noop and draw(st.booleans()):
                e["not_before"] = clock.stamp(T + 99)
        elif action == "unbump":
            e["removed"] = [slug]
        out.append(e)
    return out


@STORMS
@given(events=lines())
def test_fold_line_and_its_parts_are_their_twins(conn, events) -> None:
    """fold_line (fold_shift, fold_storm, fold_run, fold_lease) folds each
    line into the runs, the token floor, the halt, the priority lane and the
    waivers as core/fold.py Fold.step does."""
    import json

    from storm_queue.core.fold import Fold
    from storm_queue.store.postgres.folded import folded_runs, read_runs

    fold = Fold()
    for e in events:
        fold.step(e)
    with written(conn, dict(lanes=[], settled={}, runs={}, results={}, lane=[])) as cur:
        for e in events:
            body = json.dumps(e, separators=(",", ":"))
            cur.execute("SELECT storm_queue.fold_line(%s::jsonb, %s, convert_to(%s, 'UTF8'))", (body, e["seq"], body))
        served = read_runs(cur)
    assert served == folded_runs(fold.state())

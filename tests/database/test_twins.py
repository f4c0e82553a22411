"""The served claim's parts, each held to its Python twin (issue 31, item
2): serve_claim (sql/functions/serve_claim.sql) is a sequence of server
functions named after the core functions they mirror, and each one is
asked here on random inputs, beside its twin, in one storm's database:

- ``next_due``: core/runs.py ``next_due`` (the moment time alone changes the decision);
- ``decide``: core/resolver.py ``decide`` (the decision line);
- ``lease``: core/runs.py ``lease`` (the token, attempt and expiry a claim takes);
- ``stamp``: core/clock.py ``stamp`` (a POSIX time as the log writes it).

The parts that read the storm's tables (``expiries``, ``decided``,
``finished_in_run_order``, ``fold_claim``) are held to core/runs.py
``plan_claim`` and core/fold.py whole, by the served-claim property test
of tests/database/test_served.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storm_queue.core import clock, resolver, runs
from storm_queue.core.fold import Lease, Run
from tests.conftest import run_cli

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

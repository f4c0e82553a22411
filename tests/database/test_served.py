"""Runner requests the server serves in one round trip (issue 21, items 1
and 2; sql/functions/serve_*.sql, store/postgres/served.py): the server's
renew and finish decide what the Python request path decides, and write
the lines the Python writer writes, byte for byte, chain included.

Twins: one storm is made, and a second copied from it (CREATE DATABASE
... TEMPLATE), so both logs start with the same lines. Random requests go
to both at the same frozen time: to the first as the library sends them
(renew and finish served by the server), to the second with the server's
path turned off (the Python request path plans them under the lock). On
every step the answers are equal (JSON and words), and so are the logs'
bytes, and the runs the server folds (storm_queue.run) are the runs the
Python fold makes of the log."""

from __future__ import annotations

import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from storm_queue.core.outcome import Request
from storm_queue.store.postgres.queries import schema_version
from tests.conftest import examples, run_cli

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]

START = 1_800_000_000.123456
LANES = ("a", "b", "c", "d", "e")
#: notes and reasons carrying what JSON escapes: quotes, backslashes, controls, DEL, accents, a non-BMP character
TEXTS = st.one_of(st.none(), st.sampled_from(["", "plain", 'q"uote', "back\\slash", "tab\tnew\nline\r", "\x7f\x01", "y" * 4097,
                                              "café ü", "emoji \U0001f600 \u2028", "x" * 300, "nul\x00"]),
                  st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12))


class Frozen:
    """The wall clock, frozen: it moves only when the test moves it (``t``,
    held as whole microseconds: a time the server's clock holds exactly),
    and so does the clock of every storm ``hold`` was given
    (``storm_queue.clock.fixed``): the served requests are timed by it."""

    def __init__(self) -> None:
        self._us = round(START * 1_000_000)
        self._held: list = []

    def __call__(self) -> float:
        return self.t

    @property
    def t(self) -> float:
        return self._us / 1_000_000

    @t.setter
    def t(self, value: float) -> None:
        self._us = round(value * 1_000_000)
        for conn in self._held:
            self._fix(conn)

    def _fix(self, conn) -> None:
        conn.execute("UPDATE storm_queue.clock SET fixed = to_timestamp(%s::numeric / 1000000)", (self._us,))

    def hold(self, url: str) -> None:
        """The storm at ``url`` (its operator's) keeps this time too, from now on."""
        from storm_queue.store.postgres import driver

        conn = driver.connect(url)
        self._fix(conn)
        self._held.append(conn)

    def close(self) -> None:
        for conn in self._held:
            conn.close()
        self._held.clear()


#: the frozen clock of the test under way, if any (``twins`` holds its storms to it)
_FROZEN: list[Frozen] = []


@contextmanager
def frozen_clock():
    from storm_queue import wall

    was, wall.clock = wall.clock, Frozen()
    _FROZEN.append(wall.clock)
    try:
        yield wall.clock
    finally:
        _FROZEN.remove(wall.clock)
        wall.clock.close()
        wall.clock = was


def twins(pg_server, cleanup, toml: str, tmp_path, deps: dict | None = None, moved_from=None) -> tuple:
    """A storm of LANES (each with its ``deps``) declared by ``toml``, and
    its twin copied from it; a ``Storm`` of each. ``moved_from``: the
    first is not made but carried from that directory storm (a copy of it:
    ``storm-queue migrate``), its log's lines and state with it."""
    import shutil

    from psycopg2 import sql

    from storm_queue.ops.migrate import migrate
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create

    tag = secrets.token_hex(4)
    role, first, second = f"op_{tag}", f"storm_{tag}", f"twin_{tag}"
    cleanup["roles"].append(role)
    cleanup["databases"] += [second, first]
    pg_server.create_role(role)
    pg_server.create_database(first, owner=role)
    url = pg_server.url(first, role)
    if moved_from is not None:
        carried = tmp_path / f"carried-{tag}"
        shutil.copytree(moved_from, carried, symlinks=True)
        migrate(str(carried), url, {k: v for k, v in os.environ.items() if k != "STORM_QUEUE_LANE"})
    else:
        create(url)
        made = Storm.find(url)
        path = tmp_path / f"storm-{tag}.toml"
        path.write_text(toml)
        assert made.declare(str(path)).outcome == "done"
        for i, slug in enumerate(LANES):
            assert made.add(slug, str(i + 1), deps=tuple((deps or {}).get(slug, ()))).outcome == "done"
        made.store.close()
    with pg_server.admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE {}").format(
            sql.Identifier(second), sql.Identifier(role), sql.Identifier(first)))
    for held in _FROZEN:  # the served requests are timed by the server's clock: held to the test's
        held.hold(url)
        held.hold(pg_server.url(second, role))
    served, planned = Storm.find(url), Storm.find(pg_server.url(second, role))
    planned.store.serve = lambda req, holder=None: None  # the Python request path, always
    serve, served.answers = served.store.serve, []

    def counted(req, holder=None):
        served.answers.append(serve(req, holder))
        return served.answers[-1]

    served.store.serve = counted
    return served, planned


def directory_twin(root, toml: str, deps: dict | None = None):
    """The same storm kept by a directory: queue.txt of LANES (each with its ``deps``), storm.toml."""
    from storm_queue.service.storm import Storm
    from tests.conftest import make_storm

    queue = "".join(f"{slug} {i + 1} {','.join((deps or {}).get(slug, ())) or '-'}\n" for i, slug in enumerate(LANES))
    return Storm(str(make_storm(root, queue, toml=toml)))


def after_a_reset(storm) -> None:
    """The directory ``storm``'s log, written to (a halt and its end), then damaged (its first
    line no longer JSON: an unknown order), then reset: the new log's first
    line abandons the old one's bytes, the floor every later token is above."""
    storm.halt("a pause").check()
    storm.resume("on again").check()
    log = Path(storm.root) / "priority.log"
    with open(log, "r+b") as f:
        f.write(b"#")
    assert storm.reset("the log was damaged by hand").check().event["abandons"] > 2


def alike(answered, by: str):
    """An answer as any store gives it: its principal ``by`` named PRINCIPAL,
    its line without the numbering and chain a store's own log gives it."""
    import re

    if answered[0] != "answered":
        return answered
    _, out, words, code, event, due, then = answered
    out, event = json.loads(json.dumps([out, event]).replace(json.dumps(by)[1:-1], "PRINCIPAL"))
    if event is not None:
        event = {k: v for k, v in event.items() if k not in ("seq", "prev")}
    if out.get("halt"):  # the halt's line, numbered by each store's own log
        out["halt"]["seq"] = None
    return out, re.sub(re.escape(by), "PRINCIPAL", words), code, event, due, then and alike(then, by)


def lines(storm) -> list[bytes]:
    return [bytes(r[0]) for r in storm.store.conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]


def runs(storm, folded: bool = False):
    """The runs the server folded (storm_queue.run), or (``folded``) the Python fold's of the log, alike."""
    from storm_queue.store.postgres.folded import folded_runs, read_runs

    if folded:
        return folded_runs(storm.store.read(storm.store.declaration()).state)
    return read_runs(storm.store.conn)


def answer(call):
    """The outcome as both its answers (JSON, words), or the error it raised."""
    try:
        out = call()
    except Exception as exc:  # noqa: BLE001 -- an error is an answer too, compared as one
        return ("raised", type(exc).__name__, str(exc))
    then = None if out.claim is None else answer(lambda: out.claim)  # finish --then-claim's claim
    return ("answered", out.to_json(), out.text(), out.exit_code, out.event, out.due, then)


#: runner policies, the storm's backoff among them (issue 33: retry_delay 0 is none; a retry_max below the
#: delay caps it at once)
POLICIES = st.fixed_dictionaries({
    "slots": st.integers(1, 3), "attempts": st.integers(1, 3), "ttl": st.sampled_from([5, 30]),
    "max_lease_age": st.sampled_from([40, 100, 14400]), "unattended": st.booleans(),
    "retry_delay": st.sampled_from([0, 1, 5, 30]), "retry_max": st.sampled_from([3, 600])})

#: a request's idempotency key (repeats and conflicts come of a few), and its STORM_QUEUE_LANE (a lane process)
N = (None, None)
ASKED = st.tuples(st.sampled_from([None, None, None, "k1", "k2", "not a key!"]), st.sampled_from([None] * 5 + ["", "lane\n1"]))
BUMP = st.tuples(st.just("bump"), st.sampled_from(LANES))
#: the lane a renew, finish or release names: any, or (as often) one that holds a lease (``_held``)
HELD = "@held"
LEASED = st.sampled_from(LANES + (HELD,) * len(LANES))
#: which token it presents (``_token``): the live lease's, most often
TOKEN_PICK = st.sampled_from([0, 0, 0, 1, 2, 3])
#: the claim every drawn example ends with: the decision, on whatever the steps made
LAST = ("claim", "h2", None, (None, None))
CLAIM = st.tuples(st.just("claim"), st.sampled_from(["h1", "h2"]), st.sampled_from([None, 5, 30]), ASKED)
#: the lanes bumped before the other steps: none, or two or three, each once (two ready bumped lanes are
#: common: rule 2's case)
FIRST_BUMPS = st.one_of(st.just(()), st.lists(st.sampled_from(LANES), min_size=2, max_size=3, unique=True)).map(
    lambda slugs: [("bump", s) for s in slugs])
STEP = st.one_of(
    st.tuples(st.just("tick"), st.sampled_from([0.0, 0.5, 4.999999, 5.0, 29.5, 61.25, 700.0])),
    CLAIM, CLAIM, CLAIM,  # (the decision under test: three times as likely as the others)
    st.tuples(st.just("renew"), LEASED, TOKEN_PICK, st.sampled_from([None, 1, 5, 30, 50, 10 ** 6]),
              TEXTS, ASKED),
    st.tuples(st.just("finish"), LEASED, TOKEN_PICK, st.sampled_from(["ok", "failed"]), TEXTS,
              TEXTS, ASKED),
    st.tuples(st.just("settle"), st.sampled_from(LANES), st.sampled_from(["integrated", "abandoned"])),
    st.tuples(st.just("unpark"), st.sampled_from(LANES)),
    st.tuples(st.just("recover"), ASKED),
    BUMP, BUMP,  # (twice as likely as the others)
    st.tuples(st.just("unbump"), st.sampled_from(LANES)),
    st.tuples(st.just("waive"), st.sampled_from(LANES), st.sampled_from(LANES), st.booleans()),
    st.tuples(st.just("schedule"), st.sampled_from(LANES), st.sampled_from(["now", "+5s", "+60s"])),
    st.tuples(st.just("halt"), st.booleans()),
    st.tuples(st.just("hold"), st.sampled_from(LANES), st.booleans()),  # hold a lane (True) or unhold it
    st.tuples(st.just("release"), LEASED, TOKEN_PICK, ASKED),
    # finish --then-claim (issue 32, item 1): the finish, then the claim, in one request
    st.tuples(st.just("then"), LEASED, TOKEN_PICK, st.sampled_from(["ok", "failed"]), st.sampled_from(["h1", "h2"]),
              st.sampled_from([None, 5, 30]), ASKED),
    st.tuples(st.just("cancel"), st.sampled_from(LANES)),
    st.tuples(st.just("force"), st.sampled_from(LANES)),
)
STEPS = st.tuples(FIRST_BUMPS, st.lists(STEP, min_size=1, max_size=18)).map(lambda drawn: drawn[0] + drawn[1] + [LAST])
#: each lane's dependencies, drawn sparsely (three lanes in four have none, so two ready bumped lanes are
#: common): one or two, on any lane (itself too: a cycle), or on one queue.txt does not carry
DEPS = st.fixed_dictionaries({slug: st.one_of(st.just([]), st.just([]), st.just([]),
                                              st.lists(st.sampled_from(LANES + ("zz",)), min_size=1, max_size=2,
                                                       unique=True))
                              for slug in LANES})
#: how the served storm began: made by init, or carried by migrate from a directory storm whose log was reset
#: (the token floor: every token after it is above the bytes it abandoned)
STARTS = st.sampled_from(["fresh", "fresh", "fresh", "reset+migrate"])
#: the policy the edges below start from, and the lanes without dependencies
CALM = {"slots": 2, "attempts": 3, "ttl": 30, "max_lease_age": 14400, "unattended": True, "retry_delay": 0,
        "retry_max": 600}
FREE = {slug: [] for slug in LANES}


def edge(label: str, steps: list, start: str = "fresh", deps: dict | None = None, **policy) -> tuple[str, dict]:
    """An edge the contract names, as an example of the twin test: ``steps``
    on a storm of LANES (``deps``, else none) under CALM changed by ``policy``."""
    return label, {"policy": {**CALM, **policy}, "deps": deps or FREE, "steps": steps, "start": start}


def ready_bumped(storm) -> int:
    """How many bumped lanes are ready in ``storm`` now (the Python resolver's view)."""
    return sum(1 for r in storm.listing(waits=False, slots=False).view.rows if r.prioritised and r.state == "ready")


def in_lane(storm, lane: str, call):
    """``call(storm)`` as a lane process asks it (``STORM_QUEUE_LANE`` set to ``lane``)."""
    was = storm.store.env
    storm.store.env = {**was, "STORM_QUEUE_LANE": lane}
    try:
        return call(storm)
    finally:
        storm.store.env = was


def _held(storm) -> str:
    """The first lane, in the fold's order of runs, that holds a lease in ``storm`` (expired or not), else LANES[0]."""
    runs = storm.store.read(storm.store.declaration()).state.runs
    return next((slug for slug, run in runs.items() if run.lease is not None), LANES[0])


def _token(storm, slug: str, pick: int) -> int:
    """A token to present: 0 the live lease's (else 1), 1 one below it, 2 one above it, 3 the lane's last."""
    run = storm.store.read(storm.store.declaration()).state.run(slug)
    live = run.lease.token if run.lease is not None else max(run.token, 1)
    return max(1, [live, live - 1, live + 1, run.token or 1][pick])


C = ("claim", "h1", None, N)  # a claim, the holder's default TTL
F = (None, None, N)  # a finish's note, reason and key: none
#: The edges the contract names, each pinned as an example of the twin test (issue 31, item 3): where a change
#: planted in the served decision shows (tests/mutants/plant.py plants them). A failing one is named in its report.
EDGES = [
    edge("rule 2: two bumps run first in first out (d, c, then a)", [("bump", "d"), ("bump", "c"), C, C, C]),
    edge("rule 3: a dependency pulled forward (b and c before e, in queue order)", [("bump", "e"), C, C, C],
         deps={**FREE, "e": ["c", "b"]}),
    edge("rule 6: an un-bump removes the dependency it pulled (a runs, not c)", [("bump", "e"), ("unbump", "e"), C],
         deps={**FREE, "e": ["c"]}),
    edge("a halt: no claim leases while it lasts", [C, ("halt", True), C, ("halt", False), C]),
    edge("a held lane is passed over, its dependants wait: c runs (held a bumped, b on a), then a once unheld",
         [("hold", "a", True), ("bump", "a"), C, ("hold", "a", False), C], deps={**FREE, "b": ["a"]}),
    edge("a held running lane runs on (renewed, finished) and is not claimed again while held",
         [C, ("hold", "a", True), ("renew", "a", 0, None, None, N), ("finish", "a", 0, "failed", *F), C],
         slots=1, attempts=3),
    edge("a full slot: wait until a finishes", [C, C, ("finish", "a", 0, "ok", *F), C], slots=1),
    edge("a lease expiring exactly at its time: a expired (b not yet), a claimed again",
         [C, C, ("tick", 4.999998), C], ttl=5),
    edge("two leases expiring at one claim: expired in the order they were taken", [C, C, ("tick", 30.0), C], ttl=5),
    edge("a renew exactly at the lease's expiry: too late", [C, ("tick", 4.999999), ("renew", "a", 0, None, None, N)],
         ttl=5),
    edge("the token after a reset and a migrate: above the floor the reset left",
         [C, ("finish", "a", 0, "failed", *F), C, C], start="reset+migrate"),
    edge("a bumped lane that finished awaits review: never claimed again",
         [("bump", "c"), C, ("finish", "c", 0, "ok", *F), C]),
    edge("attended: a finished lane is reviewed", [C, ("finish", "a", 0, "ok", *F), C], unattended=False),
    edge("unattended: finished lanes wait for a batch review, the storm runs on (then waits, naming them)",
         [C, ("finish", "a", 0, "ok", *F), C, ("finish", "b", 0, "ok", *F), C, C], slots=1),
    edge("quarantine at the last attempt, by a finish: a passed over, b runs",
         [C, ("finish", "a", 0, "failed", *F), C, ("finish", "a", 0, "failed", *F), C], attempts=2, slots=1),
    edge("quarantine at the last attempt, by an expiry", [C, ("tick", 4.999999), C, C], attempts=1, ttl=5),
    edge("a schedule coming due exactly: then a runs", [("schedule", "a", "+5s"), C, ("tick", 4.999998), C],
         slots=3),
]


def pinned(test):
    """``test`` with every one of EDGES as an explicit example."""
    for _, kwargs in reversed(EDGES):
        test = example(**kwargs)(test)
    return test


def edge_named(**drawn) -> str | None:
    """The label of the edge whose example ``drawn`` is, if it is one."""
    return next((label for label, kwargs in EDGES if kwargs == drawn), None)


@settings(max_examples=examples(200, 10), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(policy=POLICIES, deps=DEPS, steps=STEPS, start=STARTS)
@pinned
@example(  # a failed finish under the storm's backoff: passed over until then, claimed again once it is due
    policy={"slots": 1, "attempts": 3, "ttl": 30, "max_lease_age": 14400, "unattended": True, "retry_delay": 5,
            "retry_max": 600},
    deps={slug: [] for slug in LANES},
    steps=[("claim", "h1", None, N), ("finish", "a", 0, "failed", "exit 1", None, N), ("claim", "h1", None, N),
           ("finish", "b", 0, "ok", None, None, N), ("tick", 4.999999), ("claim", "h2", None, N),
           ("finish", "c", 0, "failed", None, "r", N), ("tick", 5.0), ("claim", "h1", None, N),
           ("finish", "a", 0, "failed", None, None, N), ("tick", 9.5), ("claim", "h2", None, N), ("tick", 0.5),
           ("claim", "h2", None, N)], start="fresh")
@example(  # finish --then-claim whose claim first takes back an expired lease (a's), then claims: finish, expire, claim
    policy={"slots": 2, "attempts": 3, "ttl": 30, "max_lease_age": 14400, "unattended": True, "retry_delay": 0,
            "retry_max": 600},
    deps={slug: [] for slug in LANES},
    steps=[("claim", "h1", 5, N), ("claim", "h2", 30, N), ("tick", 6.0), ("then", "b", 0, "ok", "h2", None, N)],
    start="fresh")
@example(  # finish --then-claim: a keyed pair and its repeat, one refused (a stale token), one under a key a plain
    # finish used (a conflict), one that quarantines at the last attempt, one met by a halt, one after every lease
    # expired (taken back by its claim), a lane process's, one asked with a key too long for its claim's
    policy={"slots": 2, "attempts": 2, "ttl": 5, "max_lease_age": 100, "unattended": True, "retry_delay": 0,
            "retry_max": 600},
    deps={slug: [] for slug in LANES},
    steps=[("claim", "h1", None, N), ("claim", "h2", None, N), ("then", "a", 0, "ok", "h1", None, ("k1", None)),
           ("then", "a", 0, "ok", "h1", None, ("k1", None)), ("then", "b", 2, "ok", "h2", 30, N),
           ("finish", "b", 0, "failed", None, None, ("k2", None)), ("then", "b", 0, "failed", "h2", 30, ("k2", None)),
           ("claim", "h2", None, N), ("then", HELD, 0, "failed", "h1", 5, N), ("halt", True),
           ("then", HELD, 0, "ok", "h2", None, N), ("halt", False), ("tick", 700.0), ("claim", "h1", None, N),
           ("then", HELD, 0, "ok", "h1", None, (None, "lane\n1")), ("then", HELD, 0, "ok", "h1", None, ("k" * 195, None))],
    start="fresh")
@example(  # keys: a repeat, a conflict, one that is not a key; a lane process; a reason and a note too long
    policy={"slots": 2, "attempts": 2, "ttl": 30, "max_lease_age": 100, "unattended": True, "retry_delay": 0,
            "retry_max": 600},
    deps={slug: [] for slug in LANES},
    steps=[("claim", "h1", None, ("k1", None)), ("claim", "h1", None, ("k1", None)), ("claim", "h2", 30, ("k1", None)),
           ("renew", "a", 0, None, "y" * 4097, ("not a key!", None)), ("release", "a", 0, ("k2", None)),
           ("release", "a", 0, ("k2", None)), ("finish", "b", 0, "ok", "n" * 4097, None, (None, None)),
           ("claim", "h1", None, (None, "")), ("recover", ("k1", "lane\n1")), ("tick", 700.0), ("recover", ("k3", None)),
           ("recover", ("k3", None))], start="fresh")
def test_the_servers_claim_renew_and_finish_answer_and_write_as_the_python_path(pg_server, _pg_cleanup, tmp_path, policy,
                                                                                 deps, steps, start) -> None:
    from hypothesis import event, note

    from storm_queue.store.postgres.queries import q

    note(f"edge: {edge_named(policy=policy, deps=deps, steps=steps, start=start) or 'none (a drawn or other example)'}")

    toml = ("[runner]\nttl_min = 1\nttl_max = 100000\n"
            + "".join(f"{k} = {str(v).lower()}\n" for k, v in policy.items()))
    with frozen_clock() as clock:
        files = directory_twin(tmp_path / f"dir-{secrets.token_hex(4)}", toml, deps)
        if start == "reset+migrate":
            after_a_reset(files)
        served, planned = twins(pg_server, _pg_cleanup, toml, tmp_path, deps,
                                moved_from=files.root if start == "reset+migrate" else None)
        files_by = files.store.judge(Request("claim", None, None, None), files.declaration(), False).verdict.by
        try:
            for step in steps:
                kind = step[0]
                if kind == "tick":
                    clock.t += step[1]
                    continue
                if kind in ("renew", "finish", "release", "then"):
                    if step[1] == HELD:
                        step = (kind, _held(planned), *step[2:])
                    token = _token(planned, step[1], step[2])
                    assert token == _token(served, step[1], step[2]) == _token(files, step[1], step[2])
                key, lane = step[-1] if kind in ("claim", "renew", "finish", "release", "recover", "then") else N
                if kind == "claim":
                    ready = ready_bumped(planned)
                    event(f"a claim met {'two or more' if ready >= 2 else ready} ready bumped lanes")
                if kind == "renew":
                    calls = [lambda s: s.renew(step[1], token, step[3], reason=step[4], key=key)]
                elif kind == "finish":
                    calls = [lambda s: s.finish(step[1], token, step[3], note=step[4], reason=step[5], key=key)]
                elif kind == "release":
                    calls = [lambda s: s.release(step[1], token, key=key)]
                elif kind == "then":
                    calls = [lambda s: s.finish(step[1], token, step[3], then_claim=True, holder=step[4], ttl=step[5],
                                                key=key)]
                elif kind == "cancel":
                    calls = [lambda s: s.cancel(step[1], "no longer wanted")]
                elif kind == "force":
                    calls = [lambda s: s.recover(step[1], reason="its host is gone", force=True)]
                elif kind == "claim":
                    calls = [lambda s: s.claim(holder=step[1], ttl=step[2], key=key)]
                elif kind == "settle":
                    calls = [lambda s: s.settle(step[1], step[2], force=True)]
                elif kind == "unpark":
                    calls = [lambda s: s.unpark(step[1], "back")]
                elif kind == "recover":
                    calls = [lambda s: s.recover(key=key)]
                elif kind in ("bump", "unbump"):
                    calls = [lambda s: getattr(s, kind)(step[1])]
                elif kind == "waive":
                    calls = [lambda s: s.waive(step[1], step[2], "why", undo=step[3])]
                elif kind == "schedule":
                    calls = [lambda s: s.schedule(step[1], step[2])]
                elif kind == "hold":
                    calls = [lambda s: s.hold(step[1], "not now") if step[2] else s.unhold(step[1], "go on")]
                else:
                    calls = [lambda s: s.halt("stop") if step[1] else s.resume("go")]
                if lane is not None:  # a lane process asks (its refusal recorded by lane:"VALUE")
                    calls = [lambda s, call=call: in_lane(s, lane, call) for call in calls]
                for call in calls:
                    asked = len(served.answers)
                    first = answer(lambda: call(served))
                    assert first == answer(lambda: call(planned)), step
                    nul = any("\x00" in t for t in step[1:] if isinstance(t, str))  # a database refuses it unrecorded
                    if first[0] == "answered" and not nul:  # the directory store answers alike (its principal
                        theirs = answer(lambda: call(files))  # aside; a repeat names its line, each log's own number)
                        by = theirs[1]["by"] if theirs[0] == "answered" else files_by
                        if key is None:
                            assert alike(theirs, by) == alike(first, first[1]["by"]), step
                    assert lines(served) == lines(planned), step
                    if kind in ("claim", "renew", "finish", "release", "recover", "then"):  # the server served it, refusals
                        # too, but for text it cannot carry, which the request path refuses, unrecorded
                        leaves = kind in ("renew", "finish") and any("\x00" in (t or "") for t in step[3 + (kind == "renew"):])
                        assert (served.answers[asked:] == [None]) == leaves, (step, served.answers[asked:])
                clock.t += 0.000001
                assert served.store.conn.execute(q("marks_sound")).fetchone()[0], step  # the claim's marks hold
            assert runs(served) == runs(served, folded=True) == runs(planned)
            assert served.verify().sound and planned.verify().sound
            written = [json.loads(line) for line in lines(served)]
            for event, after in zip(written, written[1:] + [{}]):  # the backoff on every failure it is due on
                if event["action"] == "finish" and event["result"] == "failed":
                    due = policy["retry_delay"] > 0 and after.get("action") != "quarantine"
                    assert ("not_before" in event) == due, (event, after)
        finally:
            served.store.close()
            planned.store.close()


class Counted:
    """A connection whose statements are counted (each ``execute`` is one round trip here: autocommit)."""

    def __init__(self, conn) -> None:
        self.conn, self.statements = conn, []

    def __getattr__(self, name: str):
        return getattr(self.conn, name)

    def execute(self, query, *args, **kwargs):
        self.statements.append(str(query))
        return self.conn.execute(query, *args, **kwargs)


def test_a_served_request_commits_without_the_flush_under_the_lock_and_answers_once_it_is_flushed(
        pg_server, pg_database, tmp_path) -> None:
    """Issue 32, item 3: the serving function's transaction commits
    asynchronously (the storm's lock is not held through the WAL flush),
    and the answer comes in the same round trip only once the WAL that
    holds it is flushed: at the answer, nothing written is unflushed (the
    walwriter, on its own, flushes an asynchronous commit up to 200 ms
    later). The session's synchronous_commit is left as it was."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create

    url = pg_database()
    create(url)
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nunattended = true\n")
    assert run_cli(url, "declare", str(toml)).returncode == 0
    storm = Storm.find(url)
    for slug in ("a", "b", "c", "d"):
        assert storm.add(slug, "1").outcome == "done"
    conn = storm.store.conn
    setting = conn.execute("SHOW synchronous_commit").fetchone()[0]
    counted = Counted(conn)
    storm.store._conn = counted
    lease = storm.claim(holder="h").check()
    for _ in range(3):
        written, flushed = conn.execute("SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()").fetchone()
        assert lease.slug is not None, lease.decision
        assert not _unflushed_of_requests(pg_server, url, flushed, written), (lease.decision, written, flushed)
        lease = storm.finish(lease.slug, lease.token, "ok", then_claim=True, holder="h").check().claim
    served = [s for s in counted.statements if "serve_" in s]
    assert served and all("set_config('synchronous_commit', 'off', true)" in s and "COMMIT;" in s
                          and "pg_logical_emit_message(true" in s for s in served)
    assert conn.execute("SHOW synchronous_commit").fetchone()[0] == setting


def _unflushed_of_requests(pg_server, url: str, flushed: str, written: str) -> list[tuple[str, str]]:
    """The WAL records between ``flushed`` and ``written`` (the flush and
    insert positions read right after an answer) that a request wrote:
    none but the server's own background records (a standby snapshot the
    bgwriter logs, a checkpoint's), which may land between the answer and
    the reading. Read once they are flushed (pg_walinspect reads no
    further)."""
    import time

    from storm_queue.store.postgres.driver import conninfo

    if _lsn(flushed) >= _lsn(written):
        return []
    with pg_server.admin(conninfo(url)["dbname"]) as admin:
        deadline = time.monotonic() + 10
        while _lsn(admin.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]) < _lsn(written):
            assert time.monotonic() < deadline, "the WAL was not flushed in 10 s"
            time.sleep(0.05)
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        records = admin.execute("SELECT resource_manager, record_type FROM pg_get_wal_records_info(%s, %s)",
                                (flushed, written)).fetchall()
    return [(rm, kind) for rm, kind in records if rm not in ("Standby", "XLOG")]


def _lsn(text: str) -> int:
    """A WAL position (``0/1921AB0``) as a number."""
    high, low = text.split("/")
    return int(high, 16) << 32 | int(low, 16)


def test_a_runners_requests_are_each_one_statement_that_takes_the_lock_in_the_server(
        pg_server, pg_database, tmp_path) -> None:
    """As a runner role: claim, renew, finish, release and recover are
    each one statement (issue 30 keeps it so: one call to the server), the
    lines are the runner's, the lock is taken by the server's function
    (the client sends no lock_storm), and the storm verifies after."""
    from storm_queue.service.storm import Storm

    from storm_queue.store.postgres.connect import create

    url = pg_database()
    create(url)
    operator = Storm.find(url)
    role = pg_server.create_role(f"runner_{secrets.token_hex(3)}")
    from storm_queue.ops.grants import grant

    assert grant(operator, "runner", role).outcome == "done"
    for slug in ("a", "b"):
        assert operator.add(slug, "1").outcome == "done"
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    runner = Storm.find(pg_server.url(conninfo_to_dict(url)["dbname"], role))
    assert runner.recover().outcome == "noop"  # the storm's declaration and version, read once
    counted = Counted(runner.store.conn)
    runner.store._conn = counted
    first = runner.claim(holder="h").check()
    assert (len(counted.statements), first.slug) == (1, "a")
    assert runner.release("a", first.token).check().event["action"] == "release"
    assert runner.recover().outcome == "noop"
    lease = runner.claim(holder="h").check()
    assert (lease.slug, lease.token) == ("a", first.token + 1)
    assert len(counted.statements) == 4 and not any("storm_queue.lock" in s for s in counted.statements)
    counted.statements.clear()
    renewed = runner.renew("a", lease.token, reason="still going").check()
    assert (len(counted.statements), renewed.by, renewed.event["action"]) == (1, f"runner:{role}", "renew")
    stale = runner.finish("a", lease.token + 1, "ok")
    assert (stale.outcome, stale.code, stale.recorded, len(counted.statements)) == ("refused", "stale_fence", True, 2)
    done = runner.finish("a", lease.token, "ok", note="fine").check()
    assert len(counted.statements) == 3 and not any("storm_queue.lock" in s for s in counted.statements)
    assert done.message == f"a finished ok (token {lease.token}); it awaits review"
    events = [json.loads(bytes(r[0])) for r in operator.store.conn.execute(
        "SELECT line FROM storm_queue.event ORDER BY seq")][-3:]
    assert [(e["action"], e["by"]) for e in events] == [("renew", f"runner:{role}"), ("refused", f"runner:{role}"),
                                                        ("finish", f"runner:{role}")]
    assert operator.store.conn.execute("SELECT body->>'holder', body->>'note' FROM storm_queue.result "
                                       "WHERE slug = 'a'").fetchone() == ("h", "fine")
    assert operator.verify().sound
    [row] = [r for r in operator.listing().view.rows if r.slug == "a"]
    assert row.state == "finished"


def test_verify_finds_runs_the_server_folded_that_are_not_the_logs(pg_database) -> None:
    """A hand edit of storm_queue.run is found twice over: the server no
    longer decides by what it folded (withdrawn, verify names the edit),
    and the runs are not the log's; upgrade folds them again, recorded."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create

    url = pg_database()
    create(url)
    storm = Storm.find(url)
    storm.add("a", "1").check()
    lease = storm.claim(holder="h").check()
    assert storm.verify().sound
    conn = storm.store.conn
    conn.execute("SET storm_queue.folding = 'on'")  # written as if by the fold: what verify compares
    conn.execute("UPDATE storm_queue.run SET attempts = 0 WHERE slug = 'a'")
    audit = storm.verify()
    assert not audit.sound and "storm_queue.run" in audit.problem.what and "not what the whole log" in audit.problem.what
    conn.execute("RESET storm_queue.folding")
    conn.execute("UPDATE storm_queue.run SET attempts = 1 WHERE slug = 'a'")  # a hand edit: the server stands aside
    audit = storm.verify()
    assert not audit.sound and "was written other than by the fold (UPDATE" in audit.problem.what, audit.problem
    from storm_queue.ops.upgrade import upgrade

    upgraded = upgrade(storm).check()
    assert upgraded.event["rederived"] == upgraded.event["seq"] - 1 and upgraded.event["from"] == upgraded.event["to"]
    assert storm.verify().sound
    assert storm.finish("a", lease.token, "ok").outcome == "done"


def test_verify_finds_a_watch_table_that_is_not_the_runs_a_claim_looks_at(pg_database) -> None:
    """storm_queue.watch (sql/schema.sql, kept by sql/functions/run_watched.sql) holds the run rows that hold
    a lease, carry a schedule or ended an attempt other than ok: a hand
    edit of it (a lease taken out, a finished lane put in) is found."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create

    url = pg_database()
    create(url)
    storm = Storm.find(url)
    for slug in ("a", "b"):
        storm.add(slug, "1").check()
    lease = storm.claim(holder="h").check()
    conn = storm.store.conn
    assert conn.execute("SELECT slug, lease_token FROM storm_queue.watch").fetchall() == [("a", lease.token)]
    conn.execute("SET storm_queue.folding = 'on'")  # (as the fold would: this is about what verify compares)
    conn.execute("DELETE FROM storm_queue.watch")  # a hand edit: the lease is no longer seen
    audit = storm.verify()
    assert not audit.sound and "storm_queue.run" in audit.problem.what, audit.problem
    conn.execute("INSERT INTO storm_queue.watch SELECT slug, since, lease_token, expires, quarantined, attempts, "
                 "last_end, not_before FROM storm_queue.run")
    assert storm.verify().sound
    conn.execute("RESET storm_queue.folding")
    storm.finish("a", lease.token, "ok").check()
    assert conn.execute("SELECT count(*) FROM storm_queue.watch").fetchone()[0] == 0  # finished ok: nothing to watch
    conn.execute("INSERT INTO storm_queue.watch SELECT slug, since, lease_token, expires, quarantined, attempts, "
                 "last_end, not_before FROM storm_queue.run")
    assert not storm.verify().sound  # (and the server stands aside: withdrawn)


def test_runners_claiming_at_once_take_exactly_the_first_claimable_lanes_in_run_order(
        pg_server, _pg_cleanup, tmp_path) -> None:
    """Six connections claim at once (threads) on a storm with a priority
    lane, dependencies, an abandoned one and a schedule: the leased lanes
    are the five the Python path leases one after the other, each once,
    and the sixth claim waits."""
    from concurrent.futures import ThreadPoolExecutor

    from storm_queue.service.storm import Storm

    toml = "[runner]\nslots = 6\nunattended = true\n"
    deps = {"c": ["a"], "d": ["zz"]}
    served, planned = twins(pg_server, _pg_cleanup, toml, tmp_path, deps)
    for storm in (served, planned):
        storm.add("f", "6", deps=("e",)).check()
        for slug in ("g", "h", "i", "j"):
            storm.add(slug, "7").check()
        storm.settle("e", "abandoned").check()
        storm.bump("h").check()
        storm.schedule("i", "+1h").check()
    expected = [planned.claim(holder=f"h{n}").check().slug for n in range(6)]
    assert expected == ["h", "a", "b", "g", "j", None], expected  # c waits on a, d on zz, f is blocked, i scheduled
    url = served.store.url
    runners = [Storm.find(url) for _ in range(6)]
    with ThreadPoolExecutor(6) as pool:
        taken = list(pool.map(lambda n: runners[n].claim(holder=f"h{n}").check(), range(6)))
    assert sorted(str(t.slug) for t in taken) == sorted(map(str, expected)), [t.to_json() for t in taken]
    assert {t.token for t in taken if t.slug} == {1}
    assert served.claim(holder="late").check().decision.startswith("wait")
    claims = [json.loads(line) for line in lines(served) if b'"action":"claim"' in line]
    assert [c["slug"] for c in claims] == expected[:5]  # in run order, as the lock served them
    audit = served.verify()
    assert audit.sound, audit.problem
    for storm in runners + [served, planned]:
        storm.store.close()


def test_the_operators_served_requests_keep_the_state_rows_body_near_the_head(pg_database, tmp_path) -> None:
    """The server's functions move the log's head, never the state row's
    body (a JSON of the Python fold); the operator's store rewrites it once
    it is FOLD_AT_MOST lines behind, so a reader never folds more."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create
    from storm_queue.store.postgres.store import FOLD_AT_MOST

    url = pg_database()
    create(url)
    storm = Storm.find(url)
    (tmp_path / "storm.toml").write_text("[runner]\nunattended = true\n")
    storm.declare(str(tmp_path / "storm.toml")).check()
    storm.store.conn.execute("INSERT INTO storm_queue.lane (slug, issue) "
                             "SELECT 'l' || lpad(i::text, 3, '0'), i::text FROM generate_series(1, 90) i")
    behind = []
    for _ in range(90):
        lease = storm.claim(holder="h").check()
        storm.finish(lease.slug, lease.token, "ok").check()
        behind.append(storm.store.conn.execute("SELECT seq - body_seq FROM storm_queue.state").fetchone()[0])
    assert max(behind) <= FOLD_AT_MOST + 2 and behind[-1] < max(behind), behind  # caught up
    assert storm.verify().sound


def test_one_process_at_a_time_rewrites_the_body_and_never_over_a_newer_one(pg_database, tmp_path) -> None:
    """catch_up reads and dumps the state outside the storm's lock: a
    process finding another at it (the catch-up's own lock) leaves the body
    alone, the one that rewrites it writes the body only (the head stays),
    and a body already at or past the line it read is not written back."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create
    from storm_queue.store.postgres.queries import q
    from storm_queue.store.postgres.served import catch_up, catch_up_at
    from storm_queue.store.postgres.store import FOLD_AT_MOST

    url = pg_database()
    create(url)
    storm, other = Storm.find(url), Storm.find(url)
    (tmp_path / "storm.toml").write_text("[runner]\nunattended = true\n")
    storm.declare(str(tmp_path / "storm.toml")).check()
    storm.store.conn.execute("INSERT INTO storm_queue.lane (slug, issue) "
                             "SELECT 'l' || lpad(i::text, 3, '0'), i::text FROM generate_series(1, 90) i")
    other.declaration()

    def state() -> tuple:
        return storm.store.conn.execute("SELECT seq, body_seq, body FROM storm_queue.state").fetchone()

    for _ in range(3):
        lease = other.claim(holder="h").check()
        other.finish(lease.slug, lease.token, "ok").check()
    seq, body_seq, body = state()
    assert seq - body_seq >= 6
    holder = storm.store.conn
    holder.execute("BEGIN")
    holder.execute(q("try_catch_up"))  # this process is at it
    assert catch_up(other.store, 1) is False
    holder.execute("ROLLBACK")
    assert state() == (seq, body_seq, body)  # the other left it
    catch_up(other.store, 1)
    assert state()[:2] == (seq, seq) and state()[2] != body
    caught = state()
    storm.store.conn.execute(q("move_body"), ("{}", seq - 1, None, seq - 1))  # an older body: not written
    assert state() == caught
    assert storm.verify().sound
    assert catch_up_at(other.store, FOLD_AT_MOST) == FOLD_AT_MOST  # 3 runs: every FOLD_AT_MOST lines
    for s in (storm, other):
        s.store.close()


def test_a_cancelled_lanes_late_renew_and_finish_are_refused_lane_cancelled_by_the_server(
        pg_server, _pg_cleanup, tmp_path) -> None:
    with frozen_clock():
        served, planned = twins(pg_server, _pg_cleanup, "[runner]\nttl_min = 1\n", tmp_path)
        for storm in (served, planned):
            lease = storm.claim(holder="h").check()
            storm.cancel(lease.slug, "no longer wanted").check()
        for call in (lambda s: s.renew("a", lease.token), lambda s: s.finish("a", lease.token, "ok")):
            asked = len(served.answers)
            first = answer(lambda: call(served))
            assert first == answer(lambda: call(planned)) and served.answers[asked:] != [None]
            assert (first[1]["code"], first[3]) == ("lane_cancelled", 2), first
        assert lines(served) == lines(planned) and served.verify().sound
        served.store.close()
        planned.store.close()


def test_the_server_stands_aside_for_a_declaration_or_log_edited_by_hand(pg_database) -> None:
    """The server decides by the policy parsed from the declaration's text;
    a declaration written by hand into the storm row (not by declare) is
    not that text, so the operator's request takes the Python path, which
    reads it (here: refuses it as unreadable). An edit of the log's rows
    withdraws the server's folded tables (they no longer speak for the
    log): the operator's requests take the Python path, a runner's are
    answered that the order is unknown (tests/database/test_attack.py)."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create

    url = pg_database()
    create(url)
    storm = Storm.find(url)
    for slug in ("a", "b", "c"):
        assert storm.add(slug, "1").outcome == "done"
    counted = Counted(storm.store.conn)
    storm.store._conn = counted
    conn = counted.conn

    def claimed(slug: str, served: bool) -> None:
        before = len(counted.statements)
        lease = storm.claim(holder="h").check()
        assert lease.slug == slug
        sent = counted.statements[before:]
        assert (len(sent) == 1 and not any("storm_queue.lock" in q for q in sent)) == served, sent
        storm.finish(slug, lease.token, "ok").check()
        storm.settle(slug, "integrated", reason="reviewed").check()

    claimed("a", served=True)
    conn.execute("UPDATE storm_queue.storm SET declaration = '[runner\n'")
    refused = storm.claim(holder="h")
    assert (refused.outcome, refused.code) == ("refused", "declaration_unreadable"), refused.message
    conn.execute("UPDATE storm_queue.storm SET declaration = NULL")
    claimed("b", served=True)  # the policy's text is back

    conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only")
    conn.execute("UPDATE storm_queue.event SET line = line WHERE seq = 1")
    conn.execute("ALTER TABLE storm_queue.event ENABLE TRIGGER event_append_only")
    assert conn.execute("SELECT withdrawn FROM storm_queue.storm").fetchone()[0].startswith("a line of the log was edited")
    claimed("c", served=False)


@pytest.fixture(scope="module")
def schema_conn(pg_server):
    """A connection to a storm's database (its helper functions), for the module."""
    from storm_queue.store.postgres import driver
    from storm_queue.store.postgres.connect import create

    name = f"stamps_{secrets.token_hex(4)}"
    pg_server.create_database(name, "postgres")
    url = pg_server.url(name, "postgres")
    create(url)
    conn = driver.connect(url)
    conn.execute("SET search_path = pg_catalog, pg_temp")  # the serving functions' own
    yield conn
    conn.close()
    pg_server.drop_database(name)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(TEXTS.filter(lambda t: t is None or "\x00" not in t),
                      st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)))
def test_the_servers_json_text_is_the_python_encoders(schema_conn, text) -> None:
    """storm_queue.json_str (inlined into the serving functions' statements,
    sql/functions/json_str.sql) writes a text as core/jsoncodec.dumps does."""
    from storm_queue.core.jsoncodec import dumps

    got = schema_conn.execute("SELECT storm_queue.json_str(%s::text)", (text,)).fetchone()[0]
    assert got == (None if text is None else dumps(text))


@settings(max_examples=300, deadline=None)
@given(t=st.one_of(st.floats(0, 4_102_444_800, allow_nan=False),
                   st.integers(0, 4_102_444_799).map(lambda s: s + 0.9999995),
                   st.integers(0, 4_102_444_799).map(lambda s: s + 0.0000005),
                   st.integers(0, 4_102_444_799).map(float)))
def test_the_servers_stamp_is_the_python_clocks(schema_conn, t) -> None:
    """storm_queue.stamp (sql/functions/stamp.sql) writes a POSIX time as
    core/clock.stamp does, microseconds rounded half to even and carried."""
    from storm_queue.core.clock import stamp

    assert schema_conn.execute("SELECT storm_queue.stamp(%s::double precision)", (t,)).fetchone()[0] == stamp(t)


def _marked_storm(pg_database, tmp_path):
    """A new database storm of 45 lanes l00..l44, two slots, unattended,
    one attempt a lane: the marks' tests' storm."""
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create

    url = pg_database()
    create(url)
    storm = Storm.find(url)
    (tmp_path / "storm.toml").write_text("[runner]\nslots = 2\nunattended = true\nattempts = 1\n")
    storm.declare(str(tmp_path / "storm.toml")).check()
    for i in range(45):
        storm.add(f"l{i:02d}", str(i)).check()
    return storm


def test_a_claim_passes_a_long_held_lease_once_and_takes_its_lane_again_once_it_ends(pg_database, tmp_path) -> None:
    """The claim's mark (runs_at.open_from, sql/schema.sql) passes
    held and quarantined lanes: with the first lane held while 40 after it
    are claimed and finished, the mark moves past them all (a claim does
    not walk past every lane finished since the lease was taken); once
    that lease ends without a result (a failed finish), or a quarantine
    is lifted, the lane is the next claimed, as run order says."""
    storm = _marked_storm(pg_database, tmp_path)

    def mark() -> int:
        return storm.store.conn.execute("SELECT open_from FROM storm_queue.runs_at").fetchone()[0]

    def pos(slug: str) -> int:
        return storm.store.conn.execute("SELECT pos FROM storm_queue.lane WHERE slug = %s", (slug,)).fetchone()[0]

    held = storm.claim(holder="long").check()
    assert held.slug == "l00"
    for _ in range(40):
        lease = storm.claim(holder="short").check()
        storm.finish(lease.slug, lease.token, "ok").check()
    assert mark() >= pos("l40")  # past the held lane and the 40 finished
    storm.finish("l00", held.token, "failed").check()  # its only attempt spent: quarantined, still passed over
    assert mark() >= pos("l40")
    assert storm.claim(holder="short").check().slug == "l41"
    assert storm.unpark("l00", reason="try again").outcome == "done"
    assert mark() <= pos("l00")
    assert storm.claim(holder="again").check().slug == "l00"
    audit = storm.verify()
    assert audit.sound, audit.problem
    storm.store.close()


def test_the_priority_lanes_mark_passes_what_is_done_once_and_goes_back_for_a_lane_open_again(pg_database,
                                                                                               tmp_path) -> None:
    """The priority lane's mark (runs_at.prio_from, schema version 17): a
    claim walked every bumped lane at every request, those finished too,
    so with 1,400 of them a finish --then-claim took 15 ms where the first
    took 2. With every lane bumped, a long lease on the first and 40 after
    it claimed and finished, the mark is past them all; the long lease
    ending in a quarantine keeps it there, an unpark takes it back to that
    lane, which is claimed next; it passes a held lane too, and goes back
    to it when it is unheld (queue order's mark likewise: one lane held
    at the head of the queue made every claim walk every lane finished
    after it); once every bumped lane is done it is past the end, and a
    lane pushed then (given a place before it again) is claimed next. verify holds the mark sound throughout."""
    storm = _marked_storm(pg_database, tmp_path)
    for tail in ("q1", "q2", "q3", "q4"):
        storm.add(tail, tail[1:] + "00").check()
    for i in range(45):
        storm.bump(f"l{i:02d}").check()

    def mark() -> int:
        return storm.store.conn.execute("SELECT prio_from FROM storm_queue.runs_at").fetchone()[0]

    def place(slug: str) -> int:
        return storm.store.conn.execute("SELECT place FROM storm_queue.priority WHERE slug = %s", (slug,)).fetchone()[0]

    def queue_mark() -> int:
        return storm.store.conn.execute("SELECT open_from FROM storm_queue.runs_at").fetchone()[0]

    def pos(slug: str) -> int:
        return storm.store.conn.execute("SELECT pos FROM storm_queue.lane WHERE slug = %s", (slug,)).fetchone()[0]

    def claimed(holder: str = "short") -> str:
        lease = storm.claim(holder=holder).check()
        storm.finish(lease.slug, lease.token, "ok").check()
        return lease.slug

    held = storm.claim(holder="long").check()
    assert held.slug == "l00"
    assert [claimed() for _ in range(40)] == [f"l{i:02d}" for i in range(1, 41)]
    assert mark() >= place("l40")  # past the leased lane and the 39 finished before the last claimed
    storm.finish("l00", held.token, "failed").check()  # its only attempt spent: quarantined, still passed over
    assert mark() >= place("l40")
    assert storm.unpark("l00", reason="try again").outcome == "done"
    assert mark() <= place("l00")
    assert claimed("again") == "l00"
    assert storm.hold("l41", reason="not yet").outcome == "done"
    assert [claimed() for _ in range(3)] == ["l42", "l43", "l44"]
    assert mark() > place("l41")  # a held lane is passed too
    assert storm.unhold("l41", reason="now").outcome == "done"
    assert mark() <= place("l41")  # and the hold's end takes the mark back to it
    assert claimed() == "l41"
    assert claimed() == "q1"
    end = mark()
    assert end > place("l44")  # past the end: every bumped lane is done
    storm.unbump("l44").check()  # the last place given up: the next lane to join the priority lane is given it again
    storm.push("z", "100").check()
    assert place("z") < end
    assert claimed() == "z"
    assert storm.hold("q2", reason="not yet").outcome == "done"  # queue order's mark passes a held lane too
    assert claimed() == "q3"
    assert queue_mark() > pos("q2")
    assert storm.unhold("q2", reason="now").outcome == "done"
    assert queue_mark() <= pos("q2")
    assert claimed() == "q2"
    assert claimed() == "q4"
    audit = storm.verify()
    assert audit.sound, audit.problem
    assert storm.store.conn.execute("SELECT version FROM storm_queue.version").fetchone()[0] == schema_version()
    storm.store.close()


def test_the_marks_pass_a_lane_scheduled_later_until_it_is_due_and_go_back_when_its_schedule_changes(
        pg_database, tmp_path, clock) -> None:
    """Schema version 18: a lane scheduled later that names no dependency
    stopped both marks, so one lane scheduled for tomorrow at the head of
    the queue made every claim walk every lane finished after it (a
    runner's finish --then-claim 4 ms a lane at first, 15 ms after 1,400).
    The marks pass it now, until the earliest time a lane they passed so
    is scheduled (runs_at.later_until): from that time it is claimed as
    run order says; a schedule changed takes the marks back to its lane at
    once; a scheduled lane that names a dependency is not passed (it may
    be blocked, and is marked so when met). marks_sound holds throughout."""
    from storm_queue.core.clock import stamp
    from storm_queue.store.postgres.queries import q

    storm = _marked_storm(pg_database, tmp_path)
    conn = storm.store.conn
    clock.stand_still()
    now = clock()

    def marks() -> tuple:
        return conn.execute("SELECT open_from, prio_from, later_until, open_back, prio_back "
                            "FROM storm_queue.runs_at").fetchone()

    def pos(slug: str) -> int:
        return conn.execute("SELECT pos FROM storm_queue.lane WHERE slug = %s", (slug,)).fetchone()[0]

    def claimed() -> str:
        lease = storm.claim(holder="short").check()
        storm.finish(lease.slug, lease.token, "ok").check()
        assert conn.execute(q("marks_sound")).fetchone()[0]
        return lease.slug

    storm.schedule("l00", stamp(now + 7200)).check()  # at the head of the queue, for later
    storm.schedule("l01", stamp(now + 10**6)).check()
    storm.bump("l02").check()
    storm.schedule("l02", stamp(now + 3600)).check()  # in the priority lane, for later
    assert [claimed() for _ in range(10)] == [f"l{i:02d}" for i in range(3, 13)]
    open_from, prio_from, until, open_back, prio_back = marks()
    assert open_from >= pos("l12") and open_back == pos("l00")  # passed for their schedules
    assert until == stamp(now + 3600) and prio_back is not None and prio_from > prio_back
    storm.schedule("l01", stamp(now - 1)).check()  # due now: the mark goes back to it at once
    assert marks()[0] <= pos("l01")
    assert claimed() == "l01"
    assert claimed() == "l13"
    assert marks()[0] == pos("l13")  # past l00 again
    clock.advance(3600)  # l02 due (exactly: then it runs)
    assert claimed() == "l02"
    assert claimed() == "l14"
    clock.advance(3600)  # l00 due
    assert claimed() == "l00"
    storm.add("d", "99", deps=("l44",)).check()  # a later lane with a dependency stops the mark
    storm.schedule("d", stamp(now + 10**6)).check()
    assert [claimed() for _ in range(30)] == [f"l{i:02d}" for i in range(15, 45)]
    assert storm.claim(holder="short").check().decision.startswith("wait ")  # d waits (its lanes await review)
    assert marks()[0] == pos("d")
    audit = storm.verify()
    assert audit.sound, audit.problem
    storm.store.close()


def test_a_served_claim_that_waits_on_a_cycle_says_so_though_it_marked_a_lane_blocked(pg_server, _pg_cleanup,
                                                                                        tmp_path) -> None:
    """Found by the property test: a claim that meets a lane blocked on an
    abandoned dependency marks it blocked (a result row) and waits on a
    dependency cycle; the Python path says so from the view it decided by,
    and the served claim reads the storm afterwards, where the blocked mark
    made that lane finished (awaiting review) and the decision no longer
    ``wait``. The server names the lanes it marked, and the note is judged
    without them, as the Python path judges it."""
    toml = "[runner]\nslots = 1\nunattended = false\n"
    deps = {"a": ["a"], "b": ["a", "c"], "d": ["a"]}
    with frozen_clock():
        served, planned = twins(pg_server, _pg_cleanup, toml, tmp_path, deps)
        try:
            for storm in (served, planned):
                storm.settle("e", "integrated").check()
                storm.cancel("c", "not wanted").check()
            waits = [storm.claim(holder="h1").check() for storm in (served, planned)]
            assert served.answers[-1] is not None  # the server decided it
            assert [w.decision for w in waits] == ["wait", "wait"]
            assert waits[0].warnings == waits[1].warnings == [
                "nothing can run: dependency cycle: a (line 1) depends on itself; it runs once its line no longer names it"]
        finally:
            served.store.close()
            planned.store.close()

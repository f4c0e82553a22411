"""A Hypothesis state machine that drives the real library over a real storm
directory with random push, bump, unbump, settle, finish and hand edits of
``queue.txt``, beside a small independent model of the storm.

Checked (contract section 3 items 5 and 6, section 4):

* after every admitted request (outcome done or noop) the lane the log
  replays to equals ``lane.derive`` computed from the files as they are now;
* after every step the log reads and verifies, ``seq`` runs 1..N without a
  gap, every ``prev`` is the SHA-256 of the line before, and the witness
  matches the log;
* every request is recorded as exactly one line; a refused one changes
  nothing in the lane or the named set;
* the model predicts each outcome (done, noop or the refusal code), the named
  set, and the set of lanes in the priority lane, without using the library's
  planner.

The same machine runs on a database storm (``DatabaseLaneMachine``: the
store's rows stand for the files, written as the operator's role would
write them; the log's head is its state row, which ``verify`` checks), with
fewer examples, since each request there is a transaction on a server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from storm_queue.core import lane as lanemod
from storm_queue.store.directory import queuefile
from storm_queue.service.storm import Storm
from storm_queue.store.directory.log import reader
from storm_queue.core import logread
from storm_queue.core.records import replace

POOL = tuple("abcdefghij")  # every slug the machine ever uses
STRANGER = "zz-unknown"  # a dependency that no file ever knows


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
    env.update(extra)
    return env


def _some(choices: list[str], most: int):
    """Between 0 and ``most`` distinct picks, the count drawn evenly (plain
    ``st.lists`` leans to empty lists, and lanes without deps test little)."""
    top = min(most, len(choices))
    return st.integers(0, top).flatmap(
        lambda k: st.lists(st.sampled_from(choices), unique=True, min_size=k, max_size=k)
    )


class Model:
    """The storm as the test believes it is, and the contract's rules over it,
    written independently of ``storm_queue.lane``."""

    def __init__(self) -> None:
        self.queue: dict[str, tuple[str, tuple[str, ...]]] = {}  # slug -> (issue, deps), in file order
        self.integrated: set[str] = set()
        self.abandoned: set[str] = set()
        self.finished: set[str] = set()
        self.named: list[str] = []
        self.lane: set[str] = set()  # the replayed lane, as a set

    # -- the files ----------------------------------------------------------

    def queue_text(self) -> str:
        return "".join(
            " ".join([slug, issue] + ([",".join(deps)] if deps else [])) + "\n"
            for slug, (issue, deps) in self.queue.items()
        )

    # -- states -------------------------------------------------------------

    def done(self, slug: str) -> bool:
        return slug in self.integrated or slug in self.abandoned or slug in self.finished

    def live(self, slug: str) -> bool:
        return slug in self.queue and not self.done(slug)

    def satisfied(self, dep: str) -> bool:
        """A dependency that needs no pulling forward: integrated, or finished
        and awaiting review (the walk stops there)."""
        return dep in self.integrated or (dep in self.finished and dep not in self.abandoned)

    def walk(self, slug: str, queue: dict | None = None):
        """Members reachable from ``slug`` (itself included), the edges walked,
        and the abandoned and unknown dependencies met."""
        queue = self.queue if queue is None else queue
        members: dict[str, list[str]] = {}
        abandoned, unknown = set(), set()
        todo = [slug]
        while todo:
            node = todo.pop()
            if node in members:
                continue
            members[node] = []
            for dep in queue[node][1]:
                if self.satisfied(dep):
                    continue
                if dep in self.abandoned:
                    abandoned.add(dep)
                elif dep not in queue:
                    unknown.add(dep)
                else:
                    members[node].append(dep)
                    todo.append(dep)
        return members, abandoned, unknown

    @staticmethod
    def has_cycle(members: dict[str, list[str]]) -> bool:
        colour: dict[str, int] = {}

        def visit(node: str) -> bool:
            colour[node] = 1
            for dep in members[node]:
                if colour.get(dep) == 1 or (dep not in colour and visit(dep)):
                    return True
            colour[node] = 2
            return False

        return any(node not in colour and visit(node) for node in members)

    def required(self, named) -> set[str]:
        out: set[str] = set()
        for n in named:
            if self.live(n):
                out.update(self.walk(n)[0])
        return out

    def strict_refusal(self, slug: str, queue: dict | None = None) -> str | None:
        members, abandoned, unknown = self.walk(slug, queue)
        if abandoned:
            return "dependency_abandoned"
        if unknown:
            return "dependency_unknown"
        if self.has_cycle(members):
            return "dependency_cycle"
        return None

    # -- predictions: (outcome or refusal code, named after) -----------------

    def predict_bump(self, slug: str) -> str:
        if slug not in self.queue and not self.done(slug):
            return "unknown_slug"
        if self.done(slug):
            return "noop"
        return self.strict_refusal(slug) or "done"

    def predict_push(self, slug: str, issue: str, deps: tuple[str, ...] | None) -> tuple[str, bool]:
        """The outcome and whether ``queue.txt`` gains a line."""
        if slug in self.queue:
            q_issue, q_deps = self.queue[slug]
            if q_issue != issue:
                return "issue_mismatch", False
            if deps is not None and set(deps) != set(q_deps):
                return "deps_mismatch", False
            return self.predict_bump(slug), False
        if self.done(slug):
            return "noop", False
        after = dict(self.queue)
        after[slug] = (issue, tuple(dict.fromkeys(deps or ())))
        refusal = self.strict_refusal(slug, after)
        return (refusal, False) if refusal else ("done", True)

    def predict_unbump(self, slug: str) -> str:
        if slug not in self.lane:
            return "not_prioritised"
        for n in self.named:
            if n != slug and self.live(n) and slug in self.walk(n)[0]:
                return "needed_by_named"
        return "done"


class LaneMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="sq-lane-machine-")
        self.root = os.path.join(self.tmp, "storm")
        os.mkdir(self.root)
        open(os.path.join(self.root, "queue.txt"), "w").close()  # a storm, empty until the first rule writes it
        self.storm = Storm(self.root, env=_env(), wait=10)
        self.model = Model()
        self.issue_counter = 0
        self.requests = 0  # requests made, each must be one log line
        self.base = 0  # the log's lines before the first request (a database storm's init)

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the store: a directory's files (DatabaseLaneMachine: its rows) -------

    def read_log(self) -> logread.LogRead:
        return reader.read(self.log_path())

    def log_lines(self) -> list[bytes]:
        if not os.path.exists(self.log_path()):
            return []
        return open(self.log_path(), "rb").read().splitlines(keepends=True)

    def check_head(self, lines: list[bytes], prev: str | None) -> None:
        """The log's head agrees with its lines: the witness."""
        witness = json.loads(open(reader.witness_path(self.log_path()), "rb").read())
        assert witness["length"] == sum(map(len, lines))
        assert witness["seq"] == len(lines)
        assert witness["digest"] == prev
        assert self.read_log().length == sum(map(len, lines))

    def queue_rows(self) -> list[tuple]:
        parsed = queuefile.read(self.path("queue.txt"))
        assert parsed.skipped == ()
        return [(ln.slug, ln.issue, ln.deps) for ln in parsed.lanes]

    def append_ledger(self, where: str, slug: str) -> None:
        with open(self.path(f"{where}.txt"), "a") as f:
            f.write(slug + "\n")

    def write_result(self, slug: str) -> None:
        marks = self.path("lanes", slug, ".qwenstorm")
        os.makedirs(marks, exist_ok=True)
        with open(os.path.join(marks, "result.json"), "w") as f:
            f.write('{"status": "ok"}\n')

    # -- helpers ------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def log_path(self) -> str:
        return self.path("priority.log")

    def next_issue(self) -> str:
        self.issue_counter += 1
        return str(self.issue_counter)

    def write_queue(self) -> None:
        with open(self.path("queue.txt"), "w") as f:
            f.write(self.model.queue_text())

    def snapshot(self, log: logread.LogRead) -> lanemod.Snapshot:
        return self.storm.store.snapshot(log)

    def known(self) -> list[str]:
        """Slugs that queue.txt or a ledger knows."""
        return sorted(set(self.model.queue) | self.model.integrated | self.model.abandoned | self.model.finished)

    def check_queue_file(self) -> None:
        assert self.queue_rows() == [
            (slug, issue, deps) for slug, (issue, deps) in self.model.queue.items()
        ]

    def request(self, call, expected: str, slug: str):
        """Make one request; check it against the prediction and the log."""
        before = self.read_log()
        lines_before = before.seq
        out = call()
        self.requests += 1
        after = self.read_log()
        assert out.recorded, out
        assert after.seq == lines_before + 1, "every request is exactly one log line"
        assert out.event is not None and out.event["seq"] == after.seq
        if expected in ("done", "noop"):
            assert out.outcome == expected, (expected, out)
            assert out.code is None
            assert out.event["action"] == out.action
            # contract 3.6: after every admitted request the replayed lane is the derivation
            snap = self.snapshot(after)
            assert after.state.lane == lanemod.derive(snap, after.state.named)
            assert not after.warnings
            # what the record says it moved and removed is the whole difference
            old, new = before.state.lane, after.state.lane
            assert list(out.event["moved"]) == [s for s in new if s not in old]
            assert set(out.event["removed"]) == set(old) - set(new)
            # moved lanes come dependencies first (when no cycle is involved)
            moved = list(out.event["moved"])
            members: dict[str, list[str]] = {}
            for n in after.state.named:
                if self.model.live(n):
                    members.update(self.model.walk(n)[0])
            if not Model.has_cycle(members):
                for m in moved:
                    for dep in self.model.queue.get(m, ("-", ()))[1]:
                        if dep in moved:
                            assert moved.index(dep) < moved.index(m), (dep, m, moved)
        else:
            assert out.outcome == "refused", (expected, out)
            assert out.code == expected, (expected, out)
            assert out.event["action"] == "refused"
            assert out.event["code"] == expected
            assert out.event["requested"] == out.action
            assert out.event["slug"] == slug
            # a refusal changes nothing but the count of refusals of its verb
            assert replace(after.state, requests={}) == replace(before.state, requests={})
            counts = lambda state: state.requests.get(out.action, {}).get("refused", 0)  # noqa: E731
            assert counts(after.state) == counts(before.state) + 1
        return out, before, after

    def settle_model(self, out, verb: str, slug: str) -> None:
        if out.outcome == "done":
            if verb == "unbump":
                if slug in self.model.named:
                    self.model.named.remove(slug)
            elif slug not in self.model.named:
                self.model.named.append(slug)
        if out.outcome in ("done", "noop"):
            self.model.lane = self.model.required(self.model.named)

    # -- setup ---------------------------------------------------------------

    @initialize(data=st.data())
    def start(self, data) -> None:
        count = data.draw(st.integers(0, 6), label="initial lanes")
        for slug in POOL[:count]:
            earlier = list(self.model.queue)
            deps = data.draw(_some(earlier, 2), label=f"deps of {slug}") if earlier else []
            self.model.queue[slug] = (self.next_issue(), tuple(deps))
        self.write_queue()

    # -- requests ------------------------------------------------------------

    @rule(data=st.data())
    def bump(self, data) -> None:
        queued = sorted(self.model.queue)
        pick = st.one_of(st.sampled_from(queued), st.sampled_from(POOL)) if queued else st.sampled_from(POOL)
        slug = data.draw(pick, label="bump")
        expected = self.model.predict_bump(slug)
        out, _, _ = self.request(lambda: self.storm.bump(slug, reason=f"bump {slug}"), expected, slug)
        self.settle_model(out, "bump", slug)

    @rule(data=st.data())
    def unbump(self, data) -> None:
        in_lane = sorted(self.model.lane)
        pick = st.one_of(st.sampled_from(in_lane), st.sampled_from(POOL)) if in_lane else st.sampled_from(POOL)
        slug = data.draw(pick, label="unbump")
        expected = self.model.predict_unbump(slug)
        out, _, _ = self.request(lambda: self.storm.unbump(slug), expected, slug)
        self.settle_model(out, "unbump", slug)

    @rule(data=st.data())
    def push_new(self, data) -> None:
        """Push a slug that queue.txt does not carry, with deps among known slugs."""
        fresh = [s for s in POOL if s not in self.model.queue]
        if not fresh:
            return
        slug = data.draw(st.sampled_from(fresh), label="push new")
        choices = self.known() + [STRANGER]
        deps = tuple(data.draw(_some(choices, 3), label="deps"))
        deps = tuple(d for d in deps if d != slug)
        issue = self.next_issue()
        expected, appended = self.model.predict_push(slug, issue, deps)
        if appended:  # the model's queue.txt gains the line first, as the real one does
            self.model.queue[slug] = (issue, deps)
        out, _, _ = self.request(lambda: self.storm.push(slug, issue, ",".join(deps) or None, reason="new lane"), expected, slug)
        if out.outcome != "refused":
            assert out.appended is appended
            assert out.event["appended"] is appended
        self.check_queue_file()
        self.settle_model(out, "push", slug)

    @rule(data=st.data())
    def push_queued(self, data) -> None:
        """Push a slug that queue.txt carries: as it is, or under another
        issue, or with other deps."""
        if not self.model.queue:
            return
        slug = data.draw(st.sampled_from(sorted(self.model.queue)), label="push queued")
        issue, deps = self.model.queue[slug]
        how = data.draw(st.sampled_from(["as-is", "same-deps", "other-issue", "other-deps"]), label="how")
        given: tuple[str, ...] | None = None
        if how == "same-deps":
            given = tuple(reversed(deps))  # order does not matter
        elif how == "other-issue":
            issue = str(int(issue) + 1000)
        elif how == "other-deps":
            given = tuple(deps) + (STRANGER,)
        expected, appended = self.model.predict_push(slug, issue, given)
        assert not appended
        dep_arg = None if given is None else ",".join(given)
        if how == "same-deps" and not given:
            dep_arg = None
        out, _, _ = self.request(lambda: self.storm.push(slug, issue, dep_arg), expected, slug)
        if out.outcome != "refused":
            assert out.appended is False
        self.check_queue_file()
        self.settle_model(out, "push", slug)

    @rule(data=st.data())
    def refused_before_lookup(self, data) -> None:
        """Requests refused on shape or authority: recorded, nothing changes."""
        kind = data.draw(st.sampled_from(["invalid_slug", "lane_process", "undeclared_source"]), label="refusal")
        slug = data.draw(st.sampled_from(POOL), label="slug")
        if kind == "invalid_slug":
            slug = "../" + slug
            call = lambda: self.storm.bump(slug)  # noqa: E731
        elif kind == "lane_process":
            lane_storm = Storm.find(self.root, env=_env(STORM_QUEUE_LANE=""), wait=10)
            call = lambda: lane_storm.unbump(slug)  # noqa: E731
        else:
            call = lambda: self.storm.bump(slug, source="nightly")  # noqa: E731
        out, _, _ = self.request(call, kind, slug)
        assert out.event["authorised"] is False

    # -- what the reviewer and the runner do ---------------------------------

    @rule(data=st.data(), where=st.sampled_from(["integrated", "abandoned"]))
    def settle(self, data, where: str) -> None:
        candidates = sorted(s for s in self.model.queue if s not in self.model.integrated | self.model.abandoned)
        if not candidates:
            return
        slug = data.draw(st.sampled_from(candidates), label="settle")
        self.append_ledger(where, slug)
        getattr(self.model, where).add(slug)

    @rule(data=st.data())
    def finish(self, data) -> None:
        candidates = sorted(s for s in self.model.queue if not self.model.done(s))
        if not candidates:
            return
        slug = data.draw(st.sampled_from(candidates), label="finish")
        self.write_result(slug)
        self.model.finished.add(slug)

    # -- hand edits of queue.txt ---------------------------------------------

    @rule(data=st.data())
    def edit_add_lane(self, data) -> None:
        fresh = [s for s in POOL if s not in self.model.queue]
        if not fresh:
            return
        slug = data.draw(st.sampled_from(fresh), label="hand-add")
        others = [s for s in self.known() if s != slug]
        deps = data.draw(_some(others, 2), label="deps") if others else []
        self.model.queue[slug] = (self.next_issue(), tuple(deps))
        self.write_queue()

    @rule(data=st.data())
    def edit_drop_dependency(self, data) -> None:
        with_deps = sorted(s for s, (_, deps) in self.model.queue.items() if deps)
        if not with_deps:
            return
        slug = data.draw(st.sampled_from(with_deps), label="drop dep of")
        issue, deps = self.model.queue[slug]
        dep = data.draw(st.sampled_from(deps), label="dep")
        self.model.queue[slug] = (issue, tuple(d for d in deps if d != dep))
        self.write_queue()

    @rule(data=st.data())
    def edit_add_dependency(self, data) -> None:
        """Add a dependency on any pool slug, which may make a cycle or name a
        lane nobody knows."""
        if not self.model.queue:
            return
        slug = data.draw(st.sampled_from(sorted(self.model.queue)), label="add dep to")
        issue, deps = self.model.queue[slug]
        choices = [s for s in POOL if s not in deps]
        if not choices:  # it already depends on every slug of the pool
            return
        dep = data.draw(st.sampled_from(choices), label="dep")
        self.model.queue[slug] = (issue, deps + (dep,))
        self.write_queue()

    @rule(data=st.data())
    def edit_delete_line(self, data) -> None:
        if not self.model.queue:
            return
        slug = data.draw(st.sampled_from(sorted(self.model.queue)), label="delete line")
        del self.model.queue[slug]
        self.write_queue()

    # -- after every step ----------------------------------------------------

    @invariant()
    def log_verifies(self) -> None:
        log = self.read_log()  # raises UnknownOrder on any damage
        assert log.torn == 0 and not log.warnings
        lines = self.log_lines()
        if self.requests == 0 and self.base == 0:
            assert lines == [] and not os.path.exists(self.log_path())
            return
        assert len(lines) == self.base + self.requests
        prev = None
        for number, line in enumerate(lines, start=1):
            assert line.endswith(b"\n")
            event = json.loads(line)
            assert event["v"] == 1
            assert event["seq"] == number
            assert event["prev"] == prev
            prev = hashlib.sha256(line).hexdigest()
        self.check_head(lines, prev)
        assert log.seq == len(lines)

    @invariant()
    def model_agrees(self) -> None:
        state = self.read_log().state
        assert list(state.named) == self.model.named
        # the model's named set, among live lanes, is what the lane serves
        assert {n for n in state.named if self.model.live(n)} == {n for n in self.model.named if self.model.live(n)}
        assert set(state.lane) == self.model.lane


LaneMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLaneMachine = LaneMachine.TestCase


# -- the same machine on a database storm ---------------------------------------

#: the session's PostgreSQL server, set by the test below for the machine's examples
SERVER: list = []


class DatabaseLaneMachine(LaneMachine):
    """The machine over a storm in a fresh database of its own: the lane,
    settled and result rows stand for queue.txt, the ledgers and result.json
    (rewritten as the operator's role would write them), the event table for
    the log, and ``verify`` (the chain from line 1, the state row against
    the fold of the log) for the witness."""

    def __init__(self) -> None:
        import secrets

        from storm_queue.store.postgres.store import create

        RuleBasedStateMachine.__init__(self)
        server = SERVER[0]
        tag = secrets.token_hex(4)
        self.role, self.dbname = f"op_{tag}", f"storm_{tag}"
        server.create_role(self.role)
        server.create_database(self.dbname, owner=self.role)
        self.root = server.url(self.dbname, self.role)
        create(self.root)
        self.storm = Storm.find(self.root, env=_env(), wait=10)
        self.model = Model()
        self.issue_counter = 0
        self.requests = 0
        self.base = 1  # line 1 records the init

    def teardown(self) -> None:
        self.storm.close()
        SERVER[0].drop_database(self.dbname)
        SERVER[0].drop_role(self.role)

    def sql(self, query: str, rows=((),)) -> list[tuple]:
        from storm_queue.store.postgres import driver

        found: list[tuple] = []
        with driver.connect(self.root) as conn:
            for params in rows:
                cur = conn.execute(query, params)
                found += cur.fetchall() if cur.description else []
        return found

    def read_log(self) -> logread.LogRead:
        with self.storm.store._errors(), self.storm.store.conn.transaction():
            return self.storm.store._load()

    def log_lines(self) -> list[bytes]:
        return [bytes(r[0]) for r in self.sql("SELECT line FROM storm_queue.event ORDER BY seq")]

    def check_head(self, lines: list[bytes], prev: str | None) -> None:
        (seq, digest), = self.sql("SELECT seq, digest FROM storm_queue.state")
        assert (seq, digest) == (len(lines), prev)
        audit = self.storm.verify()
        assert audit.problem is None and audit.checkpoint == "agrees", audit

    def write_queue(self) -> None:
        """The lane rows become the model's queue, in order (a hand edit)."""
        self.sql("DELETE FROM storm_queue.lane")
        rows = [(slug, issue, list(deps)) for slug, (issue, deps) in self.model.queue.items()]
        if rows:
            self.sql("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)", rows)

    def queue_rows(self) -> list[tuple]:
        return [(slug, issue, tuple(deps)) for slug, issue, deps in
                self.sql("SELECT slug, issue, deps FROM storm_queue.lane ORDER BY pos")]

    def append_ledger(self, where: str, slug: str) -> None:
        self.sql("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, 'then')", [(slug, where)])

    def write_result(self, slug: str) -> None:
        self.sql("INSERT INTO storm_queue.result (slug, body) VALUES (%s, '{\"status\": \"ok\"}') "
                 "ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body", [(slug,)])


@pytest.mark.postgresql
def test_the_lane_machine_on_a_database_storm(pg_server) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    SERVER[:] = [pg_server]
    try:
        run_state_machine_as_test(DatabaseLaneMachine, settings=settings(
            max_examples=12, stateful_step_count=20, deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    finally:
        SERVER.clear()

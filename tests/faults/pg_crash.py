"""The crash harness on a database storm (issue 21 item 7): clients killed
with SIGKILL mid-request, their server backends ended with
``pg_terminate_backend``, and the server itself restarted with ``pg_ctl
restart -m immediate``, trial after trial, each trial on a fresh storm;
after each, the promises checked.

A trial drops the storm the last one left (the schema; a failed trial's
database is kept, and the next makes a new one), ``init``s a storm,
declares ``[runner]`` (``ttl_min = 1``, ``ttl = 2``, 1 or 2 slots, 1 to 3
attempts, unattended), adds six lanes and grants a runner role. Then three
to five client processes (forked from this one, which has imported the
tool, so a client starts in a millisecond; a forked client is a real
process the kernel kills like any other), each starting within 0.7 s:

- a *writer* runs 1 to 3 requests through the real command line
  (``storm_queue.cli.entry.main``): ``bump``, ``unbump``, ``push``, ``add``
  or ``settle`` of a random lane, as the operator;
- a *runner* perhaps runs ``recover``, then ``claim --ttl 1|2``, perhaps
  first a ``finish`` with a token not its own, perhaps ``renew``, then
  ``finish ok|failed``, through the command line, as the operator or the
  runner role;
- a *long-lived runner* does the same two or three times with one
  ``Storm`` (the library, one connection for all its requests), idling 30
  to 250 ms between requests, so that a backend ended or a server
  restarted while it waits meets its idle connection; some outlive their
  lease (ttl 1, then 1.1 s of work) and meet another runner's claim.

Every request carries a ``--key`` of its own; a client asks again under the
same key (at most four times) when the answer is exit 4 or 5, or exit 2
without a refusal (the server could not be reached), unless the answer said
the request was committed. Meanwhile this process kills some clients
(SIGKILL up to 0.5 s after they start, a long-lived runner up to 2 s), ends
zero to three random ``storm-queue`` backends of the storm's database, and
in a quarter of the trials restarts the server (immediate: no shutdown
checkpoint, crash recovery on start).

A request whose client printed its answer and exit status is *answered*; one
answered exit 0 is *acknowledged*. After every trial (and one keyed request
that re-derives the lane after any ``add`` or ``settle``: a ``push`` of a
new lane, which is always admitted; a refused request changes nothing, so a
lane left stale by a ``settle`` stays so until an admitted one):

1. ``storm-queue verify --json`` exits 0, sound; the event table's lines
   are ``seq`` 1..N, each ``prev`` the SHA-256 of the line before;
2. every acknowledged request's key is on the log exactly once, as it was
   told (a claim's slug and token, a renew's and finish's token, a
   refusal's code); a request told it was committed is there too; one told
   it was not (and no earlier attempt of it may have been) is not; no key
   is on the log twice;
3. the lane the state row and the lines after it fold to equals its
   derivation, and what the events replay to independently;
4. the runs replay soundly (``crash_harness.replay_runs``): per lane, claim
   tokens strictly increase; never a claim of a leased or quarantined lane;
   never more live leases than slots; every renew and finish on the log
   names the live lease, every expire an expired one; the fold agrees;
5. no client printed a traceback, a crash, or anything on stderr but
   storm-queue's own one-line messages (the driver's log lines count as
   noise).

``bench/crash.py --store postgresql`` runs many trials and prints the
figures, the answers counted by exit code among them.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import storm_queue.cli.answer  # noqa: F401 -- with everything a client loads, before forking, so that a client starts at once
import storm_queue.cli.app  # noqa: F401
import storm_queue.cli.entry  # noqa: F401
from storm_queue.ops.grants import grant
import storm_queue.service.leases  # noqa: F401
import storm_queue.service.passage  # noqa: F401
import storm_queue.service.requests  # noqa: F401
import storm_queue.store.postgres.faults  # noqa: F401
import storm_queue.store.postgres.store  # noqa: F401
from storm_queue.core import config
from storm_queue.core.lane import derive
from storm_queue.core.resolver import resolve
from storm_queue.service.storm import Storm
from storm_queue.store.postgres import driver
from storm_queue.store.postgres.connect import create
from tests.faults import pg_clients
from tests.faults.crash_harness import replay_runs, replayed, verify_cli

LANES = (("a", "1", ""), ("b", "2", "a"), ("c", "3", ""), ("d", "4", "c"), ("e", "5", ""), ("f", "6", "b,d"))
SLUGS = tuple(slug for slug, _, _ in LANES)
RESTART_SHARE = 0.25  # the share of trials whose server is restarted (immediate) under load
KINDS = (("writer", 0.45), ("runner", 0.35), ("long", 0.2))


@dataclass
class Figures:
    """What a run of trials found; ``failures`` says what went wrong, trial
    by trial, and must stay empty; ``exits`` counts every answer by its exit
    code and kind (``cli``/``lib``, and what it said)."""

    trials: int = 0
    clients: int = 0
    kills: int = 0
    terminated: int = 0
    restarts: int = 0
    requests: int = 0
    attempts: int = 0
    retried: int = 0
    acknowledged: int = 0
    acknowledged_on_log: int = 0
    acknowledged_unrecorded: int = 0
    told_committed: int = 0
    lost: int = 0
    doubled: int = 0
    claims_acknowledged: int = 0
    #: finishes --then-claim acknowledged whose claim leased (its line under KEY/then-claim, as told)
    pairs_acknowledged: int = 0
    finishes_acknowledged: int = 0
    stale_refused: int = 0
    expired: int = 0
    quarantines: int = 0
    chains_verified: int = 0
    lanes_derived: int = 0
    tracebacks: int = 0
    noise: int = 0
    exits: Counter = field(default_factory=Counter)
    samples: dict[str, str] = field(default_factory=dict)  # a first example of each kind of stderr noise
    failures: list[str] = field(default_factory=list)

    COUNTS = ("trials", "clients", "kills", "terminated", "restarts", "requests", "attempts", "retried",
              "acknowledged", "acknowledged_on_log", "acknowledged_unrecorded", "told_committed", "lost", "doubled",
              "claims_acknowledged", "pairs_acknowledged", "finishes_acknowledged", "stale_refused", "expired", "quarantines", "chains_verified",
              "lanes_derived", "tracebacks", "noise")

    def add(self, other: Figures) -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.exits.update(other.exits)
        for kind, text in other.samples.items():
            self.samples.setdefault(kind, text)
        self.failures.extend(other.failures)

    def to_json(self) -> dict:
        """The figures as one JSON document: the counts, the answers by exit code, the noise and the failures."""
        return {**{name: getattr(self, name) for name in self.COUNTS}, "exits": dict(self.exits),
                "samples": self.samples, "failures": self.failures}

    def report(self) -> str:
        rows = [f"trials {self.trials}", f"clients {self.clients} (killed with SIGKILL {self.kills})",
                f"backends ended (pg_terminate_backend) {self.terminated}",
                f"server restarts (pg_ctl restart -m immediate) {self.restarts}",
                f"requests {self.requests} (attempts {self.attempts}; asked again under their key {self.retried})",
                f"acknowledged requests (exit 0) {self.acknowledged}",
                f"acknowledged requests on the log exactly once {self.acknowledged_on_log}",
                f"acknowledged requests with no line of their own (a claim that waited) {self.acknowledged_unrecorded}",
                f"answers saying committed though the connection was lost {self.told_committed}",
                f"acknowledged claims {self.claims_acknowledged} ({self.pairs_acknowledged} by a finish --then-claim), "
                f"finishes {self.finishes_acknowledged}",
                f"stale tokens refused (stale_fence) {self.stale_refused}",
                f"leases expired by a later claim {self.expired}, quarantines {self.quarantines}",
                f"chains verified {self.chains_verified}", f"lanes equal to their derivation {self.lanes_derived}",
                f"acknowledged requests lost {self.lost}", f"keys on the log twice {self.doubled}",
                f"stderr with a traceback or crash {self.tracebacks}",
                f"stderr with other noise (the driver's) {self.noise}",
                "answers by exit code:"]
        rows += [f"  exit {label} {n}" for label, n in sorted(self.exits.items())]
        rows += [f"  noise ({kind}): {text!r}" for kind, text in sorted(self.samples.items())]
        rows.append(f"failed trials {len(self.failures)}")
        return "\n".join(rows)


class Cluster:
    """The server under test and this harness's roles on it: a throwaway
    server of its own (``tests.pgserver.PgServer``, fsync off: an immediate
    restart keeps what the operating system's cache holds, and a power cut
    is not what is tested), or the server a superuser ``url`` names (then
    it is never restarted)."""

    def __init__(self, url: str | None = None):
        from tests.pgserver import PgServer

        self.server = PgServer(url=url, settings=None if url else {"fsync": "off"}).start()
        self.own = url is None
        tag = secrets.token_hex(3)
        self.operator, self.runner = f"crash_op_{tag}", f"crash_runner_{tag}"
        self.server.create_role(self.operator)
        self.server.create_role(self.runner)
        self._admin = None
        self.db: str | None = None  # the database the trials use, until one fails

    def admin(self, dbname: str):
        """An autocommit superuser connection to DBNAME, made anew after a restart broke the last."""
        if self._admin is not None and (self._admin.closed or self._admin.info.dbname != dbname):
            self._admin.close()
            self._admin = None
        if self._admin is None:
            self._admin = self.server.admin(dbname)
        return self._admin

    def query(self, dbname: str, sql, args: tuple = ()) -> list[tuple]:
        """Rows of SQL on DBNAME as the superuser, asked again once on a broken connection."""
        for again in (True, False):
            try:
                cur = self.admin(dbname).execute(sql, args)
                return cur.fetchall() if cur.description else []
            except driver.OperationalError:
                if self._admin is not None:
                    self._admin.close()
                    self._admin = None
                if not again:
                    raise
        return []

    def restart(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self.server.restart("immediate")

    def close(self) -> None:
        """Stop a server of our own; on another, drop the roles when no
        failed trial's database (kept for a look) still needs them."""
        if self._admin is not None:
            self._admin.close()
        if self.own:
            self.server.stop()
            return
        if self.db is not None:
            self.server.drop_database(self.db)
        try:
            self.server.drop_role(self.runner)
            self.server.drop_role(self.operator)
        except driver.errors.DependentObjectsStillExist:
            pass


def events(cluster: Cluster, dbname: str) -> list[bytes]:
    return [bytes(row[0]) for row in cluster.query(dbname, "SELECT line FROM storm_queue.event ORDER BY seq")]


def _make_storm(cluster: Cluster, number: int, rng: random.Random, base: Path) -> tuple[str, dict, config.Policy]:
    """A fresh storm for a trial: in the run's database, whose storm (the
    schema) the last trial left is dropped first, or in a new database when
    the last trial failed (its database is kept); ``init``, six lanes, the
    runner role granted, ``[runner]`` declared. Returns the database's
    name, its URLs by role and the policy."""
    if cluster.db is None:
        cluster.db = f"crash_{number}_{secrets.token_hex(2)}"
        cluster.server.create_database(cluster.db, owner=cluster.operator)
    else:
        cluster.query(cluster.db, "DROP SCHEMA IF EXISTS storm_queue CASCADE")
    dbname = cluster.db
    urls = {"operator": cluster.server.url(dbname, cluster.operator), "runner": cluster.server.url(dbname, cluster.runner)}
    policy = config.Policy(slots=rng.choice((1, 1, 2)), attempts=rng.choice((1, 2, 2, 3)), ttl=2, ttl_min=1)
    toml = base / "storm.toml"
    toml.write_text(f"[runner]\nslots = {policy.slots}\nattempts = {policy.attempts}\nttl = 2\nttl_min = 1\n"
                    "unattended = true\n")
    create(urls["operator"])
    storm = Storm.find(urls["operator"], env=pg_clients.ENV)
    try:
        for out in [storm.declare(str(toml)), *(storm.add(s, i, deps=d or None) for s, i, d in LANES),
                    grant(storm, "runner", cluster.runner)]:
            if out.exit_code != 0:
                raise AssertionError(f"making the storm: {out.to_json()}")
    finally:
        storm.close()
    return dbname, urls, policy


def trial(cluster: Cluster, number: int, rng: random.Random, base: Path) -> Figures:
    """One trial on a fresh storm; the figures it adds. A trial that broke
    a promise keeps its database for a look."""
    fig = Figures(trials=1)
    dbname = None
    try:
        dbname, urls, policy = _make_storm(cluster, number, rng, base)
        clients = pg_clients.plan(rng, number, urls)
        chaos = pg_clients.chaos(rng, clients, cluster.own and rng.random() < RESTART_SHARE)
        pg_clients.run(clients, chaos, cluster, dbname, fig)
        _quiesce(cluster, dbname, fig)
        for client in clients:
            _stderr(client, fig)
            fig.exits.update(_label(client, a) for r in client.requests for a in r.attempts)
        _check(cluster, dbname, urls["operator"], number, clients, policy, fig)
    except Exception as exc:  # noqa: BLE001 -- a broken promise is a figure, its log kept for a look
        kept = _keep(cluster, dbname, base / f"failed-t{number}.log")
        fig.failures.append(f"trial {number} (database {dbname}{kept}): {type(exc).__name__}: {exc}")
        cluster.db = None  # the next trial makes a database of its own; this one is kept
    return fig


#: how long a killed client's backend may go on with its request (the CLI waits 30 s for the storm's lock)
ORPHAN_GRACE = 35.0


def _quiesce(cluster: Cluster, dbname: str, fig: Figures) -> None:
    """Wait until no backend of a trial's clients is left on DBNAME. A
    client killed while its request waited for the storm's lock leaves its
    backend waiting (PostgreSQL notices a gone client only when it next
    talks to it), and that backend may still record the request after the
    client is gone: an unacknowledged request, recorded or not, as the
    promises allow. The checks read the storm once it is quiet; a backend
    still there after ORPHAN_GRACE seconds is ended (counted as
    ``terminated``)."""
    others = ("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
              "AND backend_type = 'client backend'")
    deadline = time.monotonic() + ORPHAN_GRACE
    while cluster.query(dbname, others, (dbname,)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for (pid,) in cluster.query(dbname, others, (dbname,)):
        cluster.query(dbname, "SELECT pg_terminate_backend(%s, 5000)", (pid,))
        fig.terminated += 1


def _keep(cluster: Cluster, dbname: str | None, path: Path) -> str:
    """The failed trial's log, written to PATH (a server of our own goes
    at the end of the run); where it is, as words for the failure."""
    try:
        path.write_bytes(b"".join(events(cluster, dbname)))
    except Exception as exc:  # noqa: BLE001 -- the failure is reported either way
        return f", its log not kept: {type(exc).__name__}: {exc}"
    return f", its log in {path}"


def _check(cluster: Cluster, dbname: str, url: str, number: int, clients: list, policy: config.Policy,
           fig: Figures) -> None:
    """The promises, after a trial (the module's points 1 to 5)."""
    storm = Storm.find(url, env=pg_clients.ENV)
    try:
        # an admitted lane request re-derives the lane after any add or settle (a refused one changes nothing)
        after = storm.push(f"z{number}", "999", key=f"t{number}-after")
        if after.exit_code != 0 or not after.recorded:
            raise AssertionError(f"the bump after the trial answered {after.to_json()}")
        code, answer = verify_cli(url)
        if code != 0 or json.loads(answer).get("sound") is not True:
            raise AssertionError(f"verify exited {code}: {answer}")
        lines = events(cluster, dbname)
        evs = _chain(lines)
        fig.chains_verified += 1
        decl = storm.store.declaration()
        log = storm.store.read(decl)
        snap = storm.store.snapshot(log)
    finally:
        storm.close()
    keyed = _keys(evs, fig)
    for client in clients:
        for req in client.requests:
            _on_log(req, evs, keyed.get(req.key), fig)
    if log.state.lane != derive(snap, log.state.named) or resolve(snap).stale:
        raise AssertionError(f"the lane {log.state.lane} is not its derivation {derive(snap, log.state.named)}")
    lane, named = replayed(evs)
    if (list(log.state.lane), sorted(log.state.named)) != (lane, sorted(named)):
        raise AssertionError(f"the fold's lane {log.state.lane} is not the events' {lane}")
    fig.lanes_derived += 1
    _, quarantines, _, _ = replay_runs(evs, policy, log.state)
    fig.quarantines += quarantines
    fig.expired += sum(1 for e in evs if e["action"] == "expire")


def _label(client, a) -> str:
    """An answer by its exit code: what it said, and whether the command
    line or a long-lived library storm gave it."""
    via = "lib" if client.kind == "long" else "cli"
    if a.code is None:
        return f"- killed before it answered ({via})"
    doc = a.doc
    if doc.get("outcome") == "refused":
        what = f"refused {doc.get('code')}"
    elif doc.get("outcome") in ("done", "noop"):
        what = doc["outcome"]
    elif "cannot connect" in doc.get("message", ""):
        what = "cannot connect"
    elif "connection to" in doc.get("message", "") and "lost" in doc.get("message", ""):
        what = f"connection lost, recorded {doc.get('recorded', '(not said)')}"
    elif "held the storm" in doc.get("message", ""):
        what = "busy (the storm's lock)"
    else:
        what = f"{doc.get('outcome')}, recorded {doc.get('recorded', '(not said)')}"
    return f"{a.code} {what} ({via})"


def _chain(lines: list[bytes]) -> list[dict]:
    """The events, checked by hand: ``v`` 1, ``seq`` 1..N, each ``prev`` the
    SHA-256 of the line before, every line whole."""
    prev, evs = None, []
    for number, line in enumerate(lines, start=1):
        event = json.loads(line)
        if not line.endswith(b"\n") or (event["v"], event["seq"], event["prev"]) != (1, number, prev):
            raise AssertionError(f"line {number} breaks seq or chain: {line!r}")
        prev = hashlib.sha256(line).hexdigest()
        evs.append(event)
    return evs


def _keys(evs: list[dict], fig: Figures) -> dict[str, int]:
    """Where each key is on the log; a key there twice fails the trial."""
    seen: dict[str, int] = {}
    for i, event in enumerate(evs):
        key = event.get("key")
        if key is None:
            continue
        if key in seen:
            fig.doubled += 1
            raise AssertionError(f"key {key} is on the log twice: lines {seen[key] + 1} and {i + 1}")
        seen[key] = i
    return seen


def _on_log(req, evs: list[dict], i: int | None, fig: Figures) -> None:
    """A request is on the log as it was told: acknowledged (exit 0) or
    told committed, exactly once; told not committed by every attempt, not
    at all."""
    fig.requests += 1
    fig.attempts += len(req.attempts)
    fig.retried += len(req.attempts) > 1
    answered = [a for a in req.attempts if a.code is not None]
    ok = next((a for a in answered if a.code == 0), None)
    committed = any(a.doc.get("recorded") is True for a in answered if a.code != 0)
    refused = next((a for a in answered if a.doc.get("outcome") == "refused" and a.doc.get("recorded")), None)
    fig.told_committed += sum(1 for a in answered if a.code == 4 and a.doc.get("recorded") is True)
    if ok is None and refused is None and not committed:
        if i is not None and all(a.code is not None and a.doc.get("recorded") is False or _unreached(a)
                                 for a in req.attempts):
            raise AssertionError(f"request {req.key} was told it was not recorded, yet it is on the log: {evs[i]}")
        return
    if ok is not None:
        fig.acknowledged += 1
        if ok.doc.get("recorded") is False or (req.verb == "claim" and not ok.doc.get("token")):
            # a claim that waited (any expiry it recorded is not its own line), a recover with nothing to take back
            if i is not None and not any(a.code is None or a.doc.get("recorded") is not False or a.doc.get("token")
                                         for a in req.attempts):
                raise AssertionError(f"request {req.key} recorded nothing, yet it is on the log: {evs[i]}")
            fig.acknowledged_unrecorded += 1
            return
    if i is None:
        fig.lost += ok is not None
        raise AssertionError(f"request {req.key} {req.verb} {req.args} was told {(ok or refused or answered[-1]).doc}, "
                             "but it is not on the log")
    _as_told(req, (ok or refused or answered[-1]).doc, evs, i, fig)
    fig.acknowledged_on_log += ok is not None
    pair = (ok.claim or {}) if ok is not None else {}
    if pair.get("token"):  # finish --then-claim: its claim, told, is on the log under KEY/then-claim
        line = next((e for e in evs if e.get("key") == req.key + "/then-claim"), None)
        if line is None or (line["action"], line["slug"], line["token"]) != ("claim", pair["slug"], pair["token"]):
            fig.lost += line is None
            raise AssertionError(f"request {req.key}'s claim was told {pair}, but the log has {line}")
        fig.claims_acknowledged += 1
        fig.pairs_acknowledged += 1


def _unreached(a) -> bool:
    """An attempt that never reached the storm: it could not connect."""
    return a.code == 2 and a.doc.get("outcome") == "error" and "cannot connect" in a.doc.get("message", "")


def _as_told(req, told: dict, evs: list[dict], i: int, fig: Figures) -> None:
    """The line keyed by ``req`` is what it was told: its refusal, or its
    action with its slug and token. An answer that said only "committed"
    (the connection lost at the commit) told neither: the line is the
    request's own action, or a refusal of it."""
    event, verb = evs[i], req.verb
    if told.get("outcome") == "refused" or (told.get("outcome") == "error" and event["action"] == "refused"):
        ok = (event["action"], event["requested"]) == ("refused", verb) and told.get("code", event["code"]) == event["code"]
        fig.stale_refused += ok and event["code"] == "stale_fence"
    elif verb == "claim" and told.get("outcome") == "error":
        ok = event["action"] == "claim"
    elif verb == "claim":
        ok = (event["action"], event["slug"], event["token"]) == ("claim", told["slug"], told["token"])
        fig.claims_acknowledged += ok
    elif verb in ("renew", "finish"):
        if event["action"] == "quarantine":  # a failure that spent the last attempt: the key on its last line
            event = evs[i - 1]
        ok = (event["action"], event["slug"], event["token"]) == (verb, req.args[0], req.opts["token"])
        fig.finishes_acknowledged += ok and verb == "finish" and told.get("outcome") == "done"
    elif verb == "recover":
        ok = event["action"] in ("expire", "quarantine")
    else:
        ok = event["action"] == verb and event.get("slug") == req.args[0]
    if not ok:
        raise AssertionError(f"request {req.key} {verb} {req.args} {req.opts} is on the log as {event}, "
                             f"but was told {told}")


def _stderr(client, fig: Figures) -> None:
    """Count what a client wrote on stderr that is not storm-queue's own
    one-line message: a traceback or crash fails the trial, and so does
    the driver's noise."""
    texts = [(f"{r.verb} {r.key}", a.err) for r in client.requests for a in r.attempts] + [("", client.stderr)]
    for what, text in texts:
        odd = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("storm-queue: ")
               or "crashed" in ln]
        if not odd:
            continue
        kind = "traceback" if any("Traceback" in ln or "crashed" in ln for ln in odd) else "noise"
        fig.tracebacks += kind == "traceback"
        fig.noise += kind == "noise"
        fig.samples.setdefault(kind, "\n".join(odd)[:400])
        fig.failures.append(f"client {client.name} ({client.kind}) {what} wrote on stderr: {' | '.join(odd)[-3000:]}")


def run(trials: int, seed: int, url: str | None = None, progress=None, every: int = 50) -> Figures:
    """Run ``trials`` trials on a throwaway server (or the one the superuser
    ``url`` names); ``progress(figures)`` every ``every`` trials."""
    rng = random.Random(seed)
    total = Figures()
    cluster = Cluster(url)
    base = Path(tempfile.mkdtemp(prefix="sq-pgcrash-"))
    try:
        for number in range(trials):
            total.add(trial(cluster, number, rng, base))
            if progress and (number + 1) % every == 0:
                progress(total)
    finally:
        cluster.close()
        (base / "storm.toml").unlink(missing_ok=True)
        if not any(base.iterdir()):
            base.rmdir()
    return total



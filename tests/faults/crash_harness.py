"""The crash harness: writer processes killed with SIGKILL at random moments,
trial after trial, and after each trial the promises checked.

A trial makes a fresh small storm (sometimes with a log just short of a
checkpoint refresh, so that the trial's writers write the checkpoint and are
killed doing it), starts a few writer processes and kills some of them with
SIGKILL: either from outside after a random delay, or from inside at a
chosen step of its write path (before its n-th write, fsync, rename or
truncate, or halfway through a write to the log). Each writer runs the real
command line, ``storm_queue.cli.app.main``, with a ``--reason`` token unique to
each request it makes:

- a lane writer makes one request: ``bump``, ``unbump`` or ``push`` of a
  random lane;
- in a runner trial (half of them: a storm whose ``storm.toml`` says
  ``[runner] ttl_min = 1``, ``ttl = 2``, 1 or 2 ``slots`` and 1 to 3
  ``attempts``, mostly with ``UNATTENDED``), most writers are runners:
  ``claim --ttl 1|2`` and, with the token the claim printed, perhaps
  ``renew``, then ``finish --result ok|failed``; or a claim whose runner is
  then killed mid-lane (it never finishes); or a claim, a ``finish`` or
  ``renew`` with a token that is not its own (refused ``stale_fence``), then
  the right finish; or ``recover`` (of every orphan, or of one lane), or
  ``unpark``, or the operator's ``halt`` or ``resume``, or a ``hold`` or
  ``unhold`` of one lane. Some claims print
  their decision as text, the rest as JSON.

A request whose process printed its answer and its exit status is
*acknowledged* (for a claim: a ``run SLUG ISSUE TOKEN`` decision). Then:

1. the log reads and ``storm-queue verify`` finds it sound: its only
   damage, if any, is a torn tail (or whole lines past the witness that a
   killed writer left);
2. the next request repairs a torn tail and records the repair, and after
   it the log verifies, chain, ``seq`` and witness; then ``storm-queue
   claim`` still works (exit 0) and ``storm-queue verify`` exits 0;
3. every acknowledged request is on the log exactly once, as it was told (a
   claim that took no lease, a ``recover`` with nothing to take back: not at
   all); no request is on it twice; an acknowledged claim's token is on the
   log in a ``claim`` line for its lane exactly once;
4. the replayed lane equals its derivation (the resolver sees nothing stale);
5. the runs, replayed line by line from the log (``check_runs``): per lane,
   claim tokens strictly increase (so never repeat); a lane is claimed only
   while it holds no lease and is not quarantined; at most ``[runner]
   slots`` leases are live at any line; every ``renew`` and ``finish`` on
   the log (acknowledged or not) names the lease that was live at its line,
   every ``expire`` the lease that had expired by it; a claim's ``attempt``
   and the fold's ``attempts`` equal the claims since the last ``unpark``; a
   lane is quarantined only after ``attempts`` claims; the fold's leases,
   tokens and quarantines equal this replay's; every running marker on disk
   carries a token the log has in a claim of its lane (the harness never
   hand-makes one, so a marker the log does not know would be a lease
   recorded nowhere else), no lane runs "by a marker with no lease", and a
   ``result.json`` that says ok carries a token the log has given; no lane
   is claimed while a halt is in force (a claim then answers ``halted``
   and records no claim), and the fold's halt is the log's; no lane is
   claimed while it is held, and the fold's holds are the log's.

When a runner trial leaves leases (a runner killed mid-lane, the claim of
step 2), its storm is, in most such trials, kept and revisited once they
have expired (other trials run meanwhile, so nobody sleeps): a claim then
records an ``expire`` for each, guarded by its token, and nothing else but
quarantines of lanes that had spent their budget and its own claim; and
claims (finishing the lanes they get in between, unparking an orphaned
lane that the expiry quarantined) re-claim an orphaned lane under a
greater token; the finish of the runner that lost it, with its old token,
is refused and writes no result. The runs replay soundly after that too
(point 5).

The writers are forked from a process that has already imported the tool, so
that a trial costs milliseconds rather than an interpreter start-up each; a
forked writer is a real process that the kernel kills like any other. The
kill points live here, in the forked child, never in the product code.
``bench/crash.py`` runs many trials and prints the figures.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import storm_queue.cli.app  # with everything a writer imports, before forking, so a writer starts at once
import storm_queue.store.directory.log.lock  # noqa: F401
import storm_queue.store.directory.log.writer  # noqa: F401
import storm_queue.cli.render  # noqa: F401
from storm_queue import wall
from storm_queue.core import clock, config
from storm_queue.store.directory import ledger, queuefile
from storm_queue.core.lane import Snapshot, derive
from storm_queue.service.storm import Storm
from storm_queue.store.directory.log import checkpoint, reader
from storm_queue.store.directory.log.audit import audit
from storm_queue.core.resolver import MARKER, ORPHAN, resolve

LOG = "priority.log"
WITNESS = ".priority.log.witness"
QUEUE = "a 1\nb 2 a\nc 3\nd 4 c\ne 5\nf 6 b,d\n"
SLUGS = ("a", "b", "c", "d", "e", "f")
KILLED = -signal.SIGKILL
RUNNER_TRIALS = 0.5  # the share of trials on a storm with a short-lease [runner]
RUNNER_SHARE = 0.7  # the share of a runner trial's writers that are runners
CLAIM_AFTER = 0.15  # the share of the other trials whose repairing request is followed by a claim
#: the share of runner trials left with leases whose storm is revisited once they expired: with a runner
#: killed mid-lane, and without
REAP_SHARE = (0.6, 0.15)


@dataclass
class Figures:
    """What a run of trials found. ``lost`` and the other failure counts must
    stay 0; ``failures`` says what went wrong, trial by trial."""

    trials: int = 0
    writers: int = 0
    kills: int = 0
    torn_repaired: int = 0
    rewitnessed: int = 0
    acknowledged: int = 0
    acknowledged_on_log: int = 0
    lost: int = 0
    duplicated: int = 0
    checkpointed: int = 0
    runner_trials: int = 0
    runners: int = 0
    claims_acknowledged: int = 0
    claims_on_log: int = 0
    finishes_acknowledged: int = 0
    finishes_on_log: int = 0
    renewals_acknowledged: int = 0
    stale_refused: int = 0
    killed_mid_lane: int = 0
    quarantines: int = 0
    unparked: int = 0
    orphans_expired: int = 0
    reclaimed: int = 0
    halts: int = 0
    halted_claims: int = 0
    holds: int = 0
    failures: list[str] = field(default_factory=list)

    COUNTS = ("trials", "writers", "kills", "torn_repaired", "rewitnessed", "acknowledged", "acknowledged_on_log",
              "lost", "duplicated", "checkpointed", "runner_trials", "runners", "claims_acknowledged",
              "claims_on_log", "finishes_acknowledged", "finishes_on_log", "renewals_acknowledged", "stale_refused",
              "killed_mid_lane", "quarantines", "unparked", "orphans_expired", "reclaimed", "halts", "halted_claims",
              "holds")

    def add(self, other: "Figures") -> None:
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)

    def report(self) -> str:
        return (f"trials {self.trials} (runner trials {self.runner_trials})\n"
                f"writers {self.writers} (runners {self.runners})\nkills {self.kills}\n"
                f"runners killed mid-lane (claim acknowledged, no finish) {self.killed_mid_lane}\n"
                f"torn tails repaired {self.torn_repaired}\n"
                f"lines past the witness re-witnessed {self.rewitnessed}\n"
                f"trials whose log got a checkpoint {self.checkpointed}\n"
                f"acknowledged requests {self.acknowledged}\n"
                f"acknowledged requests on the log exactly once {self.acknowledged_on_log}\n"
                f"acknowledged claims (run SLUG ISSUE TOKEN) {self.claims_acknowledged}\n"
                f"acknowledged claims whose token is on the log exactly once {self.claims_on_log}\n"
                f"acknowledged renewals {self.renewals_acknowledged}\n"
                f"acknowledged finishes {self.finishes_acknowledged}\n"
                f"acknowledged finishes on the log, of the live lease {self.finishes_on_log}\n"
                f"stale tokens refused (stale_fence) {self.stale_refused}\n"
                f"quarantines on the logs {self.quarantines}\n"
                f"lanes unparked {self.unparked}\n"
                f"orphaned leases expired by a later claim {self.orphans_expired}\n"
                f"orphaned lanes re-claimed under a greater token {self.reclaimed}\n"
                f"halts on the logs {self.halts}\n"
                f"claims answered halted (no lease) {self.halted_claims}\n"
                f"lanes held on the logs {self.holds}\n"
                f"acknowledged requests lost {self.lost}\n"
                f"requests on the log twice {self.duplicated}\n"
                f"failed trials {len(self.failures)}")


@dataclass
class Request:
    """One request a writer made: its ``--reason`` token, its arguments,
    whether it asked for a text answer; once answered, its exit status and
    what it printed (``code`` None: the writer was killed before it printed
    both, so the request is not acknowledged)."""

    token: str
    argv: list[str]
    text: bool = False
    code: int | None = None
    answer: str = ""
    told: dict | None = None  # the answer as data (a text claim's decision line made a dict)


@dataclass
class Writer:
    token: str
    argv: list[str]  # a lane writer's request; a runner's plan says what it asks
    kill_at: tuple[str, int] | None  # ("after", ms) from outside, ("step", n) or ("half", n) from inside
    plan: dict | None = None  # a runner's: kind, holder, ttl, renew, result, text, ...
    pid: int = 0
    out_fd: int = -1
    status: int | None = None
    stdout: bytes = b""
    requests: list[Request] = field(default_factory=list)


# -- the writer process ----------------------------------------------------------


def _arm(kind: str, step: int) -> None:
    """In the forked writer: with ``step``, SIGKILL itself before its
    ``step``-th durable call (write, fsync, rename, replace, ftruncate; with
    ``all``, link and unlink too, which ``adopt`` makes); with
    ``half``, after writing half of its ``step``-th write to the log (the
    line a power cut could tear; SIGKILL cannot stop a write to a local file
    halfway, and a torn ``queue.txt`` line is a hand edit's damage, which
    ``list`` reports)."""
    count = [0]
    names = ("write", "fsync", "rename", "replace", "ftruncate") + (("link", "unlink") if kind == "all" else ())
    real = {name: getattr(os, name) for name in names}

    def wrap(name):
        def call(*args, **kwargs):
            if kind in ("step", "all") or (name == "write" and _is_log(args[0])):
                count[0] += 1
            if count[0] == step:
                if kind == "half":
                    real["write"](args[0], bytes(args[1])[: len(args[1]) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
            return real[name](*args, **kwargs)
        return call

    for name in real:
        setattr(os, name, wrap(name))


def _is_log(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith("/" + LOG)
    except OSError:
        return False


def _child(root: Path, w: Writer, out_w: int, keep: set[int]) -> None:
    code = 97
    try:
        os.dup2(out_w, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        for fd in keep:
            try:
                os.close(fd)
            except OSError:
                pass
        out = io.FileIO(1, "w", closefd=False)  # not os.write: the kill points do not count the harness's own writes
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8")
        signal.alarm(60)
        os.environ.pop("STORM_QUEUE_LANE", None)
        os.environ.pop("STORM_QUEUE_ROOT", None)
        if w.kill_at and w.kill_at[0] in ("step", "half", "all"):
            _arm(*w.kill_at)
        _script(root, w, out)
        code = 0
    except BaseException:  # noqa: BLE001 -- the parent sees 98
        code = 98
    finally:
        os._exit(code)


def _script(root: Path, w: Writer, out: io.FileIO) -> None:
    """In the forked writer: make its requests, one after another, each
    framed on stdout as ``#req {...}``, then its answer, then ``#exit N``
    (printed at once after the command returned: the answer and its status
    are acknowledged together, or not at all)."""
    made = [0]

    def ask(argv: list[str], text: bool = False) -> tuple[int, dict]:
        token = w.token if made[0] == 0 else f"{w.token}.{made[0]}"
        made[0] += 1
        out.write(b"#req " + json.dumps({"token": token, "argv": argv, "text": text}).encode() + b"\n")
        extra = [] if argv[0] == "verify" else ["--reason", token]
        buf = sys.stdout = io.StringIO()
        try:
            storm_queue.cli.app.main([*argv, *extra, *([] if text else ["--json"]), "--root", str(root)],
                                 prog_name="storm-queue")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 96
        answer = buf.getvalue()
        out.write(f"{answer.rstrip(chr(10))}\n#exit {code}\n".encode())
        return code, _told(argv, text, answer)

    plan = w.plan
    if plan is None or plan["kind"] == "one":
        ask(w.argv, bool(plan and plan.get("text")))
        return
    code, told = ask(["claim", "--holder", plan["holder"], "--ttl", str(plan["ttl"])], plan["text"])
    if code != 0 or told.get("token") is None:
        return
    slug, token = told["slug"], told["token"]
    if plan["kind"] == "die":  # killed mid-lane: the lease is left to expire
        os.kill(os.getpid(), signal.SIGKILL)
    if plan["kind"] == "stale":
        wrong = token + 1 if token == 1 or plan["newer"] else token - 1
        if plan["renew"]:
            ask(["renew", slug, "--token", str(wrong), "--ttl", str(plan["rttl"])])
        else:
            ask(["finish", slug, "--token", str(wrong), "--result", plan["result"]])
    elif plan["renew"]:
        ask(["renew", slug, "--token", str(token), "--ttl", str(plan["rttl"])])
    ask(["finish", slug, "--token", str(token), "--result", plan["result"]])


def _told(argv: list[str], text: bool, answer: str) -> dict:
    """An answer as data: the JSON document, or a text claim's decision
    line made one (``slug`` and ``token`` only for ``run``)."""
    if not text:
        return json.loads(answer)
    line = answer.strip()
    if "\n" in line:
        raise AssertionError(f"a text claim printed more than its decision line: {answer!r}")
    words = line.split(" ")
    if words[0] == "run":
        if len(words) != 4 or not words[3].isdigit():
            raise AssertionError(f"a claim printed {line!r}, not run SLUG ISSUE TOKEN")
        return {"outcome": "done", "decision": line, "slug": words[1], "token": int(words[3])}
    return {"outcome": "done", "decision": line, "slug": None, "token": None}


def _frames(w: Writer) -> None:
    """The requests a writer made, from its framed stdout."""
    for line in w.stdout.decode("utf-8").split("\n"):
        if line.startswith("#req "):
            body = json.loads(line[5:])
            w.requests.append(Request(body["token"], body["argv"], body["text"]))
        elif line.startswith("#exit "):
            w.requests[-1].code = int(line[6:])
        elif line and w.requests:
            r = w.requests[-1]
            r.answer += line + "\n"
    for r in w.requests:
        if r.code is not None:
            if r.code in (0, 1, 2) and (r.answer or not r.text):
                r.told = _told(r.argv, r.text, r.answer)


def run_writers(root: Path, writers: list[Writer], rng: random.Random) -> None:
    """Start every writer at once, kill those with an outside kill time when
    it comes, and collect every exit status and stdout."""
    open_fds: set[int] = set()
    start = time.monotonic()
    for w in writers:
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            _child(root, w, out_w, open_fds)
        os.close(out_w)
        w.pid, w.out_fd = pid, out_r
        open_fds.add(out_r)
    chunks: dict[int, list[bytes]] = {w.out_fd: [] for w in writers}
    timers = sorted(((start + w.kill_at[1] / 1000.0, w) for w in writers if w.kill_at and w.kill_at[0] == "after"),
                    key=lambda tw: tw[0])
    while open_fds:
        waiting_on_timer = bool(timers)
        timeout = max(0.0, timers[0][0] - time.monotonic()) if timers else 90.0
        ready, _, _ = select.select(list(open_fds), [], [], timeout)
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.discard(fd)
                os.close(fd)
        while timers and timers[0][0] <= time.monotonic():
            _, w = timers.pop(0)
            try:
                os.kill(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not ready and not waiting_on_timer:
            for w in writers:
                os.kill(w.pid, signal.SIGKILL)
            raise RuntimeError("a writer hung for 90 seconds")
    from tests.children import reap

    for w in writers:
        w.status = os.waitstatus_to_exitcode(reap(w.pid, 90))
        w.stdout = b"".join(chunks[w.out_fd])
    for w in writers:
        if w.status not in (0, KILLED):
            raise AssertionError(f"writer {w.token} {w.argv} {w.plan} exited {w.status}: {w.stdout!r}")
        _frames(w)


def verify_cli(root: Path) -> tuple[int, str]:
    """``storm-queue verify --json``, run here (it only reads): its exit
    status and what it printed."""
    saved, sys.stdout = sys.stdout, io.StringIO()
    try:
        storm_queue.cli.app.main(["verify", "--json", "--root", str(root)], prog_name="storm-queue")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 96
    finally:
        answer, sys.stdout = sys.stdout.getvalue(), saved
    return code, answer


def ask_one(root: Path, token: str, argv: list[str], rng: random.Random, text: bool = False) -> Request:
    """One request in a writer of its own, left alone: its answer."""
    w = Writer(token, argv, None, {"kind": "one", "text": text})
    run_writers(root, [w], rng)
    if len(w.requests) != 1 or w.requests[0].code is None:
        raise AssertionError(f"the request {argv} was not answered: {w.stdout!r}")
    return w.requests[0]


# -- one trial --------------------------------------------------------------------


def _requests(rng: random.Random, n: int) -> list[list[str]]:
    """``n`` random requests on the storm's lanes (pushes of new and of queued lanes too)."""
    out = []
    for k in range(n):
        roll = rng.random()
        if roll < 0.45:
            out.append(["bump", rng.choice(SLUGS)])
        elif roll < 0.75:
            out.append(["unbump", rng.choice(SLUGS)])
        elif roll < 0.9:
            deps = rng.sample(SLUGS, rng.randint(0, 2))
            out.append(["push", f"p{k}", str(100 + k)] + (["--deps", ",".join(deps)] if deps else []))
        else:
            out.append(["push", rng.choice(SLUGS[:3]), str(SLUGS.index(rng.choice(SLUGS[:3])) + 1)])
    return out


def _writers(rng: random.Random, number: int, tag: str, n: int, runner: bool, kill: bool) -> list[Writer]:
    """``n`` writers: lane writers, and in a runner trial mostly runners."""
    out = []
    for k, argv in enumerate(_requests(rng, n)):
        token = f"t{number}-{tag}{k}"
        plan = None
        if runner and rng.random() < RUNNER_SHARE:
            plan = _runner_plan(rng, f"h{number}-{tag}{k}", kill)
            if plan["kind"] == "recover":
                argv, plan = ["recover"] + ([rng.choice(SLUGS)] if rng.random() < 0.3 else []), {"kind": "one"}
            elif plan["kind"] == "unpark":
                argv, plan = ["unpark", rng.choice(SLUGS)], {"kind": "one"}
            elif plan["kind"] == "halt":
                argv, plan = [rng.choice(("halt", "halt", "resume"))], {"kind": "one"}
            elif plan["kind"] == "hold":
                argv, plan = [rng.choice(("hold", "hold", "unhold")), rng.choice(SLUGS)], {"kind": "one"}
        out.append(Writer(token, argv, _kill_plan(rng, plan is not None) if kill else None, plan))
    return out


def _runner_plan(rng: random.Random, holder: str, kill: bool) -> dict:
    """What a runner asks: ``work`` (claim, perhaps renew, finish), ``die``
    (claim, then killed mid-lane), ``stale`` (claim, a renew or finish with a
    token not its own, then the right finish), ``recover``, ``unpark``,
    ``halt`` (the operator's halt or resume) or ``hold`` (a hold or unhold of a lane)."""
    roll = rng.random()
    kind = ("work" if roll < 0.5 else "die" if roll < (0.65 if kill else 0.55) else "stale" if roll < 0.78
            else "recover" if roll < 0.84 else "unpark" if roll < 0.92 else "halt" if roll < 0.96 else "hold")
    return {"kind": kind, "holder": holder, "ttl": rng.choice((1, 2)), "rttl": rng.choice((1, 2)),
            "renew": rng.random() < 0.35, "result": "ok" if rng.random() < 0.5 else "failed",
            "text": rng.random() < 0.3, "newer": rng.random() < 0.5}


def _kill_plan(rng: random.Random, runner: bool = False) -> tuple[str, int] | None:
    """None (left alone), or when and how the writer is killed (see ``Writer``).
    A runner makes up to three requests, so its kill points reach further."""
    roll = rng.random()
    if roll < 0.25:
        return None
    if roll < 0.6:
        return ("after", rng.randint(0, 120 if runner else 50))
    if roll < 0.9:
        return ("step", rng.randint(1, 36 if runner else 12))
    return ("half", rng.randint(1, 3 if runner else 2))


def _check_log(root: Path) -> list[dict]:
    """The log verifies by hand: whole lines, ``seq`` 1..N, the chain, and
    the witness on the last line. Returns the events."""
    raw = (root / LOG).read_bytes()
    lines = raw.splitlines(keepends=True)
    prev, events = None, []
    for number, line in enumerate(lines, start=1):
        if not line.endswith(b"\n"):
            raise AssertionError(f"line {number} is not whole")
        event = json.loads(line)
        if (event["v"], event["seq"], event["prev"]) != (1, number, prev):
            raise AssertionError(f"line {number} breaks seq or chain")
        prev = hashlib.sha256(line).hexdigest()
        events.append(event)
    witness = json.loads((root / WITNESS).read_bytes())
    if (witness["log"], witness["length"], witness["seq"], witness["digest"]) != (LOG, len(raw), len(lines), prev):
        raise AssertionError(f"the witness {witness} is not the log's last line")
    log = reader.read(str(root / LOG))
    if log.torn or log.warnings:
        raise AssertionError(f"the reader still warns: {log.warnings}")
    checked = audit(str(root / LOG))  # what storm-queue verify says
    if not checked.sound or checked.warnings or checked.lane != log.state.lane:
        raise AssertionError(f"verify finds {checked.problem} {checked.warnings}")
    return events


@dataclass
class Reap:
    """A runner trial's storm kept until the leases it was left with have
    expired: then a claim must take them back (see ``reap``)."""

    root: Path
    number: int
    due: float  # time.time() after which every lease has expired
    leases: dict[str, tuple[int, str]]  # slug -> (token, expires) as the log left them
    policy: config.Policy
    rng: random.Random


def trial(base: Path, number: int, rng: random.Random, reaps: list[Reap] | None = None) -> Figures:
    """One trial in a fresh storm under ``base``; the figures it adds. A
    runner trial that leaves leases adds a ``Reap`` to ``reaps`` (the storm
    is kept until then); without ``reaps`` it is reaped at once, after
    waiting for its leases to expire."""
    fig = Figures(trials=1)
    root = base / f"t{number}"
    root.mkdir()
    (root / "queue.txt").write_text(QUEUE)
    if rng.random() < 0.3:
        (root / "integrated.txt").write_text("c\n")
    policy = None
    if rng.random() < RUNNER_TRIALS:
        policy = config.Policy(slots=rng.choice((1, 1, 2)), attempts=rng.choice((1, 2, 2, 3)), ttl=2, ttl_min=1)
        (root / "storm.toml").write_text(f"[runner]\nslots = {policy.slots}\nattempts = {policy.attempts}\n"
                                         "ttl = 2\nttl_min = 1\n")
        if rng.random() < 0.8:
            (root / ledger.UNATTENDED).write_text("")
        fig.runner_trials = 1
    try:
        reap = _trial(root, number, rng, fig, policy)
    except Exception as exc:  # noqa: BLE001 -- a failed promise is a figure, with its trial kept for a look
        fig.failures.append(f"trial {number} ({root}): {type(exc).__name__}: {exc}")
        return fig
    if reap is None:
        shutil.rmtree(root)
    elif reaps is not None:
        reaps.append(reap)
    else:
        time.sleep(max(0.0, reap.due - time.time()))
        fig.add(reaped(reap))
    return fig


def _prefill(root: Path, number: int, rng: random.Random) -> list[Request]:
    """Sometimes, a log just short of a checkpoint refresh, so that the
    trial's writers write the checkpoint (and are killed doing it): requests
    made in this process, with their answers."""
    if rng.random() >= 0.2:
        return []
    storm = Storm(str(root), env={k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")})
    done = []
    for k in range(checkpoint.EVERY - rng.randint(1, 4)):
        verb, slug = rng.choice(["bump", "bump", "unbump"]), rng.choice(SLUGS)
        token = f"t{number}-p{k}"
        out = getattr(storm, verb)(slug, reason=token)
        done.append(Request(token, [verb, slug], code=out.exit_code, told=out.to_json()))
    return done


def _records(r: Request) -> bool:
    """Whether an acknowledged request said it recorded a line of its own
    (a claim that took no lease and a recover with nothing to take back
    record none; an expiry a claim found is recorded, but is not its own)."""
    if r.argv[0] == "claim":
        return r.told.get("token") is not None
    if r.argv[0] == "recover":
        return r.told["outcome"] != "noop"
    return r.argv[0] != "verify"


def _acknowledged(r: Request) -> Request:
    """Check what an acknowledged request printed; return it."""
    if r.code not in (0, 1, 2) or r.told is None:
        raise AssertionError(f"request {r.token} {r.argv} exited {r.code}: {r.answer!r}")
    doc = r.told
    if (r.code == 0) != (doc["outcome"] in ("done", "noop")):
        raise AssertionError(f"request {r.token} {r.argv} exited {r.code} with {doc}")
    if not r.text and _records(r) and doc["recorded"] is not True:
        raise AssertionError(f"request {r.token} {r.argv} was not recorded: {doc}")
    if r.argv[0] == "claim" and r.code != 0:
        raise AssertionError(f"claim {r.token} exited {r.code}: {doc}")
    return r


def _trial(root: Path, number: int, rng: random.Random, fig: Figures, policy: config.Policy | None) -> Reap | None:
    runner = policy is not None
    prefilled = _prefill(root, number, rng)
    settle = rng.randint(0, 1 if runner else 3)  # requests that finish before the trial: the storm may have no log yet
    warmup = _writers(rng, number, "s", settle, runner, kill=False)
    if warmup:
        run_writers(root, warmup, rng)
    writers = _writers(rng, number, "w", rng.randint(2, 3 if runner else 4), runner, kill=True)
    run_writers(root, writers, rng)
    fig.writers += len(writers)
    fig.runners += sum(1 for w in writers if w.plan is not None)

    answered, mid_lane = list(prefilled), 0
    for w in warmup + writers:
        if w.status == KILLED and w in writers:
            fig.kills += 1
            claims = [r for r in w.requests if r.argv[0] == "claim" and r.told and r.told.get("token")]
            if claims and not any(r.argv[0] == "finish" and r.code is not None for r in w.requests):
                mid_lane += 1
        answered += [_acknowledged(r) for r in w.requests if r.code is not None]

    # 1. the log reads and verifies, with nothing worse than an unacknowledged tail
    torn = b""
    if (root / LOG).exists() or (root / WITNESS).exists():
        checked = audit(str(root / LOG))
        if not checked.sound:
            raise AssertionError(f"verify finds {checked.problem}")
        log = reader.read(str(root / LOG))  # raises UnknownOrder on damage
        if log.torn:
            torn = (root / LOG).read_bytes()[log.length:]
        for warning in log.warnings:
            if "torn" not in warning and "after its witness" not in warning:
                raise AssertionError(f"unexpected warning: {warning}")
        past_witness = log.witness is not None and log.seq > log.witness.seq
    else:
        past_witness = False

    # 2. the next request repairs a torn tail and records the repair
    after = ask_one(root, f"t{number}-after", ["bump", rng.choice(SLUGS)], rng)
    if after.code not in (0, 2):
        raise AssertionError(f"the request after the trial exited {after.code}: {after.answer!r}")
    if not after.told["recorded"]:
        raise AssertionError(f"the request after the trial was not recorded: {after.told}")
    events = _check_log(root)
    if events[-1].get("reason") != after.token:
        raise AssertionError("the request after the trial is not the log's last line")
    if torn and (events[-2]["action"], events[-2]["torn"]) != ("repair", len(torn)):
        raise AssertionError(f"the torn tail of {len(torn)} bytes was not repaired and recorded: {events[-2]}")
    for repair in (e for e in events if e["action"] == "repair"):  # by the request after, or by a writer of the trial
        side = (root / repair["side"]).read_bytes()
        if len(side) != repair["torn"] or side.endswith(b"\n") or not side:
            raise AssertionError(f"the side file of {repair} does not hold the torn bytes")
        fig.torn_repaired += 1
    if past_witness:
        fig.rewitnessed += 1
    if (root / f".{LOG}.checkpoint").exists():
        fig.checkpointed += 1
    # ... and then a claim still works (in every runner trial, and in some others), and verify says the log is sound
    claim = None
    if runner or rng.random() < CLAIM_AFTER:
        claim = _acknowledged(ask_one(root, f"t{number}-claim", ["claim", "--holder", f"h{number}-after", "--ttl",
                                                                  "1" if runner else "600"], rng, text=rng.random() < 0.3))
    code, answer = verify_cli(root)
    if code != 0 or json.loads(answer).get("sound") is not True:
        raise AssertionError(f"verify exited {code}: {answer!r}")
    events = _check_log(root)

    # 3. every acknowledged request is on the log exactly once, as it was told
    seen: dict[str, int] = {}
    for i, event in enumerate(events):
        token = event.get("reason")
        if token is None:
            continue
        if token in seen:
            fig.duplicated += 1
            raise AssertionError(f"request {token} is on the log twice")
        seen[token] = i
    for r in answered + [after] + ([claim] if claim else []):
        _on_log(r, events, seen.get(r.token), fig)

    # 4. the replayed lane equals its derivation
    log = reader.read(str(root / LOG))
    queue = queuefile.read(str(root / "queue.txt"))
    if queue.skipped:
        raise AssertionError(f"queue.txt has skipped lines: {queue.skipped}")
    snap = Snapshot({ln.slug: ln for ln in queue.lanes}, ledger.read(str(root)), log.state)
    if log.state.lane != derive(snap, log.state.named) or resolve(snap).stale:
        raise AssertionError(f"the lane {log.state.lane} is not its derivation {derive(snap, log.state.named)}")

    # 5. the runs replay soundly, and the markers are only caches of the log
    leases, quarantines, unparked = check_runs(root, events, policy or config.Policy(), log.state)
    fig.quarantines += quarantines
    fig.unparked += unparked
    fig.killed_mid_lane += mid_lane
    reap_rng, roll = random.Random(rng.random()), rng.random()
    if not runner or not leases or roll >= REAP_SHARE[0 if mid_lane else 1]:
        return None
    due = max(clock.seconds(expires) for _, expires in leases.values()) + 0.05
    return Reap(root, number, due, leases, policy, reap_rng)


def _on_log(r: Request, events: list[dict], i: int | None, fig: Figures) -> None:
    """An acknowledged request is on the log (at ``i``) as it was told, or,
    when it recorded nothing of its own, not at all."""
    verb, told = r.argv[0], r.told
    if verb == "verify":
        return
    if verb == "claim" and told.get("decision") == "halted":
        if told.get("token") is not None or (not r.text and (told.get("halted") is not True or told.get("halt") is None)):
            raise AssertionError(f"claim {r.token} answered halted as {told}")
        fig.halted_claims += 1
    if not _records(r):
        if i is not None:
            raise AssertionError(f"request {r.token} {r.argv} recorded nothing, yet it is on the log: {events[i]}")
        return
    fig.acknowledged += 1
    if i is None:
        fig.lost += 1
        raise AssertionError(f"acknowledged request {r.token} {r.argv} is not on the log")
    event = events[i]
    if told["outcome"] == "refused":
        ok = (event["action"], event["requested"], event["code"]) == ("refused", verb, told["code"])
        fig.stale_refused += ok and told["code"] == "stale_fence"
    elif verb in ("bump", "unbump", "push"):
        ok = (event["action"], event["slug"], event["moved"], event["removed"]) == (
            verb, r.argv[1], told["moved"], told["removed"])
    elif verb == "claim":
        fig.claims_acknowledged += 1
        ok = ((event["action"], event["slug"], event["token"], event["holder"]) == ("claim", told["slug"], told["token"], r.argv[2])
              and told["decision"] == f"run {event['slug']} {event['issue']} {event['token']}"
              and (r.text or told["expires"] == event["expires"]))
        same = [e for e in events if e["action"] == "claim" and e["slug"] == told["slug"] and e["token"] == told["token"]]
        if ok and len(same) != 1:
            raise AssertionError(f"claim {r.token}'s token {told['token']} on {told['slug']} is on the log in {len(same)} claims")
        fig.claims_on_log += ok
    elif verb == "renew":
        fig.renewals_acknowledged += 1
        ok = (event["action"], event["slug"], event["token"], event["expires"]) == (
            "renew", r.argv[1], int(r.argv[3]), told["expires"])
    elif verb == "finish":
        fig.finishes_acknowledged += 1
        ok = True
        if event["action"] == "quarantine":  # a failure that spent the last attempt: one write, the reason on its last line
            ok = event["slug"] == r.argv[1] and r.argv[5] == "failed"
            event = events[i - 1]
        ok = ok and (event["action"], event["slug"], event["token"], event["result"]) == (
            "finish", r.argv[1], int(r.argv[3]), r.argv[5])
        fig.finishes_on_log += ok  # and check_runs saw that it named the live lease
    elif verb == "recover":
        ok = event["action"] in ("expire", "quarantine")
    elif verb == "unpark":
        ok = (event["action"], event["slug"]) == ("unpark", r.argv[1])
    elif verb in ("halt", "resume"):
        ok = event["action"] == verb and ("noop" in event) == (told["outcome"] == "noop")
        fig.halts += ok and verb == "halt" and told["outcome"] == "done"
    elif verb in ("hold", "unhold"):
        ok = (event["action"], event["slug"]) == (verb, r.argv[1]) and ("noop" in event) == (told["outcome"] == "noop")
        fig.holds += ok and verb == "hold" and told["outcome"] == "done"
    else:
        ok = False
    if not ok:
        raise AssertionError(f"request {r.token} {r.argv} is on the log as {event}, but was told {told}")
    fig.acknowledged_on_log += 1


def check_runs(root: Path, events: list[dict], policy: config.Policy, state) -> tuple[dict[str, tuple[int, str]], int, int]:
    """Replay the runs line by line and check the runner invariants (see the
    module's point 5), the markers and results on disk too; return the
    leases the log leaves (slug -> token, expiry), and how many quarantines
    and unparks it has."""
    leases, quarantines, unparks, tokens = replay_runs(events, policy, state)
    # the markers are caches of the log, never its only record
    led = ledger.read(str(root))
    for slug, token in led.running.items():
        if token is None or token not in tokens.get(slug, ()):
            raise AssertionError(f"the running marker of {slug} carries token {token}, which no claim on the log gave")
    for slug in led.finished:
        body = json.loads((root / ledger.LANES / slug / ledger.MARKS / ledger.RESULT).read_bytes())
        if body.get("status") == "ok" and body.get("token") not in tokens.get(slug, ()):
            raise AssertionError(f"the result.json of {slug} carries token {body.get('token')}, which no claim gave")
    queue = queuefile.read(str(root / "queue.txt"))
    view = resolve(Snapshot({ln.slug: ln for ln in queue.lanes}, led, state, wall.now()))
    for row in view.rows:
        if row.running == MARKER:
            raise AssertionError(f"{row.slug} runs by a marker with no lease: {row.status}")
    return leases, quarantines, unparks


def replayed(evs: list[dict]) -> tuple[list[str], list[str]]:
    """The priority lane and the named slugs, replayed from the events
    independently of storm_queue's fold: push/bump/unbump add ``moved``
    and drop ``removed``; a bump or push names its slug, an unbump
    un-names it."""
    lane: dict[str, None] = {}
    named: dict[str, None] = {}
    for e in evs:
        if e["action"] not in ("push", "bump", "unbump"):
            continue
        for slug in e.get("moved", ()):
            lane.setdefault(slug)
        for slug in e.get("removed", ()):
            lane.pop(slug, None)
        if e["action"] == "unbump":
            named.pop(e["slug"], None)
        elif not e.get("noop"):
            named.setdefault(e["slug"])
    return list(lane), list(named)


def replay_runs(events: list[dict], policy: config.Policy, state) -> tuple[dict[str, tuple[int, str]], int, int,
                                                                          dict[str, set[int]]]:
    """Replay the runs line by line, check the runner invariants of either
    store (the module's point 5, the files aside) and that the fold
    ``state`` agrees; return the leases the log leaves (slug -> token,
    expiry), how many quarantines and unparks it has, and each lane's
    claim tokens."""
    tokens: dict[str, set[int]] = {}
    top: dict[str, int] = {}
    leases: dict[str, list] = {}
    history: dict[str, list[tuple[int, str | None]]] = {}  # each claim's token and how it ended
    since: dict[str, int] = {}
    parked: set[str] = set()
    quarantines = unparks = 0
    halted = False
    held: set[str] = set()
    for e in events:
        action = e["action"]
        if action in ("halt", "resume") and not e.get("noop"):
            halted = action == "halt"
        if action in ("hold", "unhold") and not e.get("noop"):
            (held.add if action == "hold" else held.discard)(e["slug"])
        if action == "claim" and halted:
            raise AssertionError(f"line {e['seq']}: {e['slug']} was claimed while the storm was halted")
        if action == "claim" and e["slug"] in held:
            raise AssertionError(f"line {e['seq']}: {e['slug']} was claimed while it was held")
        if action not in ("claim", "renew", "finish", "expire", "recover", "quarantine", "unpark", "schedule"):
            continue
        slug, at, token = e["slug"], e["at"], e.get("token")
        where = f"line {e['seq']} ({action} {slug} token {token})"
        lease = leases.get(slug)
        if action == "claim":
            if lease is not None:
                raise AssertionError(f"{where}: the lane still held the lease of token {lease[0]}")
            if slug in parked:
                raise AssertionError(f"{where}: the lane is quarantined")
            if token <= top.get(slug, 0):
                raise AssertionError(f"{where}: the token is not greater than the lane's last, {top.get(slug, 0)}")
            since[slug] = since.get(slug, 0) + 1
            if e.get("attempt") != since[slug]:
                raise AssertionError(f"{where}: attempt {e.get('attempt')}, but {since[slug]} claims since the last unpark")
            leases[slug] = [token, e["expires"]]
            history.setdefault(slug, []).append((token, None))
            tokens.setdefault(slug, set()).add(token)
            top[slug] = token
            live = sorted(s for s, (_, expires) in leases.items() if expires > at)
            if len(live) > policy.slots:
                raise AssertionError(f"{where}: {len(live)} live leases ({' '.join(live)}), but {policy.slots} slots")
        elif action in ("renew", "finish"):
            if lease is None or lease[0] != token or lease[1] <= at:
                raise AssertionError(f"{where}: not the live lease ({lease})")
            if action == "renew":
                lease[1] = e["expires"]
            else:
                del leases[slug]
                history[slug][-1] = (token, e["result"])
        elif action == "expire":
            if lease is None or lease[0] != token or lease[1] > at or e.get("expired") != lease[1]:
                raise AssertionError(f"{where}: not a lease that had expired ({lease})")
            del leases[slug]
            history[slug][-1] = (token, "expired")
        elif action == "recover":
            raise AssertionError(f"{where}: a marker with no lease was recovered, but nothing here makes one")
        elif action == "quarantine":
            if since.get(slug, 0) < policy.attempts or lease is not None or slug in parked:
                raise AssertionError(f"{where}: after {since.get(slug, 0)} claims of a budget of {policy.attempts} "
                                     f"(lease {lease}, quarantined already: {slug in parked})")
            if e.get("attempts") != since[slug]:
                raise AssertionError(f"{where}: says {e.get('attempts')} attempts, but {since[slug]} claims since the last unpark")
            parked.add(slug)
            quarantines += 1
        elif action == "unpark":
            if slug not in parked:
                raise AssertionError(f"{where}: the lane was not quarantined")
            parked.discard(slug)
            since[slug] = 0
            unparks += 1
    # the fold agrees with this replay
    if (state.halt is not None) != halted:
        raise AssertionError(f"the fold's halt is {state.halt}, but the log says halted: {halted}")
    if {s for s, run in state.runs.items() if run.held is not None} != held:
        raise AssertionError(f"the fold holds {sorted(s for s, run in state.runs.items() if run.held)}, the log {sorted(held)}")
    for slug in set(state.runs) | set(since):
        run = state.run(slug)
        mine = (since.get(slug, 0), top.get(slug, 0), tuple(leases[slug]) if slug in leases else None, slug in parked)
        folded = (run.attempts, run.token, (run.lease.token, run.lease.expires) if run.lease else None,
                  run.quarantined is not None)
        mine += (history.get(slug, []),)
        folded += ([(a.token, a.end) for a in run.history],)
        if mine != folded:
            raise AssertionError(f"the fold has {slug} at (attempts, token, lease, quarantined, history) {folded}, "
                                 f"the log {mine}")
    return {slug: (token, expires) for slug, (token, expires) in leases.items()}, quarantines, unparks, tokens


def reaped(reap: Reap) -> Figures:
    """Revisit a runner trial's storm once its leases have expired."""
    fig = Figures()
    try:
        _reap(reap, fig)
    except Exception as exc:  # noqa: BLE001
        fig.failures.append(f"trial {reap.number} reaped ({reap.root}): {type(exc).__name__}: {exc}")
        return fig
    shutil.rmtree(reap.root)
    return fig


def _reap(reap: Reap, fig: Figures) -> None:
    """A claim takes back every orphaned lease (an ``expire`` guarded by its
    token each, a quarantine where that spent the lane's budget, nothing
    else but its own claim); then claims, finishing each lane they get that
    is not an orphaned one, until an orphaned lane is claimed again under a
    greater token (when every orphaned lane left is quarantined, the
    operator unparks one first; one that finished cannot run again); then
    the runner that lost that lane finishes it with its old token, and is
    refused (``stale_fence``, recorded) without writing ``result.json``."""
    root, rng, n = reap.root, reap.rng, reap.number
    if reader.read(str(root / LOG)).state.halt is not None:  # the operator ends the halt the trial left
        resumed = _acknowledged(ask_one(root, f"t{n}-resume", ["resume"], rng))
        if (resumed.code, resumed.told["outcome"]) != (0, "done"):
            raise AssertionError(f"resume of the halted storm answered {resumed.told}")
    for slug in sorted(s for s, run in reader.read(str(root / LOG)).state.runs.items() if run.held is not None):
        unheld = _acknowledged(ask_one(root, f"t{n}-unhold-{slug}", ["unhold", slug], rng))  # and every hold it left
        if (unheld.code, unheld.told["outcome"]) != (0, "done"):
            raise AssertionError(f"unhold of the held {slug} answered {unheld.told}")
    if rng.random() < 0.5:
        (root / ledger.UNATTENDED).write_text("")
    log, queue, led = reader.read(str(root / LOG)), queuefile.read(str(root / "queue.txt")), ledger.read(str(root))
    for row in resolve(Snapshot({ln.slug: ln for ln in queue.lanes}, led, log.state, wall.now())).rows:
        if row.slug in reap.leases and row.state != "finished" and row.running != ORPHAN:  # its finish died after result.json
            raise AssertionError(f"the lease of {row.slug} has expired, but the lane is {row.state} {row.running}: {row.status}")
    seq = start = len(_check_log(root))
    for round in range(12):
        claim = _acknowledged(ask_one(root, f"t{n}-reap{round}", ["claim", "--holder", f"reaper{n}", "--ttl", "60"],
                                      rng, text=rng.random() < 0.3))
        events = _check_log(root)
        new, seq = events[seq:], len(events)
        token = claim.told.get("token")
        own = [e for e in new if e.get("reason") == claim.token]
        if (own and (own[0] is not new[-1] or own[0]["action"] != "claim")) or bool(own) != (token is not None):
            raise AssertionError(f"the reaping claim {claim.told} is on the log as {own}")
        found = new[:-1] if own else new
        expired = {e["slug"]: (e["token"], e["expired"]) for e in found if e["action"] == "expire"}
        if round == 0:
            if expired != reap.leases or sum(1 for e in found if e["action"] == "expire") != len(reap.leases):
                raise AssertionError(f"the leases {reap.leases} expired as {[e for e in found if e['action'] == 'expire']}")
            if any(e["action"] not in ("expire", "quarantine") or e["slug"] not in reap.leases for e in found):
                raise AssertionError(f"a claim after the leases expired recorded {found}")
            fig.orphans_expired += len(expired)
        elif found:
            raise AssertionError(f"a claim with no orphan left recorded {found}")
        if token is not None:
            slug = claim.told["slug"]
            if slug in reap.leases:
                old = reap.leases[slug][0]
                if token <= old:
                    raise AssertionError(f"{slug} was re-claimed under token {token}, not above {old}")
                fig.reclaimed += 1
                # the runner that lost the lane comes back: its finish is refused, and writes no result
                late = _acknowledged(ask_one(root, f"t{n}-late", ["finish", slug, "--token", str(old), "--result", "ok"], rng))
                if (late.code, late.told["code"]) != (2, "stale_fence") or ledger.has_result(str(root), slug):
                    raise AssertionError(f"the finish of {slug} with the expired token {old} answered {late.told}")
                events = _check_log(root)
                if events[-1].get("reason") != late.token or events[-1]["code"] != "stale_fence":
                    raise AssertionError(f"the refused late finish is on the log as {events[-1]}")
                fig.stale_refused += 1
                break
            done = _acknowledged(ask_one(root, f"t{n}-reapf{round}", ["finish", slug, "--token", str(token), "--result", "ok"], rng))
            if done.code != 0:
                raise AssertionError(f"the finish of the reaping claim's lane {slug} was refused: {done.told}")
            seq = len(_check_log(root))
        elif claim.told["decision"].startswith("review "):
            (root / ledger.UNATTENDED).write_text("")
        else:
            log = reader.read(str(root / LOG))
            led = ledger.read(str(root))
            left = [s for s in reap.leases if not led.done(s)]
            if any(log.state.run(s).quarantined is None for s in left):
                raise AssertionError(f"the orphaned lanes {left} were not claimed again; the claim said {claim.told['decision']}")
            if not left:
                break
            # every one left is quarantined: the operator unparks one, and it is claimed again
            unpark = _acknowledged(ask_one(root, f"t{n}-unpark{round}", ["unpark", left[0]], rng))
            if unpark.code != 0:
                raise AssertionError(f"unpark {left[0]} was refused: {unpark.told}")
            fig.unparked += 1
            seq = len(_check_log(root))
    else:
        raise AssertionError("twelve claims and not one came back to an orphaned lane or ran out of lanes")
    check_runs(root, _check_log(root), reap.policy, reader.read(str(root / LOG)).state)
    fig.quarantines += sum(1 for e in _check_log(root)[start:] if e["action"] == "quarantine")


def run(trials: int, seed: int, base: Path | None = None, progress=None) -> Figures:
    """Run ``trials`` trials; ``progress(figures)`` is called now and then.
    The storms of runner trials wait to be reaped while later trials run."""
    rng = random.Random(seed)
    total = Figures()
    own = base is None
    base = Path(tempfile.mkdtemp(prefix="sq-crash-")) if own else base
    reaps: list[Reap] = []

    def reap_due(wait: bool) -> None:
        reaps.sort(key=lambda r: r.due)
        while reaps and (wait or reaps[0].due <= time.time()):
            time.sleep(max(0.0, reaps[0].due - time.time()))
            total.add(reaped(reaps.pop(0)))

    try:
        for number in range(trials):
            reap_due(False)
            total.add(trial(base, number, rng, reaps))
            if number >= trials - trials // 20:  # the last trials leave no storm to reap, so the run ends sooner
                for reap in [r for r in reaps if r.number == number]:
                    reaps.remove(reap)
                    shutil.rmtree(reap.root)
            if progress and (number + 1) % 500 == 0:
                progress(total)
        reap_due(True)
    finally:
        if own and not total.failures:
            shutil.rmtree(base, ignore_errors=True)
    return total


# -- adopt, killed before each of its durable steps (issue 12) ------------------


@dataclass
class AdoptFigures:
    """What ``adopt_trials`` found: the steps killed, how many left the storm
    not adopted (the old log untouched) and adopted, and the failures."""

    steps: int = 0
    not_adopted: int = 0
    adopted: int = 0
    failures: list[str] = field(default_factory=list)


def adopt_trials(base: Path, old_lines: list[bytes], queue: str, lane: list[str]) -> AdoptFigures:
    """One storm a step: the earlier tool's log ``old_lines`` over ``queue``,
    whose lane replays to ``lane``; an ``adopt`` writer killed before its
    n-th durable call (links and unlinks too), for n = 1, 2, ... until an
    adopt runs to its end. After each kill the storm must be either not
    adopted (the old log byte for byte, and ``list`` exit 3 naming adopt) or
    adopted (one ``adopt`` line keeping the old bytes, ``list`` showing
    ``lane`` at once); and a second ``adopt`` must then leave exactly one
    adoption, its kept file the old bytes, no leftovers, ``lane`` listed
    and the log verifying."""
    fig = AdoptFigures()
    old = b"".join(old_lines)
    rng = random.Random(0)
    for step in range(1, 100):
        root = base / f"adopt-{step}"
        root.mkdir(parents=True)
        (root / "queue.txt").write_text(queue)
        (root / LOG).write_bytes(old)
        (root / WITNESS).write_text(json.dumps({"log": LOG, "length": len(old), "at": "2026-11-02T00:00:00Z"}) + "\n")
        writer = Writer(f"adopt{step}", ["adopt"], ("all", step), {"kind": "one"})
        run_writers(root, [writer], rng)
        if writer.status == 0:
            return fig
        fig.steps += 1
        failed = _adopt_state(root, old, lane, fig)
        if failed:
            fig.failures.append(f"step {step}: {failed}")
    fig.failures.append("the adopt never ran to its end")
    return fig


def _adopt_state(root: Path, old: bytes, lane: list[str], fig: AdoptFigures) -> str:
    """Check the storm an adopt killed mid-way left, then adopt again and
    check that; '' when all is as promised, else what is not."""
    from tests.conftest import run_cli

    def prioritised() -> list[str] | None:
        listed = run_cli(root, "list", "--json")
        return [r["slug"] for r in json.loads(listed.stdout)["rows"] if r["prioritised"]] if listed.returncode == 0 else None

    if (root / LOG).read_bytes() == old:
        fig.not_adopted += 1
        listed = run_cli(root, "list")
        if listed.returncode != 3 or "storm-queue adopt --reason TEXT" not in listed.stderr:
            return f"not adopted, but list answered {listed.returncode}: {listed.stderr}"
    else:
        fig.adopted += 1
        events = [json.loads(line) for line in (root / LOG).read_bytes().splitlines()]
        if [e["action"] for e in events] != ["adopt"] or (root / events[0]["kept"]).read_bytes() != old:
            return f"neither the old log nor an adoption: {events}"
        if prioritised() != lane:
            return f"adopted, but list shows {prioritised()}"
    again = run_cli(root, "adopt", "--reason", "again", "--json")
    if again.returncode != 0:
        return f"the second adopt answered {again.returncode}: {again.stdout} {again.stderr}"
    events = [json.loads(line) for line in (root / LOG).read_bytes().splitlines()]
    took = [e for e in events if e["action"] == "adopt" and not e.get("noop")]
    if len(took) != 1 or events[0] != took[0] or (root / took[0]["kept"]).read_bytes() != old:
        return f"not exactly one adoption, as line 1, keeping the old bytes: {events}"
    kept = sorted(p.name for p in root.glob(LOG + ".adopted-*"))
    if kept != [took[0]["kept"]] or len(list(root.glob(WITNESS + ".adopted-*"))) != 1:
        return f"leftovers beside the log: {kept}"
    if (root / f".{LOG}.adopting").exists():
        return "the temporary new log was left"
    if prioritised() != lane:
        return f"after the second adopt, list shows {prioritised()}"
    verified = run_cli(root, "verify")
    if verified.returncode != 0:
        return f"the log does not verify: {verified.stdout}"
    return ""

"""The crash harness: writer processes killed with SIGKILL at random moments,
trial after trial, and after each trial the promises checked.

A trial makes a fresh small storm (sometimes with a log just short of a
checkpoint refresh, so that the trial's writers write the checkpoint and are
killed doing it), starts a few writer processes (each runs
the real command line, ``storm_queue.cli.main``, on ``bump``, ``unbump`` or
``push`` of a random lane, with a ``--reason`` token unique to the request)
and kills some of them with SIGKILL: either from outside after a random
delay of 0-50 ms, or from inside at a chosen step of its write path (before
its n-th write, fsync, rename or truncate, or halfway through a write to the
log). A request whose process exited with an answer that says it was
recorded is *acknowledged*. Then:

1. the log reads and ``storm-queue verify`` finds it sound: its only
   damage, if any, is a torn tail (or whole lines past the witness that a
   killed writer left);
2. the next request repairs a torn tail and records the repair, and after
   it the log verifies, chain, ``seq`` and witness;
3. every acknowledged request is on the log exactly once, as it was told;
   no request is on it twice;
4. the replayed lane equals its derivation (the resolver sees nothing stale).

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

import storm_queue.cli  # with everything a writer imports, before forking, so a writer starts at once
import storm_queue.log.lock  # noqa: F401
import storm_queue.log.writer  # noqa: F401
import storm_queue.render  # noqa: F401
from storm_queue import ledger, queuefile
from storm_queue.lane import Snapshot, derive
from storm_queue.desk import Storm
from storm_queue.log import checkpoint, reader
from storm_queue.log.audit import audit
from storm_queue.resolver import resolve

LOG = "priority.log"
WITNESS = ".priority.log.witness"
QUEUE = "a 1\nb 2 a\nc 3\nd 4 c\ne 5\nf 6 b,d\n"
SLUGS = ("a", "b", "c", "d", "e", "f")
KILLED = -signal.SIGKILL


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
    failures: list[str] = field(default_factory=list)

    def add(self, other: "Figures") -> None:
        for name in ("trials", "writers", "kills", "torn_repaired", "rewitnessed", "acknowledged",
                     "acknowledged_on_log", "lost", "duplicated", "checkpointed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)

    def report(self) -> str:
        return (f"trials {self.trials}\nwriters {self.writers}\nkills {self.kills}\n"
                f"torn tails repaired {self.torn_repaired}\n"
                f"lines past the witness re-witnessed {self.rewitnessed}\n"
                f"trials whose log got a checkpoint {self.checkpointed}\n"
                f"acknowledged requests {self.acknowledged}\n"
                f"acknowledged requests on the log exactly once {self.acknowledged_on_log}\n"
                f"acknowledged requests lost {self.lost}\n"
                f"requests on the log twice {self.duplicated}\n"
                f"failed trials {len(self.failures)}")


@dataclass
class Writer:
    token: str
    argv: list[str]
    kill_at: tuple[str, int] | None  # ("after", ms) from outside, ("step", n) or ("half", n) from inside
    pid: int = 0
    out_fd: int = -1
    status: int | None = None
    stdout: bytes = b""


# -- the writer process ----------------------------------------------------------


def _arm(kind: str, step: int) -> None:
    """In the forked writer: with ``step``, SIGKILL itself before its
    ``step``-th durable call (write, fsync, rename, replace, ftruncate); with
    ``half``, after writing half of its ``step``-th write to the log (the
    line a power cut could tear; SIGKILL cannot stop a write to a local file
    halfway, and a torn ``queue.txt`` line is a hand edit's damage, which
    ``list`` reports)."""
    count = [0]
    real = {name: getattr(os, name) for name in ("write", "fsync", "rename", "replace", "ftruncate")}

    def wrap(name):
        def call(*args, **kwargs):
            if kind == "step" or (name == "write" and _is_log(args[0])):
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
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8")
        signal.alarm(60)
        os.environ.pop("STORM_QUEUE_LANE", None)
        os.environ.pop("STORM_QUEUE_ROOT", None)
        if w.kill_at and w.kill_at[0] in ("step", "half"):
            _arm(*w.kill_at)
        try:
            storm_queue.cli.main([*w.argv, "--reason", w.token, "--json", "--root", str(root)],
                                 prog_name="storm-queue")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 96
    except BaseException:  # noqa: BLE001 -- the parent sees 98
        code = 98
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code)


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
    for w in writers:
        _, status = os.waitpid(w.pid, 0)
        w.status = os.waitstatus_to_exitcode(status)
        w.stdout = b"".join(chunks[w.out_fd])


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


def _kill_plan(rng: random.Random) -> tuple[str, int] | None:
    """None (left alone), or when and how the writer is killed (see ``Writer``)."""
    roll = rng.random()
    if roll < 0.25:
        return None
    if roll < 0.6:
        return ("after", rng.randint(0, 50))
    if roll < 0.9:
        return ("step", rng.randint(1, 12))
    return ("half", rng.randint(1, 2))


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


def trial(base: Path, number: int, rng: random.Random) -> Figures:
    """One trial in a fresh storm under ``base``; the figures it adds."""
    fig = Figures(trials=1)
    root = base / f"t{number}"
    root.mkdir()
    (root / "queue.txt").write_text(QUEUE)
    if rng.random() < 0.3:
        (root / "integrated.txt").write_text("c\n")
    try:
        _trial(root, number, rng, fig)
    except Exception as exc:  # noqa: BLE001 -- a failed promise is a figure, with its trial kept for a look
        fig.failures.append(f"trial {number} ({root}): {type(exc).__name__}: {exc}")
        return fig
    shutil.rmtree(root)
    return fig


def _prefill(root: Path, number: int, rng: random.Random) -> list[tuple[Writer, dict]]:
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
        done.append((Writer(token, [verb, slug], None), out.to_json()))
    return done


def _trial(root: Path, number: int, rng: random.Random, fig: Figures) -> None:
    prefilled = _prefill(root, number, rng)
    settle = rng.randint(0, 3)  # requests that finish before the trial: the storm may have no log yet
    warmup = [Writer(f"t{number}-s{k}", argv, None) for k, argv in enumerate(_requests(rng, settle))]
    if warmup:
        run_writers(root, warmup, rng)
    writers = [Writer(f"t{number}-w{k}", argv, _kill_plan(rng))
               for k, argv in enumerate(_requests(rng, rng.randint(2, 4)))]
    run_writers(root, writers, rng)
    fig.writers += len(writers)

    answered = list(prefilled)
    for w in warmup + writers:
        if w.status == KILLED:
            if w in writers:
                fig.kills += 1
            continue
        if w.status not in (0, 1, 2):
            raise AssertionError(f"writer {w.token} {w.argv} exited {w.status}: {w.stdout!r}")
        doc = json.loads(w.stdout)
        if (w.status == 0) != (doc["outcome"] in ("done", "noop")) or doc["recorded"] is not True:
            raise AssertionError(f"writer {w.token} {w.argv} exited {w.status} with {doc}")
        answered.append((w, doc))

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
    after = Writer(f"t{number}-after", ["bump", rng.choice(SLUGS)], None)
    run_writers(root, [after], rng)
    if after.status not in (0, 2):
        raise AssertionError(f"the request after the trial exited {after.status}: {after.stdout!r}")
    doc = json.loads(after.stdout)
    if not doc["recorded"]:
        raise AssertionError(f"the request after the trial was not recorded: {doc}")
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

    # 3. every acknowledged request is on the log exactly once, as it was told
    seen: dict[str, dict] = {}
    for event in events:
        token = event.get("reason")
        if token is None:
            continue
        if token in seen:
            fig.duplicated += 1
            raise AssertionError(f"request {token} is on the log twice")
        seen[token] = event
    for w, told in answered + [(after, doc)]:
        fig.acknowledged += 1
        event = seen.get(w.token)
        if event is None:
            fig.lost += 1
            raise AssertionError(f"acknowledged request {w.token} {w.argv} is not on the log")
        verb = w.argv[0]
        if told["outcome"] == "refused":
            ok = (event["action"], event["requested"], event["code"]) == ("refused", verb, told["code"])
        else:
            ok = (event["action"], event["slug"], event["moved"], event["removed"]) == (
                verb, w.argv[1], told["moved"], told["removed"])
        if not ok:
            raise AssertionError(f"request {w.token} is on the log as {event}, but was told {told}")
        fig.acknowledged_on_log += 1

    # 4. the replayed lane equals its derivation
    log = reader.read(str(root / LOG))
    queue = queuefile.read(str(root / "queue.txt"))
    if queue.skipped:
        raise AssertionError(f"queue.txt has skipped lines: {queue.skipped}")
    snap = Snapshot({ln.slug: ln for ln in queue.lanes}, ledger.read(str(root)), log.state)
    if log.state.lane != derive(snap, log.state.named) or resolve(snap).stale:
        raise AssertionError(f"the lane {log.state.lane} is not its derivation {derive(snap, log.state.named)}")


def run(trials: int, seed: int, base: Path | None = None, progress=None) -> Figures:
    """Run ``trials`` trials; ``progress(figures)`` is called now and then."""
    rng = random.Random(seed)
    total = Figures()
    own = base is None
    base = Path(tempfile.mkdtemp(prefix="sq-crash-")) if own else base
    try:
        for number in range(trials):
            total.add(trial(base, number, rng))
            if progress and (number + 1) % 500 == 0:
                progress(total)
    finally:
        if own and not total.failures:
            shutil.rmtree(base, ignore_errors=True)
    return total

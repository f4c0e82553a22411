"""The clients of the database crash harness (``tests/faults/pg_crash.py``)
and the chaos around them: what each client asks, the forked process that
asks it (the command line, or one long-lived library ``Storm``), its
keyed retries, and the loop that kills clients, ends backends and restarts
the server while they run."""

from __future__ import annotations

import io
import json
import os
import random
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field

import storm_queue.cli.entry
from storm_queue.core.errors import StormError

#: the clients' environment: no storm named by it, no lane
ENV = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
SLUGS = ("a", "b", "c", "d", "e", "f")
TRIES = 4  # attempts of one request under its key, at most
KILLED = -signal.SIGKILL


@dataclass
class Attempt:
    """One attempt of a request: its exit status (None: the client was
    killed before it printed its answer), the answer as data, its stderr."""

    code: int | None = None
    doc: dict = field(default_factory=dict)
    err: str = ""
    #: a finish --then-claim's: the claim's answer (``doc`` is the finish's)
    claim: dict | None = None


@dataclass
class Request:
    key: str
    verb: str
    args: list[str]
    opts: dict
    attempts: list[Attempt] = field(default_factory=list)


@dataclass
class Client:
    """A client process: ``kind`` writer, runner (the command line) or long
    (a long-lived library ``Storm``), its URL (the operator's or the runner
    role's), what it plans, and when it is killed (ms after the start)."""

    name: str
    kind: str
    url: str
    plan: dict
    kill_ms: int | None
    seed: int
    pid: int = 0
    fds: dict = field(default_factory=dict)  # fd -> "out" | "err"
    status: int | None = None
    stdout: bytes = b""
    stderr: str = ""
    requests: list[Request] = field(default_factory=list)


# -- the plan ---------------------------------------------------------------------


def plan(rng: random.Random, number: int, urls: dict[str, str]) -> list[Client]:
    """Three to five clients, of kinds drawn by ``KINDS`` share, and when to kill each."""
    from tests.faults.pg_crash import KINDS

    out = []
    for k in range(rng.randint(3, 5)):
        roll, kind = rng.random(), KINDS[-1][0]
        for name, share in KINDS:
            if roll < share:
                kind = name
                break
            roll -= share
        role = "operator" if kind == "writer" or rng.random() < 0.5 else "runner"
        if kind == "writer":
            steps = [_write(rng, f"p{number}x{k}x{j}") for j in range(rng.randint(1, 3))]
            p = {"steps": steps}
        else:
            p = {"cycles": 1 if kind == "runner" else rng.randint(2, 3), "ttl": rng.choice((1, 2)),
                 "renew": rng.random() < 0.4, "stale": rng.random() < 0.25,
                 "late": kind == "long" and rng.random() < 0.3, "recover": rng.random() < 0.15,
                 "result": rng.choice(("ok", "ok", "failed")), "idle": [rng.randint(30, 250) for _ in range(20)]}
            if p["late"]:
                p["ttl"] = 1
        p["start"] = rng.randint(0, 700)
        reach = 2000 if kind == "long" else 500
        kill = p["start"] + rng.randint(0, reach) if rng.random() < 0.45 else None
        out.append(Client(f"t{number}c{k}", kind, urls[role], p, kill, rng.randrange(2**32)))
    return out


def _write(rng: random.Random, new: str) -> tuple[str, list[str], dict]:
    roll, slug = rng.random(), rng.choice(SLUGS)
    if roll < 0.35:
        return "bump", [slug], {}
    if roll < 0.6:
        return "unbump", [slug], {}
    if roll < 0.75:
        deps = rng.sample(SLUGS, rng.randint(0, 2))
        return "push", [new, str(100 + rng.randint(0, 99))], ({"deps": ",".join(deps)} if deps else {})
    if roll < 0.88:
        return "add", [new + "a", str(200 + rng.randint(0, 99))], {}
    return "settle", [slug, rng.choice(("integrated", "abandoned"))], {}


def chaos(rng: random.Random, clients: list[Client], restart: bool) -> list[tuple[int, str, object]]:
    """When to do what to the clients and the server: (ms, kill, client),
    (ms, terminate, None), (ms, restart, None), in time order."""
    out: list[tuple[int, str, object]] = [(c.kill_ms, "kill", c) for c in clients if c.kill_ms is not None]
    out += [(rng.randint(0, 1500), "terminate", None) for _ in range(rng.randint(0, 3))]
    if restart:
        out.append((rng.randint(50, 1000), "restart", None))
    return sorted(out, key=lambda e: e[0])


# -- the client process -------------------------------------------------------------


def _child(c: Client, out_w: int, err_w: int, close: list[int]) -> None:
    code = 97
    try:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in close:
            try:
                os.close(fd)
            except OSError:
                pass
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", write_through=True)
        _tell_crashes()
        signal.alarm(60)
        _script(c, io.FileIO(1, "w", closefd=False))
        code = 0
    except BaseException:  # noqa: BLE001 -- the parent sees 98 and the traceback
        traceback.print_exc()
        code = 98
    finally:
        os._exit(code)


def _tell_crashes() -> None:
    """In the client: a crash the command line reports in one line
    (``storm-queue: crashed: ...``) is followed on stderr by its traceback,
    so that the harness can say where it came from."""
    import storm_queue.cli.answer as answer

    said = answer.err

    def err(words: str) -> None:
        said(words)
        if "crashed:" in words:
            sys.stderr.write(traceback.format_exc())

    answer.err = err


def _script(c: Client, out: io.FileIO) -> None:
    """In the client: its requests, each attempt framed on stdout as one
    JSON line once answered (so an answer and its status are printed
    together, or not at all)."""
    rng = random.Random(c.seed)
    storm = None
    if c.kind == "long":
        from storm_queue.service.storm import Storm

        storm = Storm.find(c.url, env=ENV)
    made = [0]

    def ask(verb: str, args: list[str], opts: dict) -> tuple[int, dict]:
        key = f"{c.name}r{made[0]}"
        made[0] += 1
        for attempt in range(TRIES):
            out.write(json.dumps({"start": key, "verb": verb, "args": args, "opts": opts}).encode() + b"\n")
            code, doc, err = _library(storm, verb, args, opts, key) if storm else _cli(c.url, verb, args, opts, key)
            out.write(json.dumps({"key": key, "code": code, "doc": doc, "err": err}).encode() + b"\n")
            if not _again(code, doc) or attempt == TRIES - 1:
                return code, doc
            time.sleep(rng.uniform(0.05, 0.3))
        return code, doc

    time.sleep(c.plan["start"] / 1000)
    if c.kind == "writer":
        for verb, args, opts in c.plan["steps"]:
            ask(verb, args, opts)
        return
    p, idle = c.plan, iter(c.plan["idle"])
    then = random.Random(c.seed ^ 0x7E11).random() < 0.5  # finishes with --then-claim (issue 32, item 1)
    held = None  # the lease a finish --then-claim took: the next cycle's
    if p["recover"]:
        ask("recover", [], {})
    for _ in range(p["cycles"]):
        if held is None:
            code, doc = ask("claim", [], {"holder": c.name, "ttl": p["ttl"]})
            if code != 0 or not doc.get("token"):
                time.sleep(next(idle) / 1000)
                continue
            held = doc["slug"], doc["token"]
        (slug, token), held = held, None
        if p["late"]:  # a runner that outlives its lease: its renew or finish may meet another's claim
            time.sleep(p["ttl"] + 0.1)
        elif storm:
            time.sleep(next(idle) / 1000)
        if p["stale"]:
            ask("finish", [slug], {"token": token + 1, "result": "ok"})
        if p["renew"]:
            ask("renew", [slug], {"token": token, "ttl": p["ttl"]})
            if storm:
                time.sleep(next(idle) / 1000)
        if then:
            code, doc = ask("finish", [slug], {"token": token, "result": p["result"], "then_claim": True,
                                               "holder": c.name, "ttl": p["ttl"]})
            claimed = (doc.get("claim") or {}) if isinstance(doc, dict) else {}
            if code == 0 and claimed.get("token"):
                held = claimed["slug"], claimed["token"]
        else:
            ask("finish", [slug], {"token": token, "result": p["result"]})
        if storm:
            time.sleep(next(idle) / 1000)


def _again(code: int, doc: dict) -> bool:
    """Whether a client asks again under the same key: the storm was busy
    or gave the request up (5), the record could not be made (4) unless it
    was committed, or the server could not be reached (2 without a refusal)."""
    if doc.get("recorded") is True:
        return False
    return code in (4, 5) or (code == 2 and doc.get("outcome") == "error")


def _cli(url: str, verb: str, args: list[str], opts: dict, key: str) -> tuple[int, dict, str]:
    """One request through the real command line, in this process."""
    flags = [w for name, value in opts.items()
             for w in ((f"--{name.replace('_', '-')}",) if value is True else (f"--{name}", str(value)))]
    sys.argv = ["storm-queue", verb, *args, *flags, "--key", key, "--json", "--wait", "5", "--root", url]
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        storm_queue.cli.entry.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 96
    finally:
        sys.stdout, sys.stderr = saved
    text = out.getvalue().strip()
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        doc, err = {}, err.getvalue() + f"\n(stdout not one JSON document: {text[:300]!r})"
        return code, doc, err
    return code, doc, err.getvalue()


def _library(storm, verb: str, args: list[str], opts: dict, key: str) -> tuple[int, dict, str]:
    """One request of the long-lived ``Storm``: its outcome, or the typed
    error it raised as the command line would answer it."""
    err = io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        out = getattr(storm, verb)(*args, **opts, key=key)
        code, doc = out.exit_code, out.to_json()
        if opts.get("then_claim"):  # as finish --then-claim --json answers, and exits
            doc = {"finish": doc, "claim": None if out.claim is None else out.claim.to_json()}
            code = code if out.claim is None or code else out.claim.exit_code
    except StormError as exc:
        code, doc = exc.exit_code, {"outcome": "error", "message": str(exc)}
        if hasattr(exc, "recorded"):
            doc["recorded"] = exc.recorded
    except Exception as exc:  # noqa: BLE001 -- a crash: the command line would say "crashed"
        code, doc = 4, {"outcome": "crashed", "message": f"{type(exc).__name__}: {exc}"}
        err.write(traceback.format_exc())
    finally:
        sys.stderr = saved
    return code, doc, err.getvalue()


# -- the loop -----------------------------------------------------------------------


def run(clients: list[Client], plan_: list[tuple[int, str, object]], cluster, dbname: str, fig) -> None:
    """Start every client at once, do the chaos when its time comes, and
    collect every exit status, answer and stderr."""
    opened: list[int] = []
    start = time.monotonic()
    for c in clients:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            os.close(err_r)
            _child(c, out_w, err_w, opened)
        os.close(out_w)
        os.close(err_w)
        c.pid, c.fds = pid, {out_r: "out", err_r: "err"}
        opened += [out_r, err_r]
    fig.clients += len(clients)
    owner = {fd: c for c in clients for fd in c.fds}
    chunks: dict[int, list[bytes]] = {fd: [] for fd in owner}
    todo, live = list(plan_), set(owner)
    last = time.monotonic()
    while live:
        timeout = max(0.0, start + todo[0][0] / 1000 - time.monotonic()) if todo else 90.0
        ready, _, _ = select.select(list(live), [], [], timeout)
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:
                live.discard(fd)
                os.close(fd)
        if ready:
            last = time.monotonic()
        while todo and start + todo[0][0] / 1000 <= time.monotonic():
            _, what, c = todo.pop(0)
            _do(what, c, cluster, dbname, fig)
            last = time.monotonic()
        if time.monotonic() - last > 90:
            for c in clients:
                _kill(c)
            raise RuntimeError("a client hung for 90 seconds")
    from tests.children import reap

    for c in clients:
        c.status = os.waitstatus_to_exitcode(reap(c.pid, 90))
        c.stdout = b"".join(b for fd, kind in c.fds.items() if kind == "out" for b in chunks[fd])
        c.stderr = b"".join(b for fd, kind in c.fds.items() if kind == "err" for b in chunks[fd]).decode(errors="replace")
        fig.kills += c.status == KILLED
        if c.status not in (0, KILLED):
            raise AssertionError(f"client {c.name} {c.kind} exited {c.status}: {c.stderr[-2000:]}")
        _frames(c)


def _kill(c: Client) -> bool:
    try:
        os.kill(c.pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def _do(what: str, c, cluster, dbname: str, fig) -> None:
    """Kill a client, end a random storm-queue backend of the trial's database, or restart the server."""
    if what == "kill":
        _kill(c)
    elif what == "terminate":
        rows = cluster.query(dbname, "SELECT pid FROM pg_stat_activity WHERE datname = %s AND "
                             "application_name = 'storm-queue' AND pid <> pg_backend_pid()", (dbname,))
        if rows:
            pid = random.choice(rows)[0]
            fig.terminated += bool(cluster.query(dbname, "SELECT pg_terminate_backend(%s)", (pid,))[0][0])
    elif what == "restart":
        cluster.restart()
        fig.restarts += 1


def _frames(c: Client) -> None:
    """The requests a client made, from its framed stdout (a line cut short by a kill is no answer)."""
    by_key: dict[str, Request] = {}
    for line in c.stdout.split(b"\n"):
        if not line:
            continue
        try:
            body = json.loads(line)
        except ValueError:
            continue  # the last line, torn by the kill
        if "start" in body:
            req = by_key.get(body["start"])
            if req is None:
                req = by_key[body["start"]] = Request(body["start"], body["verb"], body["args"], body["opts"])
                c.requests.append(req)
            req.attempts.append(Attempt())
        else:
            a = by_key[body["key"]].attempts[-1]
            a.code, a.doc, a.err = body["code"], body["doc"], body["err"]
            if "finish" in a.doc:  # finish --then-claim: {"finish": ..., "claim": ...}
                a.doc, a.claim = a.doc["finish"] or {}, a.doc["claim"]

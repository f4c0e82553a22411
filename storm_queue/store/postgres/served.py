"""Runner requests a database storm's server decides in one round trip
(issue 21, item 1; ``migrations/0005.sql``): ``claim``, ``renew`` and
``finish`` are each one call of a function that takes the storm's lock
inside the server, decides as ``core/runs.py`` (and the resolver, for a
claim) does, appends the chained line(s) as ``core/framing.py`` frames
them, writes the rows, and returns what the command prints. The storm's
lock is never held while this process runs.

What the server leaves to the Python request path goes that way, nothing
written: a request under a key or a source, from a lane process, with a
reason too long to keep or text the server cannot carry (a NUL); a caller
that is neither the operator nor a runner; a declaration whose runner
policy the server does not hold; a TTL asked for outside the declared
window (the request path refuses it as asked)."""

from __future__ import annotations

from ...core.authority import LANE_ENV
from ...core.errors import RecordFailed, StormUnreadable
from ...core.outcome import Outcome
from . import libpq
from .connect import _words
from .queries import q, schema_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ...core.outcome import Request
    from .store import Database

#: the requests the server serves
SERVED = ("claim", "renew", "finish")
_INT4, _INT8 = 1 << 31, 1 << 63


def _carried(*texts: str | None) -> bool:
    """Whether the server can carry each text as it is (UTF-8, no NUL)."""
    for text in texts:
        if text is not None:
            if "\x00" in text:
                return False
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def _args(req: Request, t: float, wait_ms: int) -> tuple | None:
    """The function's arguments for ``req``, or None when it cannot take them."""
    if req.verb == "claim":
        holder, ttl = req.args
        token, args, texts = 1, (holder, ttl, req.reason, t, wait_ms), (holder, req.reason)
    elif req.verb == "renew":
        token, ttl = req.args
        args, texts = (req.slug, token, ttl, req.reason, t, wait_ms), (req.slug, req.reason)
    else:
        token, result, note = req.args
        args, texts = (req.slug, token, result, note, req.reason, t, wait_ms), (req.slug, note, req.reason, result)
    if req.verb != "finish" and ttl is not None and not (type(ttl) is int and 0 <= ttl < _INT4):
        return None
    if not (type(token) is int and 0 < token < _INT8 and _carried(*texts)):
        return None
    return args


def answered(store: Database, req: Request, clock: Callable[[], float], busy: Callable[[float], Exception],
             fold_at_most: int) -> Outcome | None:
    """``serve``, its lock not had in the store's ``wait`` raised as
    ``busy(wait)``; an operator's served request that leaves the state
    row's body ``catch_up_at`` lines or more behind the head catches it
    up (``catch_up``), or every reader would fold the lines after it. A
    process that found another at it does not ask again until the body
    is ``fold_at_most`` lines further behind (the other is done by then,
    or gone): asking at every request while another folds costs every
    runner a round trip a request."""
    try:
        out, behind = serve(store, req, clock)
    except libpq.errors.LockNotAvailable:
        raise busy(store.wait) from None
    at = max(catch_up_at(store, fold_at_most), store._catch_up_after)
    if (out is not None and behind is not None and behind >= at and out.by.startswith("operator:")
            and not catch_up(store, fold_at_most)):
        store._catch_up_after = behind + fold_at_most
    return out


def serve(store: Database, req: Request, clock: Callable[[], float]) -> tuple[Outcome | None, int | None]:
    """The outcome of ``req`` (claim, renew, finish) as the server decided
    and recorded it at the time ``clock()`` gives (POSIX seconds, read once
    connected, just before the call), or None: the request
    path is to take it (nothing was written); and how many lines the state
    row's body was behind the log's head. The lock not had in the store's
    ``wait`` raises the driver's ``LockNotAvailable``."""
    from ...core.shapes import shape_reason

    if (req.verb not in SERVED or req.key is not None or req.source is not None or LANE_ENV in store.env
            or shape_reason(req.reason) is not None):
        return None, None
    if _args(req, 0.0, 0) is None:
        return None, None
    conn = store.conn
    if conn.status != libpq.IDLE:
        return None, None
    from .version import read as read_version

    try:
        if read_version(store) != schema_version():
            return None, None
        args = _args(req, clock(), max(1, int(store.wait * 1000)))
        statement = {"claim": q("serve_claim"), "renew": q("serve_renew"), "finish": q("serve_finish")}[req.verb]
        row = conn.execute(statement, args, prepare=True).fetchone()
    except (StormUnreadable, libpq.errors.UndefinedFunction, libpq.errors.InsufficientPrivilege,
            libpq.errors.UndefinedTable, libpq.errors.InvalidSchemaName, libpq.errors.UndefinedColumn):
        return None, None  # the request path says what is wrong
    except libpq.OperationalError as exc:
        store._conn = None
        raise RecordFailed(f"the connection to {store.root} was lost during the {req.verb} ({_words(exc, store.url)}), "
                           "and whether the server recorded it is unknown; check storm-queue log before asking again",
                           recorded=None) from None
    answer, behind = row
    if answer is None:
        return None, None
    return (claimed(store, req, answer) if req.verb == "claim" else outcome(req, answer)), behind


def outcome(req: Request, answer: dict[str, Any]) -> Outcome:
    """The ``Outcome`` of the server's ``answer`` (its outcome, code,
    message, token, expiry and the request's own line), as the request path
    makes it for the same decision."""
    from ...core.jsoncodec import loads

    event = loads(answer["line"])
    out = Outcome(answer["outcome"], req.verb, req.slug, event["by"], answer.get("code"), answer["message"],
                  token=answer.get("token"), expires=answer.get("expires"))
    out.recorded, out.event = True, event
    return out


def claimed(store: Database, req: Request, answer: dict[str, Any]) -> Outcome:
    """The ``Outcome`` of a claim the server decided (``core.runs.claimed``),
    with the last line it wrote; a claim that met only ``wait`` says, as
    the request path does, when a dependency cycle is why nothing runs
    (read afterwards, without the lock: the storm as the claim left it,
    less the blocked marks it wrote, as the request path judges it)."""
    from ...core import fold
    from ...core.jsoncodec import loads
    from ...core.runs import claimed as answered

    halt = answer["halt"]
    halt = None if halt is None else fold.Act(halt["seq"], halt["at"], halt["by"], halt["reason"])
    out = answered(answer["by"], req.args[0], answer["decision"], answer["slug"], answer["token"], answer["expires"],
                   halt)
    if answer["line"] is not None:
        out.recorded, out.event = True, loads(answer["line"])
    out.due = answer["due"]
    if answer["decision"] == "wait":
        from ...core.records import replace
        from ...core.resolver import cycle_note, resolve

        snap = store.snapshot(store.read(store.declaration()), answer["at"])
        marked = frozenset(answer.get("blocked") or ())
        if marked:  # as the server decided: before it gave the lanes it met blocked their result rows
            snap = replace(snap, ledgers=replace(snap.ledgers, finished=snap.ledgers.finished - marked))
        note = cycle_note(snap, resolve(snap))
        out.warnings += [note] if note else []
    return out


def folded_runs(state: Any) -> dict[str, Any]:
    """What the server keeps of the lane state ``state`` (``storm_queue.run``,
    ``runs_at``, ``priority``, ``waiver``, as ``read_runs`` reads them):
    each run's token, lease, attempts, last attempt (token, end), quarantine
    and schedule, in the fold's order; the token floor; the halt in force;
    the priority lane; the live waivers."""
    runs = {}
    for slug, run in state.runs.items():
        lease = run.lease
        held = None if lease is None else (lease.holder, lease.token, lease.by, lease.claimed, lease.expires, lease.ttl)
        last = (run.history[-1].token, run.history[-1].end) if run.history else None
        c = run.cancelled
        cancelled = None if c is None else (c.at, c.by, c.reason)
        revoked = [a.token for a in run.history if a.end == "cancelled"]
        runs[slug] = (run.token, held, run.attempts, last, run.quarantined, run.not_before, cancelled, revoked)
    halt = state.halt
    return {"runs": list(runs.items()), "floor": state.token_floor,
            "halt": None if halt is None else (halt.seq, halt.at, halt.by, halt.reason), "lane": list(state.lane),
            "waivers": sorted((slug, dep) for slug, deps in state.waivers.items() for dep in deps)}


def read_runs(conn: Any) -> dict[str, Any]:
    """What the server folded from the log, as ``folded_runs`` gives a state's."""
    runs = []
    for (slug, token, holder, lease_token, lease_by, claimed, expires, ttl, attempts, last_token, last_end,
         quarantined, not_before, *cancel) in conn.execute(q("read_runs")).fetchall():
        held = None if lease_token is None else (holder, lease_token, lease_by, claimed, expires, ttl)
        cancelled = None if cancel[0] is None else tuple(cancel[:3])
        runs.append((slug, (token, held, attempts, None if last_token is None else (last_token, last_end),
                            quarantined, not_before, cancelled, list(cancel[3]))))
    floor, *halt = conn.execute(q("read_runs_at")).fetchone()
    return {"runs": runs, "floor": floor, "halt": None if halt[0] is None else tuple(halt),
            "lane": [row[0] for row in conn.execute(q("read_priority")).fetchall()],
            "waivers": [tuple(row) for row in conn.execute(q("read_waivers")).fetchall()]}


def catch_up_at(store: Database, fold_at_most: int) -> int:
    """How many lines behind the head the state row's body is rewritten:
    ``fold_at_most``, or as many as the runs of the state this process
    last read when that is more. Rewriting the body costs about as much
    as folding a line per run it holds (load, fold, dump: ~80 ms at 1,000
    runs), so the lines between two rewrites grow with it: the rewrites
    cost about a line's folding per line, not one rewrite every
    ``fold_at_most`` lines at any size, and a reader that starts from
    the body folds at most about what loading it costs. The runs are the
    state's this process last read, or the runs the server folded as
    ``catch_up`` last counted them, whichever are more: a process that
    has read no state, or an old one, does not rewrite the body as often
    as a small storm's."""
    known = store._state_known
    runs = max(0 if known is None else len(known.state.runs), store._runs_counted)
    return max(fold_at_most, runs)


def catch_up(store: Database, fold_at_most: int) -> bool:
    """Rewrite the state row's body at the log's head (the operator's:
    only it may write the row): the lines the server's functions append
    leave the body behind, and every reader folds the lines after it. The
    state is read and dumped outside the storm's lock, in a snapshot of
    its own, and written under the lock in a transaction of one statement
    that leaves a body already there (or past it) alone: the runners'
    requests are not held up while this process folds. One process at a
    time does it (a lock of its own, not waited for), and only while the
    body is still ``catch_up_at`` lines behind, asked before the state is
    read (another process may have caught it up since, and the runs the
    server folded are counted: reading the state is most of the cost) and
    again after; a storm busy or away now is left for the next time:
    nothing depends on it. False when another process was at it."""
    from ...core.errors import StormError
    from ...core.statebody import dump_state

    conn = store.conn
    at = catch_up_at(store, fold_at_most)
    try:
        with store._errors():
            if not conn.execute(q("try_catch_up")).fetchone()[0]:
                return False  # another process is at it
            try:
                seq, _, body_seq, *_ = conn.execute(q("read_head")).fetchone()
                if seq - body_seq < at:
                    return True  # caught up since
                store._runs_counted = conn.execute(q("count_runs")).fetchone()[0]
                at = max(at, catch_up_at(store, fold_at_most))
                if seq - body_seq < at:
                    return True  # not yet behind by the state's size
                with conn.transaction():
                    conn.execute(q("read_only_snapshot"))
                    log = store._load()
                if log.seq - store._body_seq < at:
                    return True  # caught up since
                body = dump_state(log.state)
                with store._locked():
                    conn.execute(q("move_body"), (body, log.seq, log.digest, log.seq))
                store._body_seq = log.seq
            finally:
                if not conn.closed:
                    conn.execute(q("end_catch_up"))
    except StormError:
        pass
    return True

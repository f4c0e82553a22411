"""Runner requests a database storm's server decides (issue 21, item 1;
issue 30: sql/functions/serve_*.sql): ``claim``, ``renew``, ``finish``,
``release`` and ``recover`` are each one call of a function that judges
the request (shape, who asks, its key), takes the storm's lock inside the
server, decides as ``core/runs.py`` (and the resolver, for a claim) does,
appends the chained line(s) as ``core/framing.py`` frames them, on the
server's clock, writes the rows, and returns what the command prints. The
storm's lock is never held while this process runs, and a runner role
writes by no other way: what it may execute takes the request's typed
arguments, never a line.

The server leaves to the Python request path only the operator's request
under a source, or on a declaration it holds no policy of (and the
operator's ``recover SLUG``); a caller that is neither the operator nor a
runner may not call it (the request path refuses it, unrecorded). Text
the server cannot carry (a NUL, text that is not Unicode, a name, key or
holder over 4,096 characters) is refused by the request path, unrecorded
(``not_carried``, exit 2: ``store.judge``)."""

from __future__ import annotations

from ...core.authority import LANE_ENV
from ...core.errors import RecordFailed, StormUnreadable
from ...core.outcome import Outcome, Request
from . import driver
from .connect import _words, not_carried
from .queries import q, schema_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from .session import Session

#: the requests the server serves
SERVED = ("claim", "renew", "finish", "release", "recover")
def _args(req: Request, holder: str | None, tail: tuple) -> tuple:
    """The serving function's arguments for ``req`` (``tail``: its key, lane, source, wait and ask)."""
    verb, a = req.verb, req.args
    if verb == "claim":
        return (a[0], holder, a[1], req.reason, *tail)
    if verb == "renew":
        return (req.slug, a[0], a[1], req.reason, *tail)
    if verb == "finish" and len(a) == 5:  # finish --then-claim: the claim's holder (as given, then the default) and TTL
        return (req.slug, a[0], a[1], a[2], a[3], holder, a[4], req.reason, *tail)
    if verb == "finish":
        return (req.slug, a[0], a[1], a[2], req.reason, *tail)
    if verb == "release":
        return (req.slug, a[0], req.reason, *tail)
    return (req.slug, bool(a and a[0]), req.reason, *tail)


def answered(store: Session, req: Request, holder: str | None, busy: Callable[[float], Exception],
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
        out, behind = serve(store, req, holder)
    except driver.errors.LockNotAvailable:
        raise busy(store.wait) from None
    at = max(catch_up_at(store, fold_at_most), store._catch_up_after)
    if (out is not None and behind is not None and behind >= at and out.by.startswith("operator:")
            and not catch_up(store, fold_at_most)):
        store._catch_up_after = behind + fold_at_most
    return out


def serve(store: Session, req: Request, holder: str | None = None) -> tuple[Outcome | None, int | None]:
    """The outcome of ``req`` (``SERVED``; ``holder``: a claim's holder
    when it names none) as the server decided and recorded it, or None: the
    request path is to take it (nothing was written); and how many lines
    the state row's body was behind the log's head. The lock not had in
    the store's ``wait`` raises the driver's ``LockNotAvailable``; a
    connection lost during the call is answered with whether its lines
    were written (``faults.lost_served``)."""
    import os

    if req.verb not in SERVED:
        return None, None
    conn = store.conn
    if conn.status != driver.IDLE:
        return None, None
    from .version import read as read_version

    lane = store.env.get(LANE_ENV)
    try:
        if read_version(store) != schema_version():
            return None, None  # an older schema: the request path says what it may do
    except StormUnreadable:
        return None, None
    if not_carried(req, lane, holder) is not None:
        return None, None  # the request path refuses it, unrecorded (store.judge)
    ask = os.urandom(16).hex()
    args = _args(req, holder, (req.key, lane, req.source, max(1, int(store.wait * 1000)), ask))
    pid = conn.info.backend_pid
    call = q("serve_finish_claim") if req.verb == "finish" and len(req.args) == 5 else {
        "claim": q("serve_claim"), "renew": q("serve_renew"), "finish": q("serve_finish"), "release": q("serve_release"),
        "recover": q("serve_recover")}[req.verb]
    statement = q("served_durably").replace("{call}", call.rstrip().rstrip(";"))
    try:
        row = conn.execute(statement, args).fetchone()
    except (driver.errors.UndefinedFunction, driver.errors.InsufficientPrivilege, driver.errors.UndefinedTable,
            driver.errors.InvalidSchemaName, driver.errors.UndefinedColumn):
        return None, None  # not a caller it serves: the request path says so
    except driver.errors.LockNotAvailable:
        raise
    except (driver.errors.QueryCanceled, driver.errors.ReadOnlySqlTransaction) as exc:
        from .faults import refused_served

        raise refused_served(store, req.verb, exc, ask) from None
    except driver.OperationalError as exc:
        from .faults import lost_served

        raise lost_served(store, req.verb, exc, ask, pid) from None
    answer, behind, _ = row
    if answer is None:
        return None, None
    return answer_of(store, req, answer), behind


def answer_of(store: Session, req: Request, answer: dict[str, Any]) -> Outcome:
    """The ``Outcome`` of the server's answer: a storm it does not decide
    by (the order unknown, exit 3), a keyed request repeated (as the request
    path repeats it: ``core.outcome.repeated``), a refusal or a request
    done (``outcome``), a claim (``claimed``)."""
    if "unknown" in answer:
        from ...core.logread import Damage

        raise Damage(store.root, answer["unknown"])
    if "repeat" in answer:
        from ...core.fold import Keyed
        from ...core.jsoncodec import loads
        from ...core.outcome import repeated

        event = loads(answer["repeat"])
        lease = answer.get("lease")
        return repeated(req, answer["by"], Keyed(req.fingerprint(), answer["seq"], event), answer["at"],
                        None if lease is None else (lease["token"], lease["expires"]))
    if req.verb == "claim" and answer["outcome"] != "refused":
        return claimed(store, req, answer)
    if "finish" in answer:  # finish --then-claim: the finish's answer, its claim the claim's (its own request)
        from ...core.runs import then_key

        done = outcome(req, answer["finish"])
        claim_req = Request("claim", None, None, req.source, then_key(req.key), req.args[3:])
        done.claim = claimed(store, claim_req, answer["claim"])
        return done
    return outcome(req, answer)


def outcome(req: Request, answer: dict[str, Any]) -> Outcome:
    """The ``Outcome`` of the server's ``answer`` (its outcome, code,
    message, token, expiry and the request's own line: none when nothing
    was recorded), as the request path makes it for the same decision."""
    from ...core.jsoncodec import loads

    event = None if answer.get("line") is None else loads(answer["line"])
    out = Outcome(answer["outcome"], req.verb, req.slug, answer["by"] if event is None else event["by"], answer.get("code"),
                  answer["message"], token=answer.get("token"), expires=answer.get("expires"))
    out.recorded, out.event = event is not None, event
    return out


def claimed(store: Session, req: Request, answer: dict[str, Any]) -> Outcome:
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
    line = None if answer["line"] is None else loads(answer["line"])
    out = answered(answer["by"], line["holder"] if line is not None and line["action"] == "claim" else req.args[0],
                   answer["decision"], answer["slug"], answer["token"], answer["expires"], halt)
    if line is not None:
        out.recorded, out.event = True, line
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


def catch_up_at(store: Session, fold_at_most: int) -> int:
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


def catch_up(store: Session, fold_at_most: int) -> bool:
    """Rewrite the state row's body at the log's head (the operator's:
    only it may write the row): the lines the server's functions append
    leave the body behind, and every reader folds the lines after it. The
    state is read and dumped outside the storm's lock, in a snapshot of
    its own, and written under the lock in a transaction of one statement
    that leaves a body already there (or past it) alone: the runners'
    requests are not held up while this process folds. One process at a
    time does it (a lock of its own, held while it reads and dumps the
    state, not waited for: a table lock only the operator may take), and only while the
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
            try:
                with conn.transaction():
                    conn.execute(q("repeatable_read"))
                    conn.execute(q("try_catch_up"))
                    seq, _, body_seq, *_ = conn.execute(q("read_head")).fetchone()
                    if seq - body_seq < at:
                        return True  # caught up since
                    store._runs_counted = conn.execute(q("count_runs")).fetchone()[0]
                    at = max(at, catch_up_at(store, fold_at_most))
                    if seq - body_seq < at:
                        return True  # not yet behind by the state's size
                    log = store._load()
                    if log.seq - store._body_seq < at:
                        return True  # caught up since
                    body = dump_state(log.state)
            except driver.errors.LockNotAvailable:
                return False  # another process is at it
            with store._locked():
                conn.execute(q("move_body"), (body, log.seq, log.digest, log.seq))
            store._body_seq = log.seq
    except StormError:
        pass
    return True

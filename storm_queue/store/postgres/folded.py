"""What the server folds of the log (``storm_queue.run``, ``runs_at``,
``priority``, ``waiver``, ``keyed``: sql/schema.sql; folded by
sql/functions/fold_line.sql)
against what the Python fold makes of the same lines, each side read into
the same plain values (``verify``, and the tests that hold the served
path to the Python one)."""

from __future__ import annotations

from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def folded_runs(state: Any) -> dict[str, Any]:
    """What the server keeps of the lane state ``state`` (``storm_queue.run``,
    ``runs_at``, ``priority``, ``waiver``, as ``read_runs`` reads them):
    each run's token, lease, attempts, last attempt (token, end), quarantine,
    schedule, cancel and hold, in the fold's order; the token floor; the halt
    in force; the priority lane; the live waivers."""
    runs = {}
    for slug, run in state.runs.items():
        lease = run.lease
        held = None if lease is None else (lease.holder, lease.token, lease.by, lease.claimed, lease.expires, lease.ttl)
        last = (run.history[-1].token, run.history[-1].end) if run.history else None
        c = run.cancelled
        cancelled = None if c is None else (c.at, c.by, c.reason)
        revoked = [a.token for a in run.history if a.end == "cancelled"]
        h = run.held
        hold = None if h is None else (h.seq, h.at, h.by, h.reason)
        runs[slug] = (run.token, held, run.attempts, last, run.quarantined, run.not_before, cancelled, revoked, hold)
    halt = state.halt
    return {"runs": list(runs.items()), "floor": state.token_floor,
            "halt": None if halt is None else (halt.seq, halt.at, halt.by, halt.reason), "lane": list(state.lane),
            "waivers": sorted((slug, dep) for slug, deps in state.waivers.items() for dep in deps)}


def read_runs(conn: Any) -> dict[str, Any]:
    """What the server folded from the log, as ``folded_runs`` gives a state's."""
    runs = []
    for (slug, token, holder, lease_token, lease_by, claimed, expires, ttl, attempts, last_token, last_end,
         quarantined, not_before, *rest) in conn.execute(q("read_runs")).fetchall():
        held = None if lease_token is None else (holder, lease_token, lease_by, claimed, expires, ttl)
        cancel, revoked, hold = rest[:3], rest[3], rest[4:]
        runs.append((slug, (token, held, attempts, None if last_token is None else (last_token, last_end),
                            quarantined, not_before, None if cancel[0] is None else tuple(cancel), list(revoked),
                            None if hold[0] is None else tuple(hold))))
    floor, *halt = conn.execute(q("read_runs_at")).fetchone()
    return {"runs": runs, "floor": floor, "halt": None if halt[0] is None else tuple(halt),
            "lane": [row[0] for row in conn.execute(q("read_priority")).fetchall()],
            "waivers": [tuple(row) for row in conn.execute(q("read_waivers")).fetchall()]}


def folded_keys(state: Any) -> list[tuple[str, str, str, int]]:
    """The idempotency keys of the lane state ``state``, as ``read_keys`` reads the server's: (principal,
    key, fingerprint, the line that bound it), in order."""
    return sorted((by, key, keyed.fingerprint, keyed.seq) for by, keys in state.keys.items() for key, keyed in keys.items())


def read_keys(conn: Any) -> list[tuple[str, str, str, int]]:
    """The idempotency keys the server folded (``storm_queue.keyed``)."""
    return sorted(tuple(row) for row in conn.execute(q("read_keys")).fetchall())

"""``storm-queue migrate DIR URL``: carry a directory storm into an empty
database, every line of its log with its seq and chain, and record on the
directory a last line naming where it went."""

from __future__ import annotations

import os

from . import config
from .desk import Storm, now
from .errors import InitRefused, NotHere, StormError
from .log import reader
from .log.framing import sha256
from .postgres import LOCK_KEYS, _driver, _words, connect, insert_state, schema_sql, shown
from .records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping


@dataclass(frozen=True)
class Migrated:
    """What ``migrate`` carried: the database, the lines, and what a database cannot hold."""

    root: str
    lines: int
    lanes: int
    left: tuple[str, ...]


def migrate(directory: str, url: str, env: Mapping[str, str], wait: float = 30.0) -> Migrated:
    """Carry the directory storm at ``directory`` into the empty database
    ``url`` (the directory's operator only): lanes, ledgers, results,
    leases, the declaration and every line of its log with its seq and
    chain; then record on the directory a last line naming where it went."""
    from . import authority, ledger, queuefile
    from .errors import Refused, UnknownOrder
    from .log import lock, writer

    psycopg = _driver()
    src = Storm(directory, env, wait)
    who, op = authority.caller(src.env), authority.owner(directory)
    decl = src.declaration()
    verdict = authority.judge(who, op, decl, None, operator_only=True)
    if not verdict.admitted:
        raise Refused(verdict.refusal.code, f"{verdict.refusal.message}; nothing was migrated", 1, False)
    if decl.log_error:
        raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; nothing was migrated")
    log_path = src.log_path(decl)
    conn = connect(url)
    try:
        with lock.held(log_path, wait, may_create=True):
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", LOCK_KEYS)
                role = conn.execute("SELECT session_user").fetchone()[0]
                if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'storm_queue'").fetchone():
                    raise InitRefused(f"the database {shown(url)} already holds a storm; migrate needs an empty one; "
                                      "nothing was migrated")
                conn.execute(schema_sql())
                batch: list[tuple[int, bytes]] = []

                def each(line: bytes, event: dict[str, Any]) -> None:
                    batch.append((event["seq"], line))
                    if len(batch) >= 1000:
                        flush()

                def flush() -> None:
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", batch)
                    batch.clear()

                log = reader.read(log_path, use_checkpoint=False, each=each)
                if log.state.moved_to:
                    raise NotHere(f"this storm already moved to {log.state.moved_to}; nothing was migrated")
                if log.fresh or not log.seq:
                    raise NotHere(f"{directory} has recorded nothing yet: start the database storm with storm-queue init URL")
                flush()
                at = now()
                body = {"action": "migrate", "to": shown(url)}
                if log.torn:
                    raise NotHere("the log ends in a torn write: make one request there first (it repairs it), then migrate")
                queue = queuefile.read(os.path.join(directory, "queue.txt"))
                led = ledger.read(directory)
                conn.execute("INSERT INTO storm_queue.storm (id, operator, created, declaration, declaration_sha256) "
                             "VALUES (1, %s, %s, %s, %s)", (role, at, *_declaration_text(directory, decl)))
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)",
                                    [(lane.slug, lane.issue, list(lane.deps)) for lane in queue.lanes])
                    cur.executemany("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, %s)",
                                    [(s, "integrated", at) for s in sorted(led.integrated)]
                                    + [(s, "abandoned", at) for s in sorted(led.abandoned - led.integrated)])
                    cur.executemany("INSERT INTO storm_queue.result (slug, body) VALUES (%s, %s)",
                                    [(s, _result_json(directory, s)) for s in sorted(led.finished)])
                insert_state(conn, log.seq, log.digest, log.state)
                left = tuple([f"queue.txt line {s.line} (skipped there)" for s in queue.skipped]
                             + [f"the running marker of {s} (no lease behind it)" for s in led.running
                                if log.state.run(s).lease is None]
                             + (["UNATTENDED"] if led.unattended else []))
            # the database holds the storm now: the directory's last line says where it went
            writer.append(reader.read(log_path), [body], at, verdict.by)
    except psycopg.Error as exc:
        raise StormError(f"migrate to {shown(url)} failed, nothing was migrated: {_words(exc, url)}") from None
    finally:
        conn.close()
    return Migrated(shown(url), log.seq, len(queue.lanes), left)


def _declaration_text(directory: str, decl: config.Declaration) -> tuple[str | None, str | None]:
    if not decl.present:
        return None, None
    with open(os.path.join(directory, "storm.toml"), "rb") as f:
        raw = f.read()
    return raw.decode("utf-8"), sha256(raw).hexdigest()


def _result_json(directory: str, slug: str):
    """A lane's result.json as a JSON value for the result row (its text when it is not JSON)."""
    import json

    from psycopg.types.json import Jsonb

    from .ledger import LANES, MARKS, RESULT

    try:
        with open(os.path.join(directory, LANES, slug, MARKS, RESULT), "rb") as f:
            raw = f.read(1 << 20)
        body = json.loads(raw)
    except (OSError, ValueError):
        body = None
    return Jsonb(body if isinstance(body, dict) else {"status": "finished", "migrated_text": repr(body)})

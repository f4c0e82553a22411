"""``storm-queue migrate DIR URL``: carry a directory storm into an empty
database, every line of its log with its seq and chain, and record on the
directory a last line naming where it went."""

from __future__ import annotations

import os

from ..core import config, fold
from ..core.errors import InitRefused, NotHere, StormError
from ..core.framing import sha256
from ..core.records import dataclass
from ..roots import must_be_directory, shown, without_password
from ..store.directory.log import reader
from ..store.directory.store import Directory
from ..store.postgres import driver
from ..store.postgres.connect import _words, connect, insert_state, write_head
from ..store.postgres.queries import q, schema, schema_version
from ..store.postgres.rows import lane_arrays
from ..store.postgres.unicode import write_unprintable
from ..store.postgres.version import BOUNDARY
from ..wall import now

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
    carried: tuple[str, ...] = ()


#: what ``migrate`` says it carried when the directory had an UNATTENDED file
CARRIED_UNATTENDED = "UNATTENDED, as [runner] unattended = true in the declaration"


def migrate(directory: str, url: str, env: Mapping[str, str], wait: float = 30.0) -> Migrated:
    """Carry the directory storm at ``directory`` into the empty database
    ``url`` (the directory's operator only): lanes, ledgers, results,
    leases, the declaration and every line of its log with its seq and
    chain; then record on the directory a last line naming where it went.
    ``NoStorm`` (exit 2) when ``directory`` is a URL: the two swapped."""
    from ..core.errors import Refused, UnknownOrder
    from ..store.directory import accounts, ledger, queuefile
    from ..store.directory.log import lock, writer
    from ..store.postgres.policy import write_policy

    must_be_directory(directory)
    src = Directory(directory, env, wait)
    who, op = accounts.caller(src.env), accounts.owner(directory)
    decl = src.declaration()
    verdict = accounts.judge(who, op, decl, None, operator_only=True)
    if not verdict.admitted:
        raise Refused(verdict.refusal.code, f"{verdict.refusal.message}; nothing was migrated", 1, False)
    if decl.log_error:
        raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; nothing was migrated")
    log_path = src.upkeep.log_file(decl)  # a file: its log_error was refused above
    declared = _declaration_text(directory, decl)
    carried: tuple[str, ...] = ()
    if ledger.read(directory).unattended and not decl.runner.unattended:
        text = with_unattended(declared[0])
        if text is None:
            raise NotHere("the directory has UNATTENDED, and storm.toml's [runner] table is written in a form migrate "
                          "cannot add unattended = true to: add it there by hand, then migrate again; nothing was migrated")
        declared, carried = (text, sha256(text.encode("utf-8")).hexdigest()), (CARRIED_UNATTENDED,)
    conn = connect(url)
    try:
        with lock.held(log_path, wait, may_create=True):
            with conn.transaction():  # (a second migrate or init waits on the schema's name, then is refused)
                role = conn.execute(q("session_user")).fetchone()[0]
                if conn.execute(q("storm_exists")).fetchone():
                    raise InitRefused(f"the database {shown(url)} already holds a storm; migrate needs an empty one; "
                                      "nothing was migrated")
                conn.execute(schema())
                insert_state(conn, 0, None, fold.EMPTY)  # the head the first line follows (the insert check moves it)
                batch: list[tuple[int, bytes]] = []

                def each(line: bytes, event: dict[str, Any]) -> None:
                    batch.append((event["seq"], line))
                    if len(batch) >= 1000:
                        flush()

                def flush() -> None:
                    with conn.cursor() as cur:
                        cur.execute(q("insert_events"), ([seq for seq, _ in batch], [line for _, line in batch]))
                    batch.clear()

                log = reader.read(log_path, use_checkpoint=False, each=each)
                if log.state.moved_to:
                    raise NotHere(f"this storm already moved to {shown(log.state.moved_to)}; nothing was migrated")
                flush()
                at = now()
                body = {"action": "migrate", "to": without_password(url), **({"carried": list(carried)} if carried else {})}
                if log.torn:
                    raise NotHere("the log ends in a torn write: make one request there first (it repairs it), then migrate")
                queue = queuefile.read(os.path.join(directory, "queue.txt"))
                led = ledger.read(directory)
                conn.execute(q("insert_migrated_storm"), (role, at, *declared))
                write_policy(conn, declared[0])
                if schema_version() >= BOUNDARY:
                    write_unprintable(conn)
                with conn.cursor() as cur:
                    cur.execute(q("insert_lanes"), lane_arrays((lane.slug, lane.issue, lane.deps) for lane in queue.lanes))
                    cur.executemany(q("insert_settled"), [(s, "integrated", at) for s in sorted(led.integrated)]
                                    + [(s, "abandoned", at) for s in sorted(led.abandoned - led.integrated)])
                    cur.executemany(q("insert_result"), [(s, _result_json(directory, s)) for s in sorted(led.finished)])
                write_head(conn, log.seq, log.digest, log.state)
                left = tuple([f"queue.txt line {s.line} (skipped there)" for s in queue.skipped]
                             + [f"the running marker of {s} (no lease behind it)" for s in led.running
                                if log.state.run(s).lease is None])
            # the database holds the storm now: the directory's last line says where it went
            writer.append(reader.read(log_path), [body], at, verdict.by)
    except driver.Error as exc:
        raise StormError(f"migrate to {shown(url)} failed, nothing was migrated: {_words(exc, url)}") from None
    finally:
        conn.close()
    return Migrated(shown(url), log.seq, len(queue.lanes), left, carried)


def _declaration_text(directory: str, decl: config.Declaration) -> tuple[str | None, str | None]:
    if not decl.present:
        return None, None
    with open(os.path.join(directory, "storm.toml"), "rb") as f:
        raw = f.read()
    return raw.decode("utf-8"), sha256(raw).hexdigest()


def with_unattended(text: str | None) -> str | None:
    """The declaration TEXT (a storm.toml's, None for none) with ``[runner]
    unattended = true`` written into it, under a comment saying migrate
    carried it from the directory's UNATTENDED file, every other key as it
    was; None when TEXT is not TOML or keeps its [runner] table in a form
    (inline, dotted) this cannot safely add a key to."""
    import re
    import tomllib

    from ..core.config import read_toml

    note = "# carried by storm-queue migrate from the directory's UNATTENDED file\n"
    text = text or ""
    try:
        before = read_toml(text)
    except tomllib.TOMLDecodeError:
        return None
    runner = before.get("runner")
    header = re.search(r"^[ \t]*\[[ \t]*runner[ \t]*\][ \t]*(#[^\n]*)?$", text, re.M)
    if runner is None:
        candidate = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text else "")
        candidate += note + "[runner]\nunattended = true\n"
    elif header is None or not isinstance(runner, dict):
        return None
    else:
        start = header.end()
        following = re.search(r"^[ \t]*\[", text[start:], re.M)
        end = start + following.start() if following else len(text)
        section = text[start:end]
        if "unattended" in runner:
            section, n = re.subn(r"^([ \t]*)unattended[ \t]*=[ \t]*false\b", "\\1" + note.strip() + "\n\\1unattended = true",
                                 section, count=1, flags=re.M)
            if n != 1:
                return None
        else:
            section = "\n" + note + "unattended = true" + section
        candidate = text[:start] + section + text[end:]
    try:
        after = read_toml(candidate)
    except tomllib.TOMLDecodeError:
        return None
    before.setdefault("runner", {})["unattended"] = True
    return candidate if after == before else None


def _result_json(directory: str, slug: str):
    """A lane's result.json as a JSON value for the result row (its text when it is not JSON)."""
    from ..core.jsoncodec import loads
    from ..store.directory.ledger import LANES, MARKS, RESULT
    from ..store.postgres.rows import jsonb

    try:
        with open(os.path.join(directory, LANES, slug, MARKS, RESULT), "rb") as f:
            raw = f.read(1 << 20)
        body = loads(raw)
    except (OSError, ValueError):
        body = None
    return jsonb(body if isinstance(body, dict) else {"status": "finished", "migrated_text": repr(body)})

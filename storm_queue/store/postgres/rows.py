"""The lane, settled and result rows of a database storm, kept by a
long-lived storm object from request to request: the first read takes
every row, each later read only the rows whose ``ver`` is past the
greatest it has seen (schema.sql: every change to these rows takes the
storm's lock and a new ``ver``, so they commit in ``ver`` order). A row
deleted, or its slug changed, moves ``state.rows_gone``, and then every
row is read again. What the rows make (the lanes in ``pos`` order, the
ledgers) is rebuilt only when a row changed. And the request path's
writes of those rows (``Writes``)."""

from __future__ import annotations

from ...core.ledgers import Ledgers
from ...core.names import is_issue, is_name, why_not_issue
from ...core.queuetext import Lane, Skipped, split_deps
from ...wall import now
from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any



def jsonb(body: object):
    """``body`` as the driver sends a ``jsonb`` column's value."""
    from .driver import Jsonb

    return Jsonb(body)

def lane_arrays(lanes) -> tuple[list[str], list[str], list[str]]:
    """``insert_lanes``'s parameters for ``lanes`` (each slug, issue and
    dependencies), in their order: the slugs, the issues, and each lane's
    dependencies as a JSON array."""
    from ...core.jsoncodec import dumps

    slugs, issues, deps = [], [], []
    for slug, issue, needs in lanes:
        slugs.append(slug)
        issues.append(issue)
        deps.append(dumps(list(needs)))
    return slugs, issues, deps


def _token(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() else None


class Rows:
    """The rows as of the last read, and what they make."""

    def __init__(self) -> None:
        self.gone: int | None = None  # state.rows_gone at the last read; None: nothing read yet
        self.seen = -1  # the greatest ver read
        self.last_pos = 0  # the greatest pos of a lane read
        self.lanes: dict[str, Lane] = {}
        self.skipped: dict[str, Skipped] = {}  # lane rows that break a queue.txt line's rules (a hand edit)
        self.integrated: set[str] = set()
        self.abandoned: set[str] = set()
        self.results: dict[str, int | None] = {}
        self._ledgers: tuple[bool, Ledgers] | None = None

    def changed(self, conn: Any) -> Any:
        """A cursor of the rows changed since the last read.
        A snapshot needs only which lanes have a result, and the token a finish
        wrote there when it is a whole number, as text (``rows_changed``), so no
        JSON is parsed here."""
        return conn.execute(q("rows_changed"), {"v": self.seen})

    def read(self, conn: Any, gone: int, changed: list[tuple] | None = None) -> None:
        """Bring the rows up to what the current transaction sees, given the
        state row's ``rows_gone`` and, when already fetched, the ``changed``
        rows since the last read: only those, unless a row went since the
        last read (or there was none), then every row."""
        if gone != self.gone:
            self.__init__()
            self.gone, changed = gone, None
        if changed is None:
            changed = self.changed(conn).fetchall()
        if not changed:
            return
        self._ledgers = None
        reorder = False
        for kind, slug, text, deps, pos, ver in changed:
            self.seen = max(self.seen, ver)
            if kind == "l":
                why = unsound(slug, text, deps)
                if why is not None:  # skipped and reported, as a bad queue.txt line is: never leased, never printed raw
                    self.skipped[slug] = Skipped(pos, _as_line(slug, text, deps), why)
                    self.lanes.pop(slug, None)
                    continue
                self.skipped.pop(slug, None)
                old = self.lanes.get(slug)
                reorder = reorder or (old is not None and old.line != pos) or pos < self.last_pos
                self.lanes[slug] = Lane(slug, text, tuple(deps), pos)
                self.last_pos = max(self.last_pos, pos)
            elif kind == "s":
                self.integrated.discard(slug)
                self.abandoned.discard(slug)
                (self.integrated if text == "integrated" else self.abandoned).add(slug)
            else:
                self.results[slug] = _token(text)
        if reorder:  # a lane's place changed by hand: the run order is pos order again
            self.lanes = dict(sorted(self.lanes.items(), key=lambda item: item[1].line))

    def skipped_lines(self) -> tuple[Skipped, ...]:
        """The lane rows skipped, in their order (``pos``)."""
        return tuple(sorted(self.skipped.values(), key=lambda s: s.line))

    def ledgers(self, unattended: bool) -> Ledgers:
        """The ledgers the rows make (no running markers; ``unattended`` as declared)."""
        if self._ledgers is None or self._ledgers[0] != unattended:
            self._ledgers = (unattended, Ledgers(frozenset(self.integrated), frozenset(self.abandoned),
                                                 frozenset(self.results), {}, unattended))
        return self._ledgers[1]


def unsound(slug: object, issue: object, deps: object) -> str | None:
    """Why a lane row cannot be read as a queue.txt line could (a hand
    edit): its slug not a name, its issue not ASCII digits or '-', its
    dependencies not a list (of one dimension, no NULL) of names; None
    when it can. The server's walk skips the same rows
    (``storm_queue.lane_sound``)."""
    if not (isinstance(slug, str) and is_name(slug)):
        return "its slug is not a name"
    if not (isinstance(issue, str) and is_issue(issue)):
        return f"its issue {why_not_issue(issue)}"
    if not (isinstance(deps, list) and all(isinstance(d, str) and is_name(d) for d in deps)):
        return "its dependencies are not a list of names"
    return None


def _as_line(slug: object, issue: object, deps: object) -> str:
    """A lane row as a queue.txt line would say it (to be quoted when shown)."""
    words = [str(slug), str(issue)]
    if isinstance(deps, list) and deps:
        words.append(",".join("NULL" if d is None else str(d) for d in deps))
    elif deps is None:
        words.append("NULL")
    return " ".join(words)


class Writes:
    """A database storm's rows where a directory storm has files (its
    ``store.interface.Effects``), written in the request's transaction, so
    that they commit with its lines or not at all: no undo is needed."""

    def __init__(self, store: Any):
        self.store = store  # its connection is looked up on each write: a broken one is replaced

    def queue(self, line: str) -> None:
        rows = []
        for one in line.rstrip("\n").split("\n"):
            fields = one.split()
            rows.append((fields[0], fields[1], split_deps(fields[2]) if len(fields) > 2 else ()))
        with self.store.conn.cursor() as cur:  # in order: a lane's pos is its place
            cur.execute(q("insert_lanes"), lane_arrays(rows))

    def settle(self, slugs: str | tuple[str, ...], how: str) -> None:
        at = now()
        rows = [(slug, how, at) for slug in ((slugs,) if isinstance(slugs, str) else slugs)]
        with self.store.conn.cursor() as cur:
            cur.executemany(q("insert_settled"), rows)

    def mark_running(self, slug: str, body: dict[str, Any]) -> None:
        """A database storm keeps leases in its state row alone: no marker."""

    def unmark_running(self, slug: str, token: int | None) -> None:
        """No marker to take away (see ``mark_running``)."""

    def mark_finished(self, slug: str, body: dict[str, Any]) -> None:
        self.store.conn.execute(q("write_result"), (slug, jsonb(body)))

    def blocked_mark(self, slug: str) -> bool:
        from ...core.ledgers import is_blocked_mark

        row = self.store.conn.execute(q("read_result"), (slug,)).fetchone()
        return row is not None and is_blocked_mark(row[0])

    def unmark_blocked(self, slug: str) -> None:
        if self.blocked_mark(slug):
            self.store.conn.execute(q("delete_result"), (slug,))

    def say(self, at: str, words: str, owner_ids: tuple[int, int] | None) -> None:
        """A database storm's record is its log; there is no progress.log."""
        return None

    def tell_claim(self, claim: Any, skipped: tuple, at: str) -> list[str]:
        """The blocked rows the claim met (no whole view is made)."""
        mark_blocked(self.store.conn, claim.to_block, at)
        return []

    def declare(self, text: str, sha256: str) -> bool:
        if self.store.conn.execute(q("read_declaration_sha256")).fetchone()[0] == sha256:
            return False
        self.store.conn.execute(q("write_declaration"), (text, sha256))
        from .policy import write_policy

        write_policy(self.store.conn, text)
        return True

    def cut(self, keep_intact: bool) -> Any:
        """Never: a database's log is rows, never set aside (``reset``,
        ``reset --keep-intact`` and their dry runs alike): ``NotHere``."""
        from ...core.errors import NotHere

        raise NotHere(f"a database storm's log is rows, never set aside or begun anew (a new log is a directory "
                      f"storm's way out): the log of {self.store.root} stays as it is; storm-queue verify names the "
                      "first bad line, and the database's backup restores it; nothing was done")

    def start_over(self, body: dict[str, Any], at: str, by: str, cut: Any) -> dict[str, Any]:
        """Never (see ``cut``)."""
        return self.cut(cut.keep_intact)


def mark_blocked(conn: Any, rows: Any, at: str) -> None:
    """Mark blocked, in rows, the lanes ``rows`` (resolver rows) that wait
    on abandoned lanes (the operator's; a runner's next asks the server,
    which computes them: ``serve_decided``)."""
    from ...core.ledgers import blocked_result

    for row in rows:
        conn.execute(q("mark_blocked"), (row.slug, jsonb(blocked_result(list(row.waits_on), at))))

"""A directory storm as a reader sees it, and the hooks where a request
keeps in files what a database storm keeps in rows. ``service.storm.Storm`` adds
the requests (``requests``, ``leases``, ``ops.adopt``, ``core.halt``) and their
one path (``passage``) to it; a command that only reads, or makes one kind
of request, is served by this class, or this class and that one part
(``answer.storm``), and never loads the others' modules."""

from __future__ import annotations

import os

from ... import wall
from ...core import clock, config, fold, ledgers, logread, queuetext
from ...core.errors import Busy, RecordFailed, UnknownOrder
from ...core.framing import sha256
from ...core.lane import Snapshot
from ...core.names import as_text, quote
from ...core.outcome import Listing
from ...core.records import replace
from ...core.resolver import View, resolve
from . import declared, ledger, queuefile
from .log import reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    from ...core.runs import Claim


class Directory:
    """One storm directory, read fresh on every call: its reads, and the
    store hooks the requests of ``service.storm.Storm`` call.

    ``wait`` is how many seconds a writer waits for the writers' lock.
    """

    #: the storm is kept in files a reader may stat (the live view watches them)
    keeps_files = True

    def __init__(self, root: str, env: Mapping[str, str] | None = None, wait: float = 30.0):
        self.root = root
        self.env = dict(os.environ if env is None else env)
        self.wait = wait

    @classmethod
    def find(cls, root: str | None = None, env: Mapping[str, str] | None = None, wait: float = 30.0) -> "Directory":
        """The storm at ``root`` (else as ``roots.find_root`` finds it): a
        ``Storm`` for a directory, the store its scheme names for a URL."""
        from ...roots import opened

        return opened(cls, root, os.environ if env is None else env, wait)

    # -- reading -------------------------------------------------------

    def directory(self, command: str) -> str:
        """The storm's directory, for a command that examines its files."""
        return self.root

    def declaration(self) -> config.Declaration:
        return declared.load(self.root)

    def _known(self, decl: config.Declaration) -> None:
        """Raise ``UnknownOrder`` when storm.toml hides the log's place."""
        if decl.log_error:
            raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")

    def log_path(self, decl: config.Declaration) -> str:
        return os.path.join(self.root, decl.log)

    def _read(self, decl: config.Declaration) -> logread.LogRead:
        """The log as a reader finds it now (``UnknownOrder`` when damaged)."""
        return reader.read(self.log_path(decl))

    def _snapshot(self, log: logread.LogRead, at: str | None = None) -> Snapshot:
        """The storm as read now (or at the stamp ``at``)."""
        queue = queuefile.read(os.path.join(self.root, "queue.txt"))
        led = ledger.read(self.root)
        if not led.unattended and self.declaration().runner.unattended:  # the file, or the declared key
            led = replace(led, unattended=True)
        return Snapshot({lane.slug: lane for lane in queue.lanes}, led, log.state, at or wall.now(),
                        leased_results(self.root, led, log.state), queue.skipped,
                        (changed(os.path.join(self.root, "queue.txt")), changed(os.path.join(self.root, ledger.INTEGRATED))))

    def listing(self, decl: config.Declaration | None = None, waits: bool = True) -> Listing:
        """The storm as it will run; reads only, writes nothing. With
        ``waits``, how long each ready lane has waited (``starving``)."""
        decl = decl or self.declaration()
        self._known(decl)
        log = self._read(decl)
        snap = self._snapshot(log)
        view = resolve(snap)
        warnings = list(log.warnings)
        if decl.sources_error:
            warnings.append(f"{decl.sources_error}: every request is refused until storm.toml is fixed (see storm.toml.example)")
        if view.stale:
            warnings.append(
                "the priority lane is stale after a change to queue.txt or the ledgers; it runs as "
                "replayed, and the next request will re-derive it"
            )
        found = {}
        if waits:
            from ...core.starving import waits as waited

            found = waited(snap, view.rows, decl.starving_after, self._t)
        from ...core.lane import keepers

        return Listing(self.root, view, snap.skipped, warnings, log.state.marks, log.seq, found, decl.starving_after,
                       keepers(snap))

    def why(self, slug: str):
        """Where the lane ``slug`` stands and why, as plain data
        (``why.Why``); reads only, writes nothing."""
        from ...core import why

        decl = self.declaration()
        self._known(decl)
        log = self._read(decl)
        snap = self._snapshot(log)
        return why.explain(snap, resolve(snap), snap.skipped, as_text(slug), decl.runner)

    def history(self, each, decl: config.Declaration | None = None) -> logread.LogRead:
        """Read the whole log, oldest first, calling ``each(line, event)``
        for every line that passed the reader's checks (a line is never held
        longer than that call). Damage raises ``UnknownOrder`` after ``each``
        has seen every line before it."""
        decl = decl or self.declaration()
        self._known(decl)
        return reader.read(self.log_path(decl), use_checkpoint=False, each=each)

    def verify(self, progress: Callable[[int], None] | None = None):
        """The full audit of the priority log (see ``store.directory.log.audit``); reads only.
        ``progress`` is told the byte offset reached now and then."""
        from .log import audit

        decl = self.declaration()
        self._known(decl)
        return audit.audit(self.log_path(decl), progress)

    def next(self) -> tuple[Listing, list[str]]:
        """Decide, then (as the owner) mark blocked lanes met before the chosen
        one and say skipped lines and stray slugs once in ``progress.log``.
        Returns the listing and notes for stderr."""
        decl = self.declaration()
        listing = self.listing(decl, waits=False)
        log_path = self.log_path(decl)
        view = listing.view
        if not (self._news(view, listing.skipped, log_path) or view.to_block):
            return listing, []
        from ...service import authority

        who = authority.caller(self.env)
        op = authority.owner(self.root)
        if not authority.is_owner(who, op):
            return listing, [f"next: {who.name} is not the storm's owner ({op.name}), so blocked lanes are not marked and progress.log is not written"]
        from .log.lock import held

        try:
            with held(log_path, 0.5, may_create=True):
                return listing, self._tell(view, listing.skipped, wall.now(), log_path)
        except Busy:  # another writer is at work; the next call catches up
            return listing, ["next: the storm is busy, so blocked lanes were not marked this time"]
        except (OSError, RecordFailed) as exc:
            return listing, [f"next: side effects skipped: {exc}"]

    def _news(self, view: View, skipped: tuple[queuetext.Skipped, ...], log_path: str,
              reload: bool = False) -> list[tuple[str, str]]:
        """What ``next`` has to say once: skipped lines and stray slugs not said before."""
        said = ledger.SaidOnce(log_path).keys(reload)
        news = [
            (f"skipped {s.line} {sha256(s.text.encode('utf-8', 'replace')).hexdigest()[:16]}",
             f"queue.txt line {s.line} skipped: {quote(s.text)}: {s.why}")
            for s in skipped
        ] + [(f"stray {slug}", f"prioritised lane {slug} is stray: queue.txt no longer carries it") for slug in view.stray]
        return [(k, words) for k, words in news if k not in said]

    def _tell(self, view: View, skipped: tuple[queuetext.Skipped, ...], at: str, log_path: str) -> list[str]:
        """Under the lock, as the owner: mark blocked the lanes ``view``
        meets before the one it chose, and say what is news once in
        ``progress.log``. Returns notes for stderr; never raises."""
        try:
            for row in view.to_block:
                if ledger.has_result(self.root, row.slug):  # another next got here first
                    continue
                ledger.mark_blocked(self.root, row.slug, list(row.waits_on), at, None)
                ledger.say(self.root, at, f"next: marked {row.slug} blocked on abandoned {', '.join(row.waits_on)}", None)
            fresh = self._news(view, skipped, log_path, reload=True)
            for _, words in fresh:
                ledger.say(self.root, at, words, None)
            ledger.SaidOnce(log_path).add([k for k, _ in fresh])
        except (OSError, RecordFailed) as exc:
            return [f"next: side effects skipped: {exc}"]
        return []

    def _tell_claim(self, claim: Claim, skipped: tuple[queuetext.Skipped, ...], at: str, log_path: str) -> list[str]:
        """``_tell`` for the storm a claim decided on (its whole view)."""
        return self._tell(claim.view, skipped, at, log_path)

    # -- what a directory keeps in files and a database in rows ------------

    def _mark_running(self, slug: str, body: dict[str, Any]) -> None:
        ledger.mark_running(self.root, slug, body, None)

    def _unmark_running(self, slug: str, token: int | None) -> None:
        ledger.unmark_running(self.root, slug, token)

    def _mark_finished(self, slug: str, body: dict[str, Any]) -> Callable[[], None] | None:
        return ledger.mark_finished(self.root, slug, body, None)

    def _blocked_mark(self, slug: str) -> bool:
        """Whether the lane's result is the blocked mark ``next`` wrote."""
        return ledger.blocked_mark(self.root, slug)

    def _unmark_blocked(self, slug: str) -> Callable[[], None] | None:
        """Remove ``next``'s blocked mark (before the record); returns its undo."""
        return ledger.unmark_blocked(self.root, slug, None)

    def _settle(self, slug: str, how: str) -> None:
        """Write the lane into its ledger (before the record: a crash
        between leaves a settled lane, and a retry is a recorded no-op)."""
        queuefile.append_line(os.path.join(self.root, ledger.INTEGRATED if how == "integrated" else ledger.ABANDONED),
                              slug + "\n")

    def _say(self, at: str, words: str, owner_ids: tuple[int, int] | None) -> None:
        ledger.say(self.root, at, words, owner_ids)

    def _judge(self, decl: config.Declaration, source: str | None, operator_only: bool):
        """The verdict on the caller, the storm owner's ids when the caller
        is another account (None: the caller is the owner), and why the
        caller cannot record a line ('' when it can)."""
        from ...service import authority

        who = authority.caller(self.env)
        op = authority.owner(self.root)
        verdict = authority.judge(who, op, decl, source, operator_only=operator_only)
        owner_ids = None if authority.is_owner(who, op) else (op.uid, op.gid)
        return verdict, owner_ids, self._unrecordable(decl, who, op, self.log_path(decl)), who

    def _writing(self, log_path: str, owner_ids: tuple[int, int] | None):
        """The writers' exclusion for one request."""
        from .log import lock

        return lock.held(log_path, self.wait, may_create=owner_ids is None)

    def _queue(self, log_path: str, line: str) -> None:
        """Append a whole line to the lanes (before the record)."""
        from .log import writer

        writer.check_writable(log_path)
        queuefile.append_line(os.path.join(self.root, "queue.txt"), line)

    def _append(self, log: logread.LogRead, bodies: list[dict[str, Any]], at: str, by: str,
                owner_ids: tuple[int, int] | None) -> list[dict[str, Any]]:
        from .log import writer

        return writer.append(log, bodies, at, by, owner_ids)

    def _cache(self, write: Callable[[], Any], what: str, slug: str) -> list[str]:
        """Write a file that only caches what the log records; a failure is a note, not a failure."""
        try:
            write()
        except OSError as exc:
            return [f"the {what} of {slug} could not be written ({exc.strerror or exc}); the log's record stands"]
        return []

    @property
    def _t(self) -> float:
        """The time a request is planned at (POSIX seconds)."""
        return wall.seconds()


def changed(path: str) -> str:
    """The stamp of the file's last change ('' when it cannot be looked at)."""
    try:
        return clock.stamp(os.stat(path).st_mtime)
    except OSError:
        return ""


def leased_results(root: str, led: ledgers.Ledgers, state: fold.LaneState) -> dict[str, int | None]:
    """The tokens of the ``result.json`` files of lanes that hold a lease:
    the only results whose author matters (see ``resolver``)."""
    return ledger.result_tokens(root, [s for s, r in state.runs.items() if r.lease is not None and s in led.finished])

"""What a request changes in a directory storm beside its log lines:
queue.txt, the ledgers, the running markers and results, progress.log
(``Files``, the directory's ``store.interface.Effects``); what ``next``
marks and says once (``tell``); and the reset that keeps an unreadable
log aside and begins a new one (``Files.start_over``)."""

from __future__ import annotations

import os

from ...core import logread
from ...core.errors import NotHere, RecordFailed, UnknownOrder, WriteFailed
from ...core.framing import sha256
from ...core.names import quote
from . import ledger, queuefile
from .log import reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ...core.queuetext import Skipped
    from ...core.resolver import View
    from ...core.runs import Claim


def translated(effect: Callable[..., Any]) -> Callable[..., Any]:
    """``effect`` as the Protocol has it (``store.interface.Effects``): an
    ``OSError`` it raises is raised as ``WriteFailed``, and so is one the
    undo it returns raises; what it returns otherwise is as it was."""

    def said(*args: Any, **kw: Any) -> Any:
        try:
            out = effect(*args, **kw)
        except OSError as exc:
            raise WriteFailed.of(exc) from exc
        return translated(out) if callable(out) else out

    said.__name__, said.__doc__, said.__wrapped__ = effect.__name__, effect.__doc__, effect  # (its signature)
    return said


class Files:
    """The effects of a request on the directory ``root`` whose log is
    ``log_path``. Every one that goes before the record first checks that
    the log can be written too, so that no file outruns a line that could
    not follow it. Each raises ``WriteFailed`` for an I/O error (``translated``)."""

    def __init__(self, root: str, log_path: str):
        self.root, self.log_path = root, log_path

    def _writable(self) -> None:
        from .log import writer

        writer.check_writable(self.log_path)

    @translated
    def queue(self, line: str) -> Callable[[], None]:
        self._writable()
        return queuefile.append_line(os.path.join(self.root, "queue.txt"), line)

    @translated
    def settle(self, slugs: str | tuple[str, ...], how: str) -> Callable[[], None]:
        """The slugs one line each, in one durable write (``append_line``);
        what it returns takes them back off. A crash after this and before
        the record leaves the lanes settled: a retried ``settle SLUG`` is a
        recorded no-op, a retried batch names them (``lane_settled``)."""
        self._writable()
        text = slugs + "\n" if isinstance(slugs, str) else "".join(s + "\n" for s in slugs)
        return queuefile.append_line(os.path.join(self.root, ledger.INTEGRATED if how == "integrated" else ledger.ABANDONED),
                                     text)

    @translated
    def mark_running(self, slug: str, body: dict[str, Any]) -> None:
        ledger.mark_running(self.root, slug, body, None)

    @translated
    def unmark_running(self, slug: str, token: int | None) -> None:
        ledger.unmark_running(self.root, slug, token)

    @translated
    def mark_finished(self, slug: str, body: dict[str, Any]) -> Callable[[], None] | None:
        self._writable()
        return ledger.mark_finished(self.root, slug, body, None)

    @translated
    def blocked_mark(self, slug: str) -> bool:
        return ledger.blocked_mark(self.root, slug)

    @translated
    def unmark_blocked(self, slug: str) -> Callable[[], None] | None:
        self._writable()
        return ledger.unmark_blocked(self.root, slug, None)

    @translated
    def say(self, at: str, words: str, owner_ids: tuple[int, int] | None) -> str | None:
        if ledger.say(self.root, at, words, owner_ids):
            return None
        if owner_ids is not None and not os.path.lexists(os.path.join(self.root, ledger.PROGRESS)):
            return None  # another account never creates it
        return f"{ledger.PROGRESS} could not be written; the request is in the priority log (storm-queue log shows it)"

    @translated
    def tell_claim(self, claim: Claim, skipped: tuple[Skipped, ...], at: str) -> list[str]:
        """``tell`` of the storm the claim decided on (its whole view)."""
        return tell(self.root, claim.view, skipped, at, self.log_path)

    @translated
    def declare(self, text: str, sha256: str) -> bool:
        """Never: ``declare`` refuses a directory storm before it plans."""
        raise NotHere(f"the declaration of a directory storm is {os.path.join(self.root, 'storm.toml')}")

    @translated
    def cut(self, keep_intact: bool) -> logread.Cut:
        """What a reset would keep and lose, read now: with ``keep_intact``
        the longest prefix that verifies from line 1 (``salvage.intact``),
        else nothing; every line after it, named (``salvage.lost``)."""
        from .log import salvage

        kept = salvage.intact(self.log_path) if keep_intact else logread.LogRead(self.log_path)
        lost = salvage.lost(self.log_path, kept.length, kept.seq)
        try:
            witness = reader.read_witness(self.log_path)
        except UnknownOrder:
            witness = None
        last = kept.seq + sum(not line.torn for line in lost)
        missing = (last + 1, witness.seq) if witness is not None and witness.seq > last else ()
        return logread.Cut(keep_intact, kept, lost, _abandons(self.log_path), missing)

    @translated
    def start_over(self, body: dict[str, Any], at: str, by: str, cut: logread.Cut) -> dict[str, Any]:
        """Move the unreadable log, its witness and checkpoint aside (named
        ``.abandoned-STAMP``) and write the new log's first line. With
        ``cut.keep_intact`` the new log first holds, byte for byte, the
        prefix ``cut.kept`` (``salvage``), and the reset line, after it,
        names the file kept aside (``abandoned``), the lines kept
        (``kept``), the last kept line's digest (``kept_digest``) and the
        bytes lost (``lost``)."""
        from .log import salvage, writer

        kept = cut.kept if cut.keep_intact else None
        abandons, aside = _abandon(self.log_path, at)
        body = {**body, "abandons": abandons}
        log = logread.LogRead(self.log_path, fresh=True)
        try:
            if kept is not None:
                body.update(abandoned=aside and os.path.basename(aside), kept=kept.seq, kept_digest=kept.digest,
                            lost=abandons - kept.length)
                log = salvage.begin(self.log_path, kept, aside, at) if kept.seq else log
            event = writer.append(log, [body], at, by)[-1]
        except (OSError, writer.AppendFailed) as exc:
            if getattr(exc, "state", "nothing") != "nothing":
                raise
            now = f"the {log.seq} line(s) it kept" if log.seq else "nothing prioritised"
            raise RecordFailed(
                f"the reset kept the old log beside it as {os.path.basename(self.log_path)}.abandoned-"
                f"{at.replace(':', '')}, but the new log could not be written ({getattr(exc, 'cause', None) or exc}); "
                f"the storm now reads as one with {now}, without the reset's record; fix the cause and go on",
                recorded=False) from None
        return event


def _abandons(log_path: str) -> int:
    """The larger of the log's bytes on disk and its witnessed length."""
    size = 0
    try:
        size = os.stat(log_path, follow_symlinks=False).st_size
    except FileNotFoundError:
        pass
    witnessed = 0
    try:
        w = reader.read_witness(log_path)
        witnessed = w.length if w else 0
    except UnknownOrder:
        pass
    return max(size, witnessed)


def _abandon(log_path: str, at: str) -> tuple[int, str | None]:
    """Move the unreadable log, its witness and checkpoint aside, all or
    none (``OSError``); return the larger of the bytes on disk and the
    witnessed length, and where the log now is (None: there was none)."""
    from .fsutil import fsync_dir
    from .log.checkpoint import checkpoint_path

    abandons = _abandons(log_path)
    stamp = at.replace(":", "")
    moved: list[str] = []
    try:  # the log last: while it is in place, a reset that failed can be asked again
        for path in (checkpoint_path(log_path), reader.witness_path(log_path), log_path):
            if os.path.lexists(path):
                os.rename(path, f"{path}.abandoned-{stamp}")
                moved.append(path)
        fsync_dir(os.path.dirname(log_path) or ".")
    except OSError as exc:  # all or nothing: what was moved goes back, and the reset did not happen
        stuck = [path for path in reversed(moved) if not _put_back(f"{path}.abandoned-{stamp}", path)]
        if stuck:
            raise RecordFailed(
                f"the reset did not happen: the old log could not be set aside ({exc.strerror or exc}), and "
                f"{', '.join(os.path.basename(p) + ' stays as ' + os.path.basename(p) + '.abandoned-' + stamp for p in stuck)}"
                "; nothing was recorded: move it back, then ask again", recorded=False) from None
        raise
    return abandons, (f"{log_path}.abandoned-{stamp}" if log_path in moved else None)


def _put_back(aside: str, path: str) -> bool:
    try:
        os.rename(aside, path)
    except OSError:
        return False
    return True


def news(view: View, skipped: tuple[Skipped, ...], log_path: str, reload: bool = False) -> list[tuple[str, str]]:
    """What ``next`` has to say once: skipped lines and stray slugs not said before."""
    said = ledger.SaidOnce(log_path).keys(reload)
    found = [
        (f"skipped {s.line} {sha256(s.text.encode('utf-8', 'replace')).hexdigest()[:16]}",
         f"queue.txt line {s.line} skipped: {quote(s.text)}: {s.why}")
        for s in skipped
    ] + [(f"stray {slug}", f"prioritised lane {slug} is stray: queue.txt no longer carries it") for slug in view.stray]
    return [(k, words) for k, words in found if k not in said]


def tell(root: str, view: View, skipped: tuple[Skipped, ...], at: str, log_path: str) -> list[str]:
    """Under the lock, as the owner: mark blocked the lanes ``view`` meets
    before the one it chose, and say what is news once in
    ``progress.log``. Returns notes for stderr; never raises."""
    try:
        for row in view.to_block:
            if ledger.has_result(root, row.slug):  # another next got here first
                continue
            ledger.mark_blocked(root, row.slug, list(row.waits_on), at, None)
            ledger.say(root, at, f"next: marked {row.slug} blocked on abandoned {', '.join(row.waits_on)}", None)
        fresh = news(view, skipped, log_path, reload=True)
        said = [k for k, words in fresh if ledger.say(root, at, words, None)]
        ledger.SaidOnce(log_path).add(said)  # what could not be said is news again at the next next
    except (OSError, RecordFailed) as exc:
        return [f"next: side effects skipped: {exc}"]
    if len(said) < len(fresh):
        return [f"next: {ledger.PROGRESS} could not be written; what it would say (a skipped line, a stray slug) is "
                "said at the next next that can"]
    return []

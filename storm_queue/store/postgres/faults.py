"""What a database storm answers when the server aborts a request (a
deadlock or a serialization failure: a recorded ``reorder_conflict``) or
the connection breaks during one (whether it committed, asked of the
server). A mixin of ``database.DatabaseStorm``."""

from __future__ import annotations

from ...core.errors import RecordFailed
from ...core.outcome import Outcome
from ...wall import now
from .connect import _words, connect
from .queries import q


class Faults:
    """The answers of a request the server or the network cut short."""

    def _conflict(self, req, exc: Exception) -> Outcome:
        """Record (best effort) and answer a transaction the server aborted."""
        message = f"the database aborted the request ({_words(exc, self.url)}): nothing changed, a retry is safe"
        by, recorded = "unknown", False
        try:
            verdict, _, _, _ = self._judge(self._declaration_or_none(), req.source, False)
            by = verdict.by
            with self._writing(self.root, None):
                log = self._load()
                body = {"action": "refused", "requested": req.verb, "slug": req.slug, "code": "reorder_conflict",
                        "message": message, "authorised": verdict.admitted}
                self._append(log, [body], now(), by, None)
            recorded = True
        except Exception:  # noqa: BLE001 -- the answer stands whether or not its record could be made
            pass
        return Outcome("refused", req.verb, req.slug, by, "reorder_conflict",
                       message if recorded else f"{message} (not recorded)", recorded=recorded)

    def _lost(self, verb: str, exc: Exception) -> RecordFailed:
        """What is true after the connection broke during a request."""
        why = _words(exc, self.url)
        pending, self._pending, self._conn = self._pending, None, None
        if pending is None:
            return RecordFailed(f"the connection to {self.root} was lost before the {verb} was recorded ({why}), "
                                "so it did not happen; ask again", recorded=False)
        seq, line = pending
        try:
            conn = connect(self.url)
            try:
                row = conn.execute(q("read_line"), (seq,)).fetchone()
            finally:
                conn.close()
        except Exception:  # noqa: BLE001 -- the server is still away: say so
            return RecordFailed(f"the connection to {self.root} was lost while the {verb} committed ({why}), and the "
                                f"server cannot be asked whether line {seq} was written; check storm-queue log before "
                                "asking again", recorded=None)
        if row is not None and bytes(row[0]) == line:
            return RecordFailed(f"the connection to {self.root} was lost ({why}), but the {verb} was committed as "
                                f"line {seq}; do not ask again", recorded=True)
        return RecordFailed(f"the connection to {self.root} was lost before the {verb} committed ({why}), so it did "
                            "not happen; ask again", recorded=False)

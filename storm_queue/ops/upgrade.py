"""``storm-queue upgrade URL``: carry a database storm's schema forward to
this storm-queue's version, applying every pending migration
(``store/postgres/sql/migrations/NNNN.sql``: tables and data) and the
server's functions again (``sql/functions/``: code, not state; those the
tree no longer defines dropped) in the request's one transaction, under the storm's lock, and recording an ``upgrade`` line
that names the versions from and to. Operator only, as every request; a
storm at this version already is a recorded no-op, unless the server no
longer decides by its folded tables (written by hand: it answers a
runner "the order is unknown"), which it then folds again from the log
(``rederived``: the lines folded), recorded. Killed midway, the
transaction never commits: the storm stays at its old version, whole."""

from __future__ import annotations

from ..core.outcome import Outcome, Request, Step
from ..core.shapes import optional_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.lane import Snapshot
    from ..service.storm import Storm
    from ..store.interface import Effects


def upgrade(storm: Storm, reason: str | None = None, key: str | None = None) -> Outcome:
    """Upgrade the schema of the database storm ``storm``. On a directory
    storm, whose files have no schema, the operator is told so
    (``NotHere``, exit 2) and anyone else refused as by every request."""
    upkeep = storm.store.upkeep
    req = Request("upgrade", None, optional_text(reason), None, optional_text(key))

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step:
        was, to, withdrawn = upkeep.schema()  # under the lock, in the transaction
        body = {"action": "upgrade", "from": was, "to": to}
        if was == to and withdrawn:  # the server's tables written by hand: derived again
            out = Outcome("done", "upgrade", None, by)

            def rederive() -> None:
                body["rederived"] = upkeep.carry(was)
                out.message = (f"the schema is at version {to}; derived the server's tables again from the log's "
                               f"{body['rederived']} lines (they had been written other than by the fold)")

            return Step(out, [body], before=rederive)
        if was == to:
            body["noop"] = f"the schema is at version {to} already"
            return Step(Outcome("noop", "upgrade", None, by, message=f"nothing to do: {body['noop']}"), [body])
        return Step(Outcome("done", "upgrade", None, by, message=f"upgraded the schema from version {was} to {to}"),
                    [body], before=lambda: upkeep.carry(was))

    return storm.request(req, None, plan)

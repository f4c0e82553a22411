"""``storm-queue grant runner|reader ROLE`` and ``revoke``: the operator
admits a database role as a runner (it may claim, renew, finish and
release leases and recover expired ones, each through a function the
operator owns that decides and writes it: ``sql/functions/``; its
``idle_in_transaction_session_timeout`` and ``lock_timeout`` are set in the
storm's database, ``members.RUNNER_SETTINGS``) or as a reader (it may
read), or ends that.
Each is a recorded request; granting what is granted, or revoking what
is not, a recorded no-op; a role the server does not know, a recorded
refusal (``unknown_role``, exit 2), and so is a grant to the operator's
own role (``operator_role``, exit 2)."""

from __future__ import annotations

from ..core.lane import Refusal
from ..core.names import as_text, quote
from ..core.outcome import Outcome, Request, Step
from ..core.shapes import optional_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.lane import Snapshot
    from ..service.storm import Storm
    from ..store.interface import Effects

KINDS = ("runner", "reader")


def grant(storm: Storm, kind: str, role: str, reason: str | None = None, key: str | None = None) -> Outcome:
    """Admit the database role ``role`` as a ``kind`` (runner, reader); operator only."""
    return _membership(storm, "grant", kind, role, reason, key)


def revoke(storm: Storm, kind: str, role: str, reason: str | None = None, key: str | None = None) -> Outcome:
    """End what ``grant`` admitted ``role`` as; operator only."""
    return _membership(storm, "revoke", kind, role, reason, key)


def _membership(storm: Storm, verb: str, kind: str, role: str, reason: str | None, key: str | None) -> Outcome:
    kind, role = as_text(kind), as_text(role)
    req = Request(verb, None, optional_text(reason), None, optional_text(key), (kind, role))
    shape = None
    if kind not in KINDS:
        shape = Refusal("invalid_kind", f"{quote(kind)} is neither runner nor reader")
    upkeep = storm.store.upkeep

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        if verb == "grant" and by == f"operator:{role}":  # the tables are its own: a grant would revoke them
            return Refusal("operator_role", f"role {quote(role)} is the storm's operator: it may already do "
                           f"everything a {kind} may; grant another role")
        held = upkeep.member(role, kind)  # NotHere on a directory storm: its files' owner is who may write it
        if held is None:
            return Refusal("unknown_role", f"the database server knows no role {quote(role)}: " + (
                "create it first (CREATE ROLE ... LOGIN), then grant it" if verb == "grant" else
                "there is nothing to revoke (is the name spelled as the server has it?)"))
        body = {"action": verb, "kind": kind, "role": role}
        noop = (f"role {role} is a {kind} already" if verb == "grant" and held else
                f"role {role} is not a {kind}" if verb == "revoke" and not held else None)
        if noop is not None:
            body["noop"] = noop
            return Step(Outcome("noop", verb, None, by, message=f"nothing to do: {noop}"), [body])
        words = (f"role {role} is a {kind} of the storm now" if verb == "grant" else
                 f"role {role} is no longer a {kind} of the storm")
        out = Outcome("done", verb, None, by, message=words)

        def change() -> None:
            refused = upkeep.change_member(verb, kind, role)
            if refused:  # the grant stands; the operator is told what a role that may must run
                out.message += (f"; the operator's role may not set a runner's timeouts (that needs CREATEROLE, or a "
                                f"superuser): as a role that may, run: {' '.join(s + ';' for s in refused)}")

        return Step(out, [body], before=change)

    return storm.request(req, shape, plan)

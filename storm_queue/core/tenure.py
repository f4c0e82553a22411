"""What became of one lease: live still, or how it ended (``storm-queue
lease``, which a runner waits in beside the lane's work so that a cancel
stops the work at once, not at its next renew). Pure: a snapshot and a
lease (slug, token) in, a ``Tenure`` out.

A lease is live exactly when its holder's renew would be admitted
(``runs.holds``, the fence of renew, finish and release): a lease past its
expiry is over even before a claim takes it back. What ends a lease is
recorded in the log: a cancel (who, when, why), the holder's finish or
release, an expiry (a claim or ``recover`` took it back, or ``settle
--force`` expired it to settle the lane), the operator's ``recover
--force``; or the log that recorded it was reset. A halt does not end a
lease, nor does a ``migrate`` that carried the storm away."""

from __future__ import annotations

from .names import quote
from .records import dataclass
from .runs import holds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .lane import Snapshot

#: how a lease ends (``Tenure.ended``), each a word a script may match
ENDINGS = ("cancelled", "finished", "released", "expired", "recovered", "settled", "reset", "superseded")


@dataclass(frozen=True)
class Tenure:
    """The lease on ``slug`` under ``token``: ``ended`` None while it is
    live (its ``holder`` holds it until ``expires``), else one of
    ``ENDINGS``, ``at`` when (None when the log does not say), ``by`` who
    ended it and ``reason`` why (a cancel's), ``result`` a finish's,
    ``ledger`` where the lane is settled now; ``newer`` the token of the
    live lease another claim took on the lane since (None: none);
    ``words`` the whole answer in one line (outside text quoted)."""

    slug: str
    token: int
    ended: str | None
    words: str
    holder: str | None = None
    expires: str | None = None
    at: str | None = None
    by: str | None = None
    reason: str | None = None
    result: str | None = None
    ledger: str | None = None
    newer: int | None = None

    @property
    def line(self) -> str:
        """One line: ``live SLUG TOKEN: ...`` or ``ENDING SLUG TOKEN: ...``."""
        return f"{self.ended or 'live'} {self.slug} {self.token}: {self.words}"

    def to_json(self) -> dict:
        return {"slug": self.slug, "token": self.token, "live": self.ended is None, "ended": self.ended,
                "at": self.at, "by": self.by, "reason": self.reason, "result": self.result, "ledger": self.ledger,
                "holder": self.holder, "expires": self.expires, "newer": self.newer, "message": self.words}


def tenure(snap: Snapshot, slug: str, token: int) -> Tenure | None:
    """What became of the lease on ``slug`` under ``token`` as ``snap``
    records it; None when no such lease was ever taken (the token is past
    every one minted or seen for the lane, and not of a log that was reset)."""
    run = snap.state.run(slug)
    lease = run.lease
    ledger = "integrated" if slug in snap.ledgers.integrated else "abandoned" if slug in snap.ledgers.abandoned else None
    if holds(snap, slug, token):
        return Tenure(slug, token, None, f"held by {lease.holder} until {lease.expires}", lease.holder,
                      lease.expires, ledger=ledger)
    newer = lease.token if lease is not None and lease.token != token else None
    after = f"; {slug} is now leased to {lease.holder} under token {newer}" if newer is not None else ""
    attempt = next((a for a in reversed(run.history) if a.token == token), None)
    if lease is not None and lease.token == token:  # past its expiry: its renew is refused, and a claim takes it back
        return Tenure(slug, token, "expired", f"expired at {lease.expires} (not yet taken back); a renew is refused",
                      lease.holder, lease.expires, lease.expires, ledger=ledger)
    if attempt is None:
        if token <= snap.state.token_floor:
            return Tenure(slug, token, "reset", "the log that recorded it was reset (storm-queue reset)", ledger=ledger,
                          newer=newer)
        if token > run.token:
            return None
        return Tenure(slug, token, "superseded", f"{slug} has a newer token than {token}{after}", ledger=ledger,
                      newer=newer)
    kept = dict(holder=attempt.holder, at=attempt.ended, ledger=ledger, newer=newer)
    if attempt.end == "cancelled" and run.cancelled is not None:
        c = run.cancelled
        why = f" ({quote(c.reason)})" if c.reason else ""
        return Tenure(slug, token, "cancelled", f"by {c.by} at {c.at}{why}; {slug} is settled {ledger or 'abandoned'}"
                      f"{after}", **{**kept, "at": c.at}, by=c.by, reason=c.reason)
    if attempt.end in ("ok", "failed"):
        return Tenure(slug, token, "finished", f"finished {attempt.end} at {attempt.ended}{after}", **kept,
                      by=attempt.holder, result=attempt.end)
    if attempt.end == "released":
        return Tenure(slug, token, "released", f"released by its holder at {attempt.ended}{after}", **kept,
                      by=attempt.holder)
    if attempt.end == "recovered":
        return Tenure(slug, token, "recovered", f"ended at {attempt.ended} by the operator's recover --force{after}",
                      **kept)
    if attempt.end == "expired" and ledger is not None:
        return Tenure(slug, token, "settled", f"expired at {attempt.ended}, and {slug} is settled {ledger} "
                      f"(settle --force expires a lane's lease first){after}", **kept)
    if attempt.end == "expired":
        return Tenure(slug, token, "expired", f"expired, and was taken back at {attempt.ended}{after}", **kept)
    return Tenure(slug, token, "superseded", f"{slug} has a newer token than {token}{after}", **kept)

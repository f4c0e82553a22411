"""Settling lanes, the reviewer's act: ``settle`` of one lane, and a batch
review (``settle_batch``: every lane finished now, or the slugs of a
FILE), all or nothing. Each is a function of the storm, and its method
(``storm.KINDS``): it shapes its arguments and plans with the pure core
(``core.review``); ``passage.request`` takes it the rest of the way."""

from __future__ import annotations

from ..core.batch import counted
from ..core.lane import Refusal, Snapshot
from ..core.names import as_text, quote
from ..core.outcome import Outcome, Request, Step
from ..core.shapes import optional_text, shape_names
from .passage import DRY_RUN, cached
from .requests import kept_request, taken_back

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..core.errors import WriteFailed
    from ..store.interface import Effects
    from .storm import Storm


def settle(storm: Storm, slug: str, ledger_name: str, reason: str | None = None, source: str | None = None,
           key: str | None = None, force: bool = False, dry_run: bool = False) -> Outcome:
    """Settle a queued lane as ``integrated`` or ``abandoned``. A lane
    holding a live lease is refused (``lane_running``) unless ``force``,
    which records the lease's expiry first. With ``dry_run``, answer as the
    request would and record nothing."""
    req = Request("settle", as_text(slug), optional_text(reason), optional_text(source), optional_text(key), (as_text(ledger_name), bool(force)))
    refusal = shape_names(req.slug, (), req.source) or _ledger_refusal(req.args[0])

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        how = req.args[0]
        if snap.ledgers.settled(req.slug):
            was = "integrated" if req.slug in snap.ledgers.integrated else "abandoned"
            noop = f"{req.slug} is already {was}"
            return Step(Outcome("noop", "settle", req.slug, by, message=f"nothing to do: {noop}"),
                        [{"action": "settle", "slug": req.slug, "ledger": how, "noop": noop}])
        if req.slug not in snap.lanes:
            return Refusal("unknown_slug", f"no lane {req.slug} is queued; add it first")
        from ..core.review import held

        bad = held(((0, req.slug),), snap, force)
        if bad:
            return bad[0].refusal
        lease = snap.state.run(req.slug).lease
        words = f"{req.slug} is {how}" + (f"; its lease (token {lease.token}) was expired first" if lease else "")
        return _settling(fx, Outcome("done", "settle", req.slug, by, message=words, token=lease.token if lease else None),
                         snap, (req.slug,), how, {}, kept)

    kept: list[WriteFailed] = []
    return _kept_settle(storm, req, refusal, plan, dry_run, kept, req.args[0])

def settle_batch(storm: Storm, ledger_name: str, text: str | None = None, name: str = "-", reason: str | None = None,
                 source: str | None = None, key: str | None = None, force: bool = False,
                 dry_run: bool = False) -> Outcome:
    """A batch review: settle at once, as ``integrated`` or ``abandoned``,
    every lane finished now (``text`` None: ``settle --finished``), or the
    slugs of ``text``, one a line, read from ``name`` (``-`` for standard
    input: ``settle --from FILE``), each of which must be finished now.
    All or nothing (``core.review`` says what refuses a batch): one refusal
    line names the first bad line, and nothing is settled. Admitted, each
    lane is recorded as ``settle`` records one, every line with the reason,
    in one append (one transaction on a database), the key on the last;
    the ledger gains them in one write. With no lane finished,
    ``--finished`` answers that nothing is to be done and records nothing,
    as a claim that leases nothing does. With ``dry_run``, answer as the
    request would (``Outcome.settled``: the lanes it would settle) and
    record nothing."""
    from ..core import batch, review

    how = as_text(ledger_name)
    found = None if text is None else review.shape(as_text(text))
    where = batch.source_name(name)
    what = ("finished",) if found is None else ("from", found.fields)
    req = Request("settle", None, optional_text(reason), optional_text(source), optional_text(key), (how, bool(force), what))
    refusal = shape_names(None, (), req.source) or _ledger_refusal(how)
    if refusal is None and found is not None and (found.bad or not found.slugs):
        refusal = batch.refusal(found.bad, where, "settled", "slug", "one slug a line")

    def plan(snap: Snapshot, by: str, fx: Effects) -> Step | Refusal:
        if found is None:
            lines = tuple((0, slug) for slug in review.finished(snap))
            if not lines:
                return Step(Outcome("noop", "settle", None, by, message="nothing to do: no lane is finished (awaiting "
                                    "review); nothing was recorded", settled=[]), [])
        else:
            bad = review.lookups(found, snap)
            if bad:
                return batch.refusal(bad, where, "settled")
            lines = found.slugs
        bad = review.held(lines, snap, force)
        if bad:
            return batch.refusal(bad, where, "settled")
        slugs = tuple(slug for _, slug in lines)
        out = Outcome("done", "settle", None, by, message=counted("settled", slugs, f" as {how}"), settled=list(slugs))
        return _settling(fx, out, snap, slugs, how, {} if req.reason is None else {"reason": req.reason}, kept)

    kept: list[WriteFailed] = []
    out = _kept_settle(storm, req, refusal, plan, dry_run, kept, how)
    if out.dry_run and out.outcome == "done":
        out.message = f"{counted('would settle', out.settled, f' as {how}')} ({DRY_RUN})"
    return out


def _kept_settle(storm: Storm, req: Request, refusal: Refusal | None, plan: Callable[..., Step | Refusal],
                 dry_run: bool, kept: list[WriteFailed], how: str) -> Outcome:
    """``kept_request`` of a settle: the ledger ``how`` may carry its lanes."""
    return kept_request(storm, req, refusal, plan, kept, f"{how}.txt may still carry (some of) the lanes it settles",
                        "asking again", dry_run)


def _ledger_refusal(how: str) -> Refusal | None:
    if how in ("integrated", "abandoned"):
        return None
    return Refusal("invalid_ledger", f"ledger {quote(how)} is neither integrated nor abandoned")


def _settling(fx: Effects, out: Outcome, snap: Snapshot, slugs: tuple[str, ...], how: str,
              extra: dict[str, Any], kept: list[WriteFailed]) -> Step:
    """The step that settles ``slugs`` as ``how``: for each, its lease's
    expiry first when it holds one, then its ``settle`` line (with
    ``extra``); the ledger written before the record (taken back when the
    record is not made), and the running markers of the leases it expired
    taken away after it."""
    events: list[dict[str, Any]] = []
    ended: list[tuple[str, int]] = []
    for slug in slugs:
        lease = snap.state.run(slug).lease
        if lease is not None:
            # when it expired (as the claim's expiries write it), or now, for a live lease that --force ends
            events.append({"action": "expire", "slug": slug, "token": lease.token,
                           "expired": min(lease.expires, snap.now)})
            ended.append((slug, lease.token))
        events.append({"action": "settle", "slug": slug, "ledger": how, **extra})

    def after(_: list[dict[str, Any]]) -> list[str]:
        notes: list[str] = []
        for slug, token in ended:
            notes += cached(lambda: fx.unmark_running(slug, token), "running marker", slug)
        return notes

    return Step(out, events, before=lambda: taken_back(lambda: fx.settle(slugs, how), kept), own=-1,
                after=after if ended else None)

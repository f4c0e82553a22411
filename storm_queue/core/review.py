"""A batch review: the lanes ``settle --finished`` or ``settle --from
FILE`` settles at once, all or nothing. Pure: the text and the snapshot
come in; the slugs to settle, or every bad line with its code and why,
come back.

``--from FILE`` holds one slug a line (blank lines and ``#`` comments
ignored, a byte order mark and CRLF allowed, as in ``queue.txt``). What
makes a line bad, in the order a request judges it:

- its shape (``shape``, before authority and the lock): a line that is
  not one name (``invalid_slug``), or a slug listed twice
  (``duplicate_slug``, naming the first line); a FILE with no slug at all
  is refused too (``empty_batch``);
- against the storm (``lookups``, under the lock): a slug the storm does
  not know (``unknown_slug``), one settled already (``lane_settled``), or
  one that is not finished now (``not_finished``, naming its state): a
  batch review settles what has run and awaits review, nothing else.

``--finished`` takes every lane finished now (``finished``), in run
order; none finished is an answer, not a refusal (nothing to settle)."""

from __future__ import annotations

from .batch import Bad
from .lane import Refusal
from .names import is_name, quote, why_not_name
from .queuetext import lines
from .records import dataclass
from .resolver import decided, in_run_order, resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .lane import Snapshot


@dataclass(frozen=True)
class Slugs:
    """The slugs of a review's FILE in order, each with its line; its lines
    bad in themselves; and the words of every line that is not blank nor a
    comment (what a key's fingerprint covers: the FILE as written,
    comments aside)."""

    slugs: tuple[tuple[int, str], ...]
    bad: tuple[Bad, ...]
    fields: tuple[tuple[str, ...], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(slug for _, slug in self.slugs)


def shape(text: str) -> Slugs:
    """The slugs ``text`` holds, one a line, and its lines bad in themselves."""
    slugs: list[tuple[int, str]] = []
    bad: list[Bad] = []
    seen: dict[str, int] = {}
    fields: list[tuple[str, ...]] = []
    for number, _, words in lines(text):
        fields.append(tuple(words))
        slug = words[0]
        if len(words) > 1:
            bad.append(Bad(number, Refusal("invalid_slug", f"{quote(' '.join(words))} is not one slug: give one "
                                           "slug a line")))
        elif not is_name(slug):
            bad.append(Bad(number, Refusal("invalid_slug", f"slug {quote(slug)} is not a name: {why_not_name(slug)}")))
        elif slug in seen:
            bad.append(Bad(number, Refusal("duplicate_slug", f"slug {slug} is listed twice: first on line {seen[slug]}")))
        else:
            seen[slug] = number
            slugs.append((number, slug))
    return Slugs(tuple(slugs), tuple(bad), tuple(fields))


def finished(snap: Snapshot) -> tuple[str, ...]:
    """Every lane finished now (it has run and awaits review), in run order."""
    return in_run_order(snap, decided(snap).finished)


def lookups(slugs: Slugs, snap: Snapshot) -> tuple[Bad, ...]:
    """The lines of ``slugs`` (good in shape) that the storm refuses: a slug
    it does not know, one settled, one not finished now (``held`` judges
    the finished ones' leases)."""
    done = decided(snap).finished
    led = snap.ledgers
    rows = None
    bad = []
    for number, slug in slugs.slugs:
        if slug in done:
            continue
        if led.settled(slug):
            was = "integrated" if slug in led.integrated else "abandoned"
            bad.append(Bad(number, Refusal("lane_settled", f"{slug} is already {was}; take its line out of the batch")))
        elif slug not in snap.lanes:
            bad.append(Bad(number, Refusal("unknown_slug", f"no lane {slug} is queued")))
        else:
            if rows is None:
                rows = {r.slug: r for r in resolve(snap).rows}
            row = rows[slug]
            bad.append(Bad(number, Refusal("not_finished", f"{slug} is not finished: it is {row.state} "
                                           f"({row.status}); a batch review settles only lanes that ran and await "
                                           "review (storm-queue settle SLUG LEDGER settles one lane whatever its state)")))
    return tuple(bad)


def held(slugs: tuple[tuple[int, str], ...], snap: Snapshot, force: bool) -> tuple[Bad, ...]:
    """The lanes of ``slugs`` (each with its line, 0 for none) that still
    hold a live lease, unless ``force``: a lane whose ``result.json`` its own
    lease wrote before its finish was recorded (a finish cut short). A
    single ``settle`` refuses such a lane too (``lane_running``)."""
    if force:
        return ()
    bad = []
    for number, slug in slugs:
        lease = snap.state.run(slug).lease
        if lease is not None and lease.expires > snap.now:
            bad.append(Bad(number, Refusal("lane_running", f"{slug} holds a live lease (token {lease.token}, "
                                           f"{lease.holder}, until {lease.expires}); let it finish, or settle it "
                                           "with --force, which expires the lease first")))
    return tuple(bad)

"""Pure: where one lane stands and why, as plain data. It reads nothing; it
takes the snapshot, the resolved view and the skipped ``queue.txt`` lines,
and gathers what the resolver and the fold already know about the slug."""

from __future__ import annotations

from .fold import NO_RUN, Act, Run
from .lane import needed_by
from .names import is_name, why_not_name
from .records import dataclass
from .resolver import CYCLE, HELD, MARKER, QUARANTINED, READY, RUNNING, SETTLED, _status, cycle_words, cycles, running

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import Policy
    from .fold import Mark, Waiver
    from .lane import Snapshot
    from .queuetext import Skipped
    from .resolver import View
    from .runs import Slots

#: the states ``why`` adds to the resolver's: a prioritised slug queue.txt
#: no longer carries, a slug only a skipped line names, a slug nothing
#: knows, and text that is not a name at all
STRAY, SKIPPED, UNKNOWN, INVALID = "stray", "skipped", "unknown", "invalid"


@dataclass(frozen=True)
class Dependency:
    """One dependency of the lane, its state and the state in words."""

    slug: str
    state: str
    status: str
    satisfied: bool
    waived: bool = False  # the operator waived it: it counts as integrated for this lane


@dataclass(frozen=True)
class Why:
    """Everything ``storm-queue why`` says about one slug.

    ``state`` is a resolver state (``ready``, ``waiting``, ...) or one of
    ``stray``, ``skipped``, ``unknown``, ``invalid``; ``status`` says it in
    words. ``position`` is the place in run order (None when the lane is not
    to run). ``ahead`` are the lanes still to start before it (not one
    quarantined or held: it starts nothing until unparked or unheld), ``running`` the lanes
    running now. ``mark`` is the recorded request that put it in
    the priority lane; ``named`` says whether it was prioritised by name
    (else it was pulled forward for ``mark.slug``); ``needed_by`` are the
    prioritised lanes that require it.

    What runners did with it: ``how`` it is running (``lease``, ``orphan``,
    ``marker``, or '' when it is not), the token its running marker carries
    (``marker_token``, for a marker), its ``run`` as the log folds it
    (lease, attempts spent, their history, quarantine, who last unparked
    it, schedule, the hold in force: who held it, when and why), the
    ``budget`` of attempts ``storm.toml [runner] attempts`` gives (None when
    not known), and whether its ``not_before`` time has come (``due``).
    """

    slug: str
    state: str
    status: str
    issue: str | None = None
    position: int | None = None
    of: int = 0
    ahead: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    deps: tuple[Dependency, ...] = ()
    waits_on: tuple[str, ...] = ()
    prioritised: bool = False
    named: bool = False
    mark: Mark | None = None
    needed_by: tuple[str, ...] = ()
    in_queue: bool = False
    skipped: tuple[Skipped, ...] = ()
    is_next: bool = False
    decision: str = ""
    stale: bool = False
    how: str = ""
    marker_token: int | None = None
    run: Run = NO_RUN
    budget: int | None = None
    due: bool = True
    #: the operator's waivers of its dependencies, by dependency (issue 12)
    waivers: tuple[tuple[str, Waiver], ...] = ()
    #: the operator's halt in force (who, when, why), None when the storm is not halted
    halt: Act | None = None
    #: every one of ``[runner] slots`` held while ``next`` answers run (``runs.Slots``): a claim answers wait
    slots: Slots | None = None
    #: where the storm moved (``migrate``), as printed; '' while it is kept here
    moved: str = ""
    #: what every reader of the storm says beside its answer (a torn tail ignored, a declaration refusing requests)
    warnings: tuple[str, ...] = ()

    @property
    def waits_for_slot(self) -> bool:
        """Whether it is what runs next, once a slot frees (every slot is held)."""
        return self.is_next and self.slots is not None

    @property
    def known(self) -> bool:
        return self.state not in (UNKNOWN, INVALID)

    @property
    def exit_code(self) -> int:
        """0 when the storm knows the slug, 2 when it does not (or it is not a name)."""
        return 0 if self.known else 2


def _first_word(text: str) -> str:
    words = text.split()
    return words[0] if words else ""


def _dependency(snap: Snapshot, rows: dict, dep: str, waived: bool = False) -> Dependency:
    if waived:
        found = _dependency(snap, rows, dep)
        return Dependency(dep, found.state, found.status, True, True)
    led = snap.ledgers
    row = rows.get(dep)
    if row is not None:
        return Dependency(dep, row.state, row.status, dep in led.integrated)
    if dep in led.integrated:
        return Dependency(dep, SETTLED, "integrated", True)
    if dep in led.abandoned:
        return Dependency(dep, SETTLED, "abandoned", False)
    if dep in led.finished:
        return Dependency(dep, "finished", "finished, awaits review", False)
    return Dependency(dep, UNKNOWN, "unknown to queue.txt and the ledgers", False)


def explain(snap: Snapshot, view: View, skipped: tuple[Skipped, ...], slug: str, policy: Policy | None = None) -> Why:
    """Where ``slug`` stands in the storm ``snap`` resolves to ``view``, and
    why; ``policy`` (the declaration's ``[runner]``) gives the attempt budget."""
    if not is_name(slug):
        return Why(slug, INVALID, f"not a name: {why_not_name(slug)}", decision=view.decision)
    lines = tuple(s for s in skipped if _first_word(s.text) == slug)
    state = snap.state
    mark = state.marks.get(slug)
    run = state.run(slug)
    how = running(snap, slug)
    common = dict(skipped=lines, decision=view.decision, stale=view.stale, mark=mark, halt=view.halt,
                  prioritised=slug in state.lane, named=slug in state.named,
                  running=tuple(r.slug for r in view.rows if r.state == RUNNING),
                  run=run, budget=None if policy is None else policy.attempts,
                  due=run.not_before is None or bool(snap.now and run.not_before <= snap.now),
                  waivers=tuple(state.waivers.get(slug, {}).items()))
    rows = {r.slug: r for r in view.rows + view.settled}
    row = rows.get(slug)
    if row is None:
        led = snap.ledgers
        if slug in view.stray:
            return Why(slug, STRAY, "prioritised, but queue.txt no longer carries it, so it never runs", **common)
        if led.settled(slug):
            word = "integrated" if slug in led.integrated else "abandoned"
            return Why(slug, SETTLED, f"{word}; queue.txt no longer carries it", **common)
        if lines:
            return Why(slug, SKIPPED, "only a skipped queue.txt line names it, so it never runs", **common)
        if slug in led.finished:
            return Why(slug, "finished", "finished, awaits review; queue.txt does not carry it", **common)
        if how:
            return Why(slug, RUNNING, f"{_status(snap, slug, RUNNING, ())}; queue.txt does not carry it", how=how,
                       marker_token=_marker_token(snap, slug, how), **common)
        if slug in led.running:
            return Why(slug, RUNNING, "running now; queue.txt does not carry it", **common)
        return Why(slug, UNKNOWN, "the storm does not know it: queue.txt, the ledgers and the priority lane do not carry it", **common)
    ahead = ()
    if row.position:
        ahead = tuple(r.slug for r in view.rows[: row.position - 1] if r.state not in (RUNNING, "finished", QUARANTINED, HELD))
    status = row.status if row.state != CYCLE else cycle_words(snap, cycles(snap)[slug], every=True)  # all its members
    return Why(
        slug, row.state, status, issue=row.issue, position=row.position or None, of=len(view.rows),
        ahead=ahead, deps=tuple(_dependency(snap, rows, d, d in state.waivers.get(slug, ())) for d in row.deps), waits_on=row.waits_on,
        needed_by=tuple(n for n in needed_by(snap, slug) if n != slug) if slug in state.lane else (),
        in_queue=True, is_next=row.state == READY and view.decision == f"run {slug} {row.issue}",
        how=row.running, marker_token=_marker_token(snap, slug, row.running), **common,
    )


def _marker_token(snap: Snapshot, slug: str, how: str) -> int | None:
    """The token a running marker with no lease carries (None: none, or not such a marker)."""
    return snap.ledgers.running.get(slug) if how == MARKER else None

"""The fold: one pure step from a lane state and a log event to the next
state. Replay is ``reduce(apply, events, EMPTY)``, done in place by ``Fold``.

Every counter a runner depends on (fencing tokens, attempts, leases,
quarantine, schedules, idempotency keys) is folded here from the log and
nowhere else: the running marker a claim leaves in the lane is a cache."""

from __future__ import annotations

from .records import dataclass, field, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Mapping


@dataclass(frozen=True)
class Mark:
    """The recorded request that last put a slug in the lane or named it:
    its ``seq``, time, principal, action, the slug it named and its reason."""

    seq: int
    at: str
    by: str
    action: str
    slug: str
    reason: str | None


@dataclass(frozen=True)
class Act:
    """An operator's recorded act that is not about the lane's order (a
    halt, an unpark): the line's ``seq``, its time, the principal and the
    reason given."""

    seq: int
    at: str
    by: str
    reason: str | None

    def words(self, done: str) -> str:
        """``DONE by WHO at TIME, reason "WHY"``: the act in words, its
        outside text escaped and the reason quoted (``names``)."""
        from .names import printable, quote

        words = f"{done} by {printable(self.by)} at {printable(self.at)}"
        return words if self.reason is None else f"{words}, reason {quote(self.reason)}"


def act(event: Mapping) -> Act:
    """The ``Act`` a recorded event makes."""
    return Act(event.get("seq", 0), event.get("at", ""), event.get("by", ""), event.get("reason"))


@dataclass(frozen=True)
class Lease:
    """A live claim on a lane: who holds it, under which fencing token,
    since when, and until when unless renewed."""

    holder: str
    token: int
    by: str
    claimed: str
    expires: str
    ttl: int = 0  # seconds it was claimed or last renewed for


@dataclass(frozen=True)
class Attempt:
    """One claim of a lane and how it ended: ``ok``, ``failed``, ``expired``,
    ``recovered``, ``released`` (its holder gave it back), ``cancelled``
    (the lane was cancelled while it ran), or None while it is held."""

    token: int
    holder: str
    at: str
    end: str | None = None
    ended: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Run:
    """What runners have done with one lane: the highest fencing ``token``
    minted (or observed on a marker) for it, its live ``lease``, the
    ``attempts`` spent since it was last unparked, every attempt ever made
    (``history``, never erased), when it was ``quarantined`` (None when it
    is not) and the time it may start, ``not_before`` (None: any time)."""

    token: int = 0
    lease: Lease | None = None
    attempts: int = 0
    history: tuple[Attempt, ...] = ()
    quarantined: str | None = None
    not_before: str | None = None
    #: the operator's last unpark of the lane: who, when and why (None: never unparked)
    unparked: Act | None = None
    #: the cancel that settled the lane abandoned: who, when and why (None: never cancelled)
    cancelled: Act | None = None
    #: the hold in force: who held the lane, when and why (None: not held); a held lane is never started
    held: Act | None = None


NO_RUN = Run()


#: an idempotency key is remembered for at least this many days after the
#: request it bound (a retry after a timeout comes within minutes); older
#: keys are forgotten at the log's next day, so keys cost memory and
#: checkpoint space for a week of requests, not for the log's whole life
KEY_DAYS = 7


@dataclass(frozen=True)
class Keyed:
    """The first recorded request a principal made under an idempotency
    key: the fingerprint of its arguments and the event that answered it."""

    fingerprint: str
    seq: int
    event: Mapping

    @property
    def day(self) -> str:
        return str(self.event.get("at", ""))[:10]


@dataclass(frozen=True)
class Waiver:
    """The operator's recorded word that a lane may run although one of its
    dependencies is not integrated: the ``waive`` line's ``seq``, time,
    principal and reason."""

    seq: int
    at: str
    by: str
    reason: str | None


@dataclass(frozen=True)
class LaneState:
    """The priority lane as the log says it: ``lane`` in entry order, the
    ``named`` slugs (prioritised by name, not since un-bumped), and for each
    slug in the lane the ``marks`` of the request that put it there; the
    ``runs`` of lanes runners have touched; the idempotency ``keys`` by
    principal, then key; the operator's ``halt`` while one is in force."""

    lane: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    marks: Mapping[str, Mark] = field(default_factory=dict)
    runs: Mapping[str, Run] = field(default_factory=dict)
    keys: Mapping[str, Mapping[str, Keyed]] = field(default_factory=dict)
    keys_day: str = ""  # the log's day (YYYY-MM-DD) on which old keys were last forgotten
    #: every fencing token of an abandoned log is below this (a reset records
    #: the bytes it abandoned, and a token never exceeds its log's lines)
    token_floor: int = 0
    #: where the storm went (a database URL, password hidden) when it was migrated: '' while it lives here
    moved_to: str = ""
    #: the live waivers: lane -> dependency -> the ``waive`` that waived it (issue 12)
    waivers: Mapping[str, Mapping[str, Waiver]] = field(default_factory=dict)
    #: per slug, the time of the last recorded event that may have made it (or the lanes that
    #: depend on it) ready: queued by ``add`` or ``push``, integrated, unparked, unheld, or given a waiver
    touched: Mapping[str, str] = field(default_factory=dict)
    #: the halt in force (who halted the storm, when and why), None while runners may start lanes
    halt: Act | None = None
    #: how many lines the log records, by action (a refusal: the action it refused) and outcome (``outcome``)
    requests: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def run(self, slug: str) -> Run:
        return self.runs.get(slug, NO_RUN)


EMPTY = LaneState()


class Fold:
    """The fold as an accumulator: ``step`` applies one event in place, in
    time proportional to what the event names (not to the lane's length),
    so a replay of a million lines over a long lane stays linear. ``apply``
    and ``replay`` are built on it, so the rules live in ``step`` alone."""

    def __init__(self, start: LaneState = EMPTY):
        self.start = start
        self.lane = dict.fromkeys(start.lane)
        self.named = dict.fromkeys(start.named)
        self.marks = {s: m for s, m in start.marks.items() if s in self.lane}
        self.runs = dict(start.runs)
        self.keys = {by: dict(keys) for by, keys in start.keys.items()}
        self.keys_day = start.keys_day
        self.token_floor = start.token_floor
        self.moved_to = start.moved_to
        self.halt = start.halt
        self.waivers = {slug: dict(deps) for slug, deps in start.waivers.items()}
        self.touched = dict(start.touched)
        self.requests = {action: dict(counts) for action, counts in start.requests.items()}
        self.changed = False

    def step(self, event: Mapping) -> None:
        """Fold one event; refusals, resets and repairs change no lane (a
        refusal made under a key still binds the key); an ``adopt`` that is
        not a no-op sets the lane to the one it adopted."""
        action = event["action"]
        self.changed = True
        counts = self.requests.setdefault(event.get("requested", action) if action == "refused" else action, {})
        how = outcome(event)
        counts[how] = counts.get(how, 0) + 1
        if self.keys and str(event.get("at", ""))[:10] > self.keys_day:
            self._forget(str(event["at"])[:10])
        if "key" in event:
            self._bind(event)
        if action in _LANE_ACTIONS:  # most lines
            if action == "push":
                self._touch(event, action)
            self.changed = True
            self._shift(event)
            lane, marks = self.lane, self.marks
            named = event["slug"]
            if action == "unbump":
                self.named.pop(named, None)
            elif not event.get("noop"):
                if named not in self.named and named in lane:
                    marks[named] = event
                self.named.setdefault(named)
                if "not_before" in event:
                    self.runs[named] = replace(self.runs.get(named, NO_RUN), not_before=event["not_before"])
            return
        if action == "refused":
            return
        if action in _TOUCHING:
            self._touch(event, action)
        if action in _RUNNER:
            self.changed = True
            self._run(event)
        elif action == "waive":
            self.changed = True
            self._waive(event)
        elif action == "reset":
            self.changed = True
            self.token_floor = max(self.token_floor, event.get("abandons", 0))
        elif action == "migrate":
            self.changed = True
            self.moved_to = event["to"]
        elif action in _HALT_ACTIONS and not event.get("noop"):
            self.changed = True
            self.halt = act(event) if action == "halt" else None
        elif action == "adopt" and not event.get("noop"):
            self.changed = True
            self._adopt(event)

    def _adopt(self, event: Mapping) -> None:
        """The earlier tool's lane, taken over: exactly the adopted rows in
        their order, each marked with the ``by`` and ``at`` of the old line
        that put it there (under this event's ``seq``, as an ``adopt``)."""
        rows = event["lane"]
        self.lane = dict.fromkeys(row["slug"] for row in rows)
        self.named = dict.fromkeys(row["slug"] for row in rows if row["named"])
        self.marks = {row["slug"]: Mark(event.get("seq", 0), row["at"], row["by"], "adopt", row["for"], None)
                      for row in rows}

    def _shift(self, event: Mapping) -> None:
        """Apply ``moved`` and ``removed``. A slug's mark is the event that
        first gave it one, made a ``Mark`` by ``state`` (most marks are
        dropped again before then)."""
        lane, marks = self.lane, self.marks
        moved, removed = event.get("moved", ()), event.get("removed", ())
        if removed:
            if moved:
                lane.update(dict.fromkeys(moved))  # each keeps its place if it has one
            for slug in removed:
                lane.pop(slug, None)
                marks.pop(slug, None)
            for slug in moved:
                if slug not in marks and slug in lane:
                    marks[slug] = event
        else:  # the same, in one pass: every moved slug ends in the lane
            for slug in moved:
                if slug not in lane:
                    lane[slug] = None
                if slug not in marks:
                    marks[slug] = event

    def _waive(self, event: Mapping) -> None:
        """A ``waive`` (``undo``: the end of a waiver) changes the waivers
        unless it is a no-op; either way the lane takes its re-derivation."""
        self._shift(event)
        if event.get("noop"):
            return
        slug, dep = event["slug"], event["dep"]
        if event["undo"]:
            deps = self.waivers.get(slug, {})
            deps.pop(dep, None)
            if not deps:
                self.waivers.pop(slug, None)
        else:
            self.waivers.setdefault(slug, {})[dep] = Waiver(event.get("seq", 0), event.get("at", ""), event.get("by", ""),
                                                           event.get("reason"))

    def _touch(self, event: Mapping, action: str) -> None:
        """Note when a slug was queued, integrated, unparked or given a waiver."""
        if event.get("noop") or (action in ("push", "add") and not event.get("appended")):
            return
        if action == "settle" and event["ledger"] != "integrated":
            return
        if action == "waive" and event["undo"]:
            return
        self.changed = True
        self.touched[event["slug"]] = event.get("at", "")

    def _bind(self, event: Mapping) -> None:
        """An event made under an idempotency key binds it (the first one does)."""
        key = event["key"]
        if key is None:
            return
        self.changed = True
        keys = self.keys.setdefault(event["by"], {})
        if key not in keys:  # lists kept as tuples, as a checkpoint gives them back
            body = {k: tuple(v) if isinstance(v, list) else v for k, v in event.items()}
            keys[key] = Keyed(event.get("fingerprint", ""), event.get("seq", 0), body)

    @staticmethod
    def _mark(event: Mapping, action: str) -> Mark:
        return Mark(event.get("seq", 0), event.get("at", ""), event.get("by", ""), action, event["slug"], event.get("reason"))

    def _forget(self, day: str) -> None:
        """Drop the keys bound more than ``KEY_DAYS`` days before ``day``."""
        from datetime import date, timedelta

        try:
            cutoff = (date.fromisoformat(day) - timedelta(days=KEY_DAYS)).isoformat()
        except ValueError:  # not a day: keep every key
            return
        self.changed = True
        self.keys_day = day
        for by in list(self.keys):
            kept = {k: v for k, v in self.keys[by].items() if v.day >= cutoff}
            if kept:
                self.keys[by] = kept
            else:
                del self.keys[by]

    def _run(self, event: Mapping) -> None:
        """A runner's event; one presenting a token that is not the live
        lease's changes nothing but what it observed."""
        slug, action, at = event["slug"], event["action"], event["at"]
        run = self.runs.get(slug, NO_RUN)
        token = event.get("token")
        if action == "claim":
            lease = Lease(event["holder"], token, event["by"], at, event["expires"], event["ttl"])
            run = replace(run, token=max(run.token, token), lease=lease, attempts=run.attempts + 1,
                          history=run.history + (Attempt(token, event["holder"], at),))
        elif action in _LEASE_ENDS or action == "renew":
            if token is not None and token > run.token:
                run = replace(run, token=token)
            if action == "cancel" and not event.get("noop"):
                run = replace(run, cancelled=act(event))
            lease = run.lease
            if lease is not None and lease.token == token:
                if action == "renew":
                    run = replace(run, lease=replace(lease, expires=event["expires"], ttl=event["ttl"]))
                else:
                    end = event["result"] if action == "finish" else _LEASE_ENDS[action]
                    history = run.history
                    if history and history[-1].token == token and history[-1].end is None:
                        history = history[:-1] + (replace(history[-1], end=end, ended=at, note=event.get("note")),)
                    run = replace(run, lease=None, history=history)
            if action == "finish" and "not_before" in event:  # the storm's backoff after a failed attempt
                run = replace(run, not_before=event["not_before"])
        elif action == "quarantine":
            run = replace(run, quarantined=at)
        elif action == "unpark":
            run = replace(run, quarantined=None, attempts=0, unparked=act(event))
        elif action == "schedule":
            run = replace(run, not_before=event["not_before"])
        elif action in _HOLD_ACTIONS:
            if event.get("noop"):
                return
            run = replace(run, held=act(event) if action == "hold" else None)
        self.runs[slug] = run

    def state(self) -> LaneState:
        """The lane state folded so far (``start`` itself when nothing changed)."""
        if not self.changed:
            return self.start
        marks = self.marks
        for slug, mark in marks.items():
            if not isinstance(mark, Mark):  # the event that marked it (see ``_shift``)
                marks[slug] = self._mark(mark, mark["action"])
        return LaneState(tuple(self.lane), tuple(self.named), dict(marks), dict(self.runs),
                         {by: dict(keys) for by, keys in self.keys.items()}, self.keys_day, self.token_floor, self.moved_to,
                         {slug: dict(deps) for slug, deps in self.waivers.items()}, dict(self.touched),
                         self.halt, {action: dict(counts) for action, counts in self.requests.items()})


#: how a recorded request ended, as ``LaneState.requests`` counts it
OUTCOMES = ("done", "noop", "refused")


def outcome(event: Mapping) -> str:
    """How the request a log line records ended: ``refused`` (a refusal),
    ``noop`` (recorded, nothing done: the line says why), else ``done``."""
    if event["action"] == "refused":
        return "refused"
    return "noop" if event.get("noop") else "done"


#: the actions of runners and of the operator over runs
RUNNER_ACTIONS = ("claim", "renew", "finish", "expire", "recover", "quarantine", "unpark", "schedule", "release",
                  "cancel", "hold", "unhold")
#: the actions that end the lease whose token they name, and how each ends its attempt (a finish: its result)
_LEASE_ENDS = {"finish": "", "expire": "expired", "recover": "recovered", "release": "released", "cancel": "cancelled"}
_RUNNER = frozenset(RUNNER_ACTIONS)
_LANE_ACTIONS = frozenset(("push", "bump", "unbump"))
#: the operator's halt of the whole storm and its end (a no-op changes nothing)
_HALT_ACTIONS = frozenset(("halt", "resume"))
#: a hold of one lane and its end (a no-op changes nothing)
_HOLD_ACTIONS = frozenset(("hold", "unhold"))
#: the actions whose time ``LaneState.touched`` keeps
_TOUCHING = frozenset(("push", "add", "settle", "unpark", "waive", "unhold"))


def apply(state: LaneState, event: Mapping) -> LaneState:
    """The lane after ``event``; refusals, resets and repairs change nothing."""
    folder = Fold(state)
    folder.step(event)
    return folder.state()


def replay(events: Iterable[Mapping], start: LaneState = EMPTY) -> LaneState:
    """The lane state that ``events`` fold to from ``start``."""
    folder = Fold(start)
    for event in events:
        folder.step(event)
    return folder.state()

"""Pure: a storm's state as metrics, and their OpenMetrics text (issue 34).

``gather`` takes what a reader already holds (the listing ``list`` shows,
the lane state the log folds to, the log's head, the time) and gives every
metric with its samples; ``exposition`` writes them in the OpenMetrics text
format (``# TYPE``, ``# HELP``, ``# UNIT`` where there is one, ``# EOF``
last), which Prometheus scrapes and node_exporter's textfile collector
reads. docs/metrics.md says what each one means; nothing here reads a file
or the clock: the time comes in as a stamp and as POSIX seconds."""

from __future__ import annotations

from .clock import seconds
from .fold import OUTCOMES
from .framing import ACTIONS
from .records import dataclass
from .resolver import READY, STATES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

    from .fold import LaneState
    from .outcome import Listing

#: the prefix of every metric's name
PREFIX = "storm_queue_"
#: what a scraper is told the text is
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass(frozen=True)
class Metric:
    """One metric family: its ``name`` (without ``PREFIX``; a counter's
    without ``_total``), ``kind`` (gauge or counter), ``unit`` ('' for
    none), ``help`` and ``samples``: each the label pairs and the value."""

    name: str
    kind: str
    unit: str
    help: str
    samples: tuple[tuple[tuple[tuple[str, str], ...], float], ...]


def _one(name: str, unit: str, words: str, value: float) -> Metric:
    return Metric(name, "gauge", unit, words, (((), value),))


def request_samples(requests: Mapping[str, Mapping[str, int]]) -> tuple[tuple[tuple[tuple[str, str], ...], float], ...]:
    """``storm_queue_requests_total``'s samples: every action the log's
    format knows (a refusal is counted under the action it refused) and
    every other the log holds, each with every outcome, zeros included, so
    that a rate over a series never meets a series that is not there yet."""
    actions = sorted(set(ACTIONS) - {"refused"} | set(requests))
    return tuple(((("action", action), ("outcome", how)), requests.get(action, {}).get(how, 0))
                 for action in actions for how in OUTCOMES)


def oldest_ready(listing: Listing, t: float) -> float:
    """How many seconds the lane that has been ready longest has waited at
    the POSIX time ``t``, by ``starving.ready_since`` (the latest moment the
    log and the files' last changes say could have made it ready: never
    earlier than the truth); 0 when no lane is ready."""
    since = [w.ready_since for r in listing.view.rows if r.state == READY
             for w in (listing.waits.get(r.slug),) if w is not None and w.ready_since]
    if not since:
        return 0.0
    try:
        return max(0.0, round(t - seconds(min(since)), 6))
    except ValueError:  # a stamp that is not one: no honest figure
        return 0.0


def gather(listing: Listing, state: LaneState, now: str, t: float) -> tuple[Metric, ...]:
    """Every metric of the storm ``listing`` shows, whose log folds to
    ``state``, at the stamp ``now`` (POSIX time ``t``)."""
    view = listing.view
    rows = view.rows + view.settled
    by_state = dict.fromkeys(STATES, 0)
    for r in rows:
        by_state[r.state] = by_state.get(r.state, 0) + 1
    leases = [run.lease for run in state.runs.values() if run.lease is not None]
    live = sum(1 for lease in leases if lease.expires > now)
    starving = sum(1 for w in listing.waits.values() if w.starving)
    return (
        Metric("lanes", "gauge", "", "Lanes in each state, as list --all --json reports them.",
               tuple(((("state", s),), n) for s, n in by_state.items())),
        _one("prioritised_lanes", "", "Lanes of the run order in the priority lane (settled lanes aside).",
             sum(1 for r in view.rows if r.prioritised)),
        _one("stray_lanes", "", "Prioritised slugs that queue.txt no longer carries (never run).", len(view.stray)),
        _one("skipped_lines", "", "queue.txt lines skipped as malformed or duplicate.", len(listing.skipped)),
        _one("halted", "", "1 while the operator's halt is in force, else 0.", int(view.halt is not None)),
        _one("leases", "", "Live leases: held and not past their expiry.", live),
        _one("orphaned_leases", "", "Leases past their expiry, not yet taken back.", len(leases) - live),
        _one("starving_lanes", "", "Ready lanes waiting longer than [priority] starving_after while others started.",
             starving),
        _one("log_lines", "", "The log's head: the seq of its last line (0: nothing recorded).", listing.seq),
        Metric("requests", "counter", "", "Requests the log records, by action (a refusal: the action it refused) "
               "and outcome.", request_samples(state.requests)),
        _one("oldest_ready_seconds", "seconds", "How long the lane ready longest has waited (0: none is ready).",
             oldest_ready(listing, t)),
    )


def _label(value: str) -> str:
    """A label value as OpenMetrics writes it: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def exposition(metrics: tuple[Metric, ...]) -> str:
    """The OpenMetrics text of ``metrics``: per family ``# TYPE``,
    ``# UNIT`` (when it has one), ``# HELP``, its samples (a counter's
    named ``_total``), and ``# EOF`` as the last line."""
    out = []
    for m in metrics:
        name = PREFIX + m.name
        out.append(f"# TYPE {name} {m.kind}")
        if m.unit:
            out.append(f"# UNIT {name} {m.unit}")
        out.append(f"# HELP {name} {m.help}")
        sample = name + ("_total" if m.kind == "counter" else "")
        for labels, value in m.samples:
            pairs = ",".join(f'{k}="{_label(v)}"' for k, v in labels)
            out.append(f"{sample}{{{pairs}}} {_number(value)}" if pairs else f"{sample} {_number(value)}")
    out.append("# EOF")
    return "\n".join(out) + "\n"

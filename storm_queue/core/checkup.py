"""What ``storm-queue doctor`` finds, as plain data: a ``Finding`` (what to
fix, and how), the findings both stores share (the declaration's, the
runners' leftovers, dependency cycles, starving lanes), a store's
``Checkup`` (the findings its own checks made: ``Upkeep.doctor``), and
the report's two forms (``render_text``, ``report_json``). Severities:

- ``error``: the storm is unsafe or cannot work as declared (a file another
  account could forge, a storm its owner cannot write, a log that does not
  replay, a declaration requests refuse, a file doctor cannot read; on a
  database, a role that could forge or stop it);
- ``warning``: it works, but something needs a look (a skipped line, a stray
  slug, an unknown key, a witness behind its log, a torn tail, a lane running
  for longer than the threshold, a lease past its expiry, a running marker
  with no lease behind it, a quarantined lane, a starving lane when
  ``[priority] starving_after`` is set, a halt in force).

Pure: what a store read comes in, findings go out."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from . import config
from .lane import Snapshot
from .names import printable, quote

ERROR, WARNING = "error", "warning"
DEFAULT_RUNNING_HOURS = 24.0


@dataclass(frozen=True)
class Finding:
    """One thing to fix. ``subject`` is the file (relative to the root) or
    the lane it is about; outside text in ``message`` is already quoted."""

    severity: str
    code: str
    subject: str
    message: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Checkup:
    """A store's own doctor checks of its storm (``Upkeep.doctor``): the
    findings, in their order, and the hours a lane may run before it is
    ``long_running`` that they were judged by."""

    running_hours: float
    findings: tuple[Finding, ...]


def checkup(facts: Any, running_hours: float | None) -> Checkup:
    """``facts.diagnose`` (what a store read of itself for doctor) by
    ``running_hours``, else its declaration's, else ``DEFAULT_RUNNING_HOURS``."""
    hours = running_hours or facts.declaration.running_hours or DEFAULT_RUNNING_HOURS
    return Checkup(hours, tuple(facts.diagnose(hours)))


def declaration_findings(decl: config.Declaration, subject: str, fix: str) -> list[Finding]:
    """The declaration's findings, about SUBJECT (storm.toml, or a database
    storm's recorded declaration): an error when requests refuse it (FIX
    says how to mend it), a warning for each key it does not read."""
    out = []
    if decl.error:
        also = ", and list and next cannot know the order" if decl.log_error else ""
        out.append(Finding(ERROR, "declaration_unreadable", subject,
                           f"{decl.error.removeprefix('storm.toml: ')}; every request is refused{also}", fix))
    for kind, words in decl.notes:
        out.append(Finding(WARNING, kind, subject, words,
                           "correct or remove the key (storm.toml.example documents every key)"))
    return out


def starving_findings(snap: Snapshot, starving_after: int, t: float) -> list[Finding]:
    """A ``starving`` warning for every ready lane that has waited longer
    than ``starving_after`` seconds while other lanes started ahead of it
    (at the POSIX time ``t``), in run order."""
    from .resolver import resolve
    from .starving import starving_words, waits

    found = waits(snap, resolve(snap).rows, starving_after, t)
    return [Finding(WARNING, "starving", slug, starving_words(wait, starving_after) + "; the run order is the "
                    "contract's and does not change by itself",
                    f"if it should run sooner: storm-queue bump {slug} --reason TEXT")
            for slug, wait in found.items() if wait.starving]


def cycle_findings(snap: Snapshot) -> list[Finding]:
    """Each dependency cycle among the lanes, an error: none of its
    members ever runs (``resolver.cycles``), named with their lines."""
    from .resolver import cycle_words, cycles

    out = []
    for members in dict.fromkeys(cycles(snap).values()):
        out.append(Finding(ERROR, "dependency_cycle", " ".join(members),
                           cycle_words(snap, members, every=True).removeprefix("in a "),
                           "edit queue.txt: one of these lines must no longer name another (on a database storm, "
                           "settle one of them)"))
    return out


def runner_findings(snap: Snapshot, budget: int) -> list[Finding]:
    """What runners left that needs a look, lane by lane in name order: a
    lease past its expiry, a running marker with no lease behind it, a
    quarantined lane; and first the operator's halt, while one is in force.
    Lanes finished or settled are past caring."""
    from .resolver import MARKER, ORPHAN, running

    out: list[Finding] = []
    if snap.state.halt is not None:
        from .halt import halt_words

        out.append(Finding(WARNING, "halted", "storm", f"the storm is {halt_words(snap.state.halt)}: no lane starts "
                           "(claim leases nothing; claim and next answer halted); leases already held run on",
                           "when the cause is dealt with, as the operator: storm-queue resume --reason TEXT"))
    led = snap.ledgers
    for slug in sorted(set(snap.state.runs) | set(led.running)):
        if led.done(slug):
            continue
        run = snap.state.run(slug)
        how = running(snap, slug)
        if how == ORPHAN:
            lease = run.lease
            out.append(Finding(WARNING, "orphaned_lease", slug,
                               f"the lease of {lease.holder} under token {lease.token} expired at "
                               f"{printable(lease.expires)}; the lane counts as running until it is taken back",
                               "storm-queue recover (the next claim takes it back too)"))
        elif how == MARKER:
            token = led.running.get(slug)
            carries = "carrying no token" if token is None else f"carrying token {token}"
            out.append(Finding(WARNING, "marker_without_lease", slug,
                               f"has a running marker ({carries}) with no lease behind it in the log: no claim or "
                               "recover takes it back" + (", and it holds a [runner] slot" if slug in snap.lanes else ""),
                               "none if a runner that takes no leases (one that runs what storm-queue next decides) "
                               "is running it, as it marks every lane it runs so; if no runner is working on it, as the "
                               f"operator: storm-queue recover {slug} --force --reason TEXT"))
        if run.quarantined is not None and slug in snap.lanes:
            last = run.history[-1] if run.history else None
            ended = "" if last is None else f"; its last attempt (token {last.token}) ended {last.end or 'never'}" + (
                "" if last.note is None else f", note {quote(last.note)}")
            out.append(Finding(WARNING, "quarantined", slug,
                               f"quarantined since {printable(run.quarantined)} after {run.attempts} attempts "
                               f"(budget {budget}){ended}; it is never claimed",
                               f"look at its history (storm-queue why {slug}), then: "
                               f"storm-queue unpark {slug} --reason TEXT"))
    return out


def render_text(findings: list[Finding]) -> str:
    """One finding a line: ``SEVERITY CODE SUBJECT: MESSAGE (fix: FIX)``,
    every piece escaped so that no outside text becomes a line of its own."""
    from .names import printable

    return "\n".join(
        printable(f"{f.severity:<7} {f.code} {f.subject}: {f.message} (fix: {f.fix})") for f in findings
    )


def report_json(root: str, running_hours: float, findings: list[Finding], moved: str = "") -> dict[str, Any]:
    """The ``doctor --json`` document; ``moved``: where the storm moved, as printed."""
    return {"root": root, "clean": not findings, "running_hours": running_hours,
            "errors": sum(f.severity == ERROR for f in findings),
            "warnings": sum(f.severity == WARNING for f in findings),
            "findings": [f.to_json() for f in findings], "moved": moved or None}

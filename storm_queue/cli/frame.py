"""The live view's frame, pure: ``build(listing, events, now)`` turns what
a reader read into a ``Frame``, and ``plain_text`` and ``rich_view`` draw
it, so both are tested with fixed data (``watch`` is the edge that reads
the storm and the terminal).

Outside text (holders, reasons, notes, log events) is escaped with
``names.printable``/``quote`` (via ``render``) and reaches rich only as
``Text``, never as markup.
"""

from __future__ import annotations

from ..core import clock
from ..core.names import printable
from ..core.records import dataclass
from .render import event_text, last_attempt, mark_words
from .standing import next_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from ..core.resolver import Row
    from ..service.storm import Listing
#: how many log events a frame shows
EVENTS = 10
#: the states a frame lists lane by lane (besides running and the priority lane), in this order
HELD = ("held", "quarantined", "scheduled", "blocked", "cycle")
#: the states counted in a frame's summary line, in this order
COUNTED = ("ready", "running", "waiting", "cycle", "scheduled", "held", "blocked", "quarantined", "finished")
BAR = 20



@dataclass(frozen=True)
class Holding:
    """A running lane: how it runs (``lease``, ``orphan``: a lease past its
    expiry, ``marker``: a running marker with no lease), and under a lease
    its holder, token, the seconds ``left`` (negative: expired) of ``ttl``."""

    slug: str
    issue: str
    kind: str
    holder: str = ""
    token: int | None = None
    left: float | None = None
    ttl: float | None = None


@dataclass(frozen=True)
class Placed:
    """A lane of the priority lane: its place in run order, its state, and
    the request that put it there: by whom, when, and why (``why``: pulled
    forward for which lane, and the request's reason, quoted)."""

    position: int
    slug: str
    issue: str
    state: str
    by: str
    at: str
    why: str


@dataclass(frozen=True)
class Held:
    """A held, quarantined, scheduled or blocked lane, with what holds it, in words."""

    slug: str
    issue: str
    state: str
    words: str


@dataclass(frozen=True)
class Frame:
    """One frame of the view, as plain data; every string is printable."""

    root: str
    now: str
    decision: str
    running: tuple[Holding, ...] = ()
    priority: tuple[Placed, ...] = ()
    held: tuple[Held, ...] = ()
    counts: tuple[tuple[str, int], ...] = ()
    settled: int = 0
    events: tuple[tuple[str, str], ...] = ()  # (action, the event in words)
    notes: tuple[str, ...] = ()  # warnings, stray slugs, skipped lines
    error: str = ""  # the storm could not be read this time: why


def _seconds(stamp: str) -> float | None:
    try:
        return clock.seconds(stamp)
    except (ValueError, TypeError):
        return None


def _holding(r: Row, now: float | None) -> Holding:
    lease = r.run.lease
    if lease is None or r.running == "marker":
        return Holding(r.slug, r.issue, "marker")
    expires = _seconds(lease.expires)
    left = None if expires is None or now is None else expires - now
    ttl = float(lease.ttl) if lease.ttl else None
    if ttl is None:
        claimed = _seconds(lease.claimed)
        ttl = expires - claimed if expires is not None and claimed is not None and expires > claimed else None
    kind = "orphan" if r.running == "orphan" or (left is not None and left <= 0) else "lease"
    return Holding(r.slug, r.issue, kind, printable(lease.holder), lease.token, left, ttl)


def duration(seconds: float) -> str:
    """A span to the second, in at most two units: ``45s``, ``4m10s``, ``2h05m``, ``3d04h``."""
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _held_words(r: Row, now: float | None) -> str:
    if r.state == "held":
        from ..core.hold import hold_note

        return printable(hold_note(r.slug, r.run.held))
    if r.state == "scheduled":
        start = _seconds(r.run.not_before or "")
        words = f"not before {_when(r.run.not_before or '')}"
        if start is not None and now is not None and start > now:
            words += f" (in {duration(start - now)})"
        return words
    if r.state == "blocked":
        return f"depends on abandoned {', '.join(r.waits_on)}: never runs until that changes"
    words = f"after {r.run.attempts} attempts; storm-queue unpark {r.slug} --reason TEXT returns it"
    return "; ".join(w for w in (words, last_attempt(r)) if w)


def _when(at: str) -> str:
    """A stored time to the second: ``2026-11-30 14:05:03Z``."""
    return printable(at[:19].replace("T", " ") + "Z") if len(at) >= 19 else printable(at)


def build(listing: Listing, events: Iterable[dict[str, Any]], now: str,
          appended: str = "appended to queue.txt") -> Frame:
    """The frame for ``listing`` and the log's last ``events`` (oldest
    first; only the last ``EVENTS`` are kept) at the stamp ``now``, a
    push's lane said to be ``appended`` as the store says it (``render.event_text``)."""
    view = listing.view
    t = _seconds(now)
    running = tuple(_holding(r, t) for r in view.rows if r.state == "running")
    priority = []
    for r in view.rows:
        if r.prioritised:
            mark = listing.marks.get(r.slug)
            by, at = (printable(mark.by), printable(mark.at)) if mark else ("-", "-")
            priority.append(Placed(r.position, r.slug, r.issue, r.state, by, at, mark_words(mark, r.slug, listing.needs.get(r.slug, ()))))
    held = tuple(Held(r.slug, r.issue, r.state, _held_words(r, t))
                 for state in HELD for r in view.rows if r.state == state)
    counts = tuple((state, n) for state in COUNTED if (n := sum(r.state == state for r in view.rows)))
    notes = [printable(w) for w in listing.warnings]
    if view.halt is not None:
        from ..core.halt import halt_note

        notes.insert(0, f"halted: {halt_note(view.halt)}")
    notes += [f"stray: {s} is prioritised but queue.txt no longer carries it (never run)" for s in view.stray]
    if listing.skipped:
        notes.append(f"skipped: {len(listing.skipped)} queue.txt line(s) never run (storm-queue list names them)")
    if listing.moved_to:
        from ..service.storm import moved_note

        notes.insert(0, f"moved: {printable(moved_note(listing.moved_to))}")
    shown = tuple((str(e.get("action")), event_text(e, appended)) for e in list(events)[-EVENTS:])
    return Frame(printable(listing.root), now, next_words(view.decision, listing.moved_to, listing.slots), running,
                 tuple(priority), held, counts, len(view.settled), shown, tuple(notes))


def failed(root: str, error: str, now: str, last: Frame | None = None) -> Frame:
    """The frame when the storm could not be read: the error, over the last
    frame that could be read (if any)."""
    if last is None:
        return Frame(printable(root), now, "unknown", error=printable(error))
    return Frame(last.root, now, "unknown", last.running, last.priority, last.held, last.counts, last.settled,
                 last.events, last.notes, printable(error))


def filled(left: float | None, ttl: float | None, width: int = BAR) -> int:
    """How many of ``width`` cells the lease's time left fills: all when
    all of ``ttl`` is left, none when none is (or it is unknown)."""
    if left is None or not ttl:
        return 0
    return round(width * min(1.0, max(0.0, left / ttl)))


def bar(left: float | None, ttl: float | None, width: int = BAR) -> str:
    """The lease's time left as a plain bar: ``[#######-------------]``."""
    cells = filled(left, ttl, width)
    return "[" + "#" * cells + "-" * (width - cells) + "]"


def ago(at: str, now: str) -> str:
    """How long before ``now`` the stamp ``at`` was: ``10m00s ago``."""
    then, t = _seconds(at), _seconds(now)
    return "-" if then is None or t is None else f"{duration(t - then)} ago"


def lease_words(h: Holding) -> str:
    """What is left of a running lane's lease, in words."""
    if h.kind == "marker":
        return "a running marker with no lease: a runner that takes no leases runs it"
    if h.left is None:
        return "lease expiry unknown"
    if h.kind == "orphan" or h.left <= 0:
        return f"lease expired {duration(-h.left)} ago: the next claim or recover takes it back"
    return f"{duration(h.left)} left" + (f" of {duration(h.ttl)}" if h.ttl else "")


def summary(frame: Frame) -> str:
    """The lanes counted by state."""
    words = [f"{n} {'finished, awaiting review' if state == 'finished' else state}" for state, n in frame.counts]
    total = sum(n for _, n in frame.counts)
    text = f"{total} in the queue" + (f" ({', '.join(words)})" if words else "")
    return text + (f"; {frame.settled} settled" if frame.settled else "")


def plain_text(frame: Frame) -> str:
    """The frame as plain text, one item a line, no escape sequences."""
    lines = [f"storm-queue watch: {frame.root} at {_when(frame.now)}"]
    if frame.error:
        lines.append(f"error: {frame.error}")
    lines += [f"next: {frame.decision}", f"lanes: {summary(frame)}", ""]
    lines.append(f"running ({len(frame.running)}):" if frame.running else "running: none")
    for h in frame.running:
        if h.kind == "marker":
            lines.append(f"  {h.slug} {h.issue}  {lease_words(h)}")
        else:
            lines.append(f"  {h.slug} {h.issue}  held by {h.holder}  token {h.token}  "
                         f"{bar(h.left, h.ttl)} {lease_words(h)}")
    lines.append(f"priority lane ({len(frame.priority)}), in run order:" if frame.priority else "priority lane: empty")
    for p in frame.priority:
        why = f"  {p.why}" if p.why else ""
        lines.append(f"  {p.position:>3} {p.slug} {p.issue} {p.state}  by {p.by} at {_when(p.at)}{why}")
    for state in HELD:
        held = [h for h in frame.held if h.state == state]
        lines.append(f"{state} ({len(held)}):" if held else f"{state}: none")
        lines += [f"  {h.slug} {h.issue}  {h.words}" for h in held]
    lines.append(f"last {len(frame.events)} log events:" if frame.events else "log: nothing recorded yet")
    lines += [f"  {text}" for _, text in frame.events]
    lines += [f"note: {n}" for n in frame.notes]
    return "\n".join(lines)


def fit(frame: Frame, height: int | None, footer: bool = False) -> tuple[int, int, int]:
    """How many lanes of the priority lane, how many quarantined, scheduled
    or blocked lanes, and how many events a terminal ``height`` lines high
    shows (None: all). Each row takes one line; cut first are events (down
    to three), then held lanes (to three), the priority lane (to three),
    held lanes (to one), the priority lane (to one), then events. What
    still does not fit is cropped at the bottom."""
    p, h, e = len(frame.priority), len(frame.held), len(frame.events)
    if height is None:
        return p, h, e

    def section(n: int, shown: int) -> int:  # heading, column heads, rows, "... and N more"
        return 1 if not n else 2 + min(n, shown) + (min(n, shown) < n)

    def lines(p: int, h: int, e: int) -> int:
        top = 4 + bool(frame.error) + (1 if not frame.running else 2 + len(frame.running)) + 1
        return (top + section(len(frame.priority), p) + 1 + section(len(frame.held), h) + 1
                + 1 + e + len(frame.notes) + bool(footer))

    for floor, which in ((3, "e"), (3, "h"), (3, "p"), (1, "h"), (1, "p"), (0, "e")):
        while lines(p, h, e) > height:
            if which == "e" and e > floor:
                e -= 1
            elif which == "h" and h > floor:
                h -= 1
            elif which == "p" and p > floor:
                p -= 1
            else:
                break
    return p, h, e


def _table(*columns: tuple[str, dict]) -> Any:
    """A rich table whose columns take their natural width, the last taking
    what is left (so a long reason is cut, never a slug or a holder)."""
    from rich.table import Table

    t = Table(box=None, header_style="bold dim", pad_edge=False, show_edge=False, expand=True)
    for i, (name, kw) in enumerate(columns):
        t.add_column(name, no_wrap=True, overflow="ellipsis", ratio=1 if i == len(columns) - 1 else None, **kw)
    return t


def _heading(words: str, n: int | None = None, none: str = "") -> Any:
    from rich.text import Text

    if none:
        return Text.assemble((words, "bold underline"), f": {none}")
    return Text.assemble((words, "bold underline"), "" if n is None else f" ({n})")


def _more(n: int) -> Any:
    from rich.text import Text

    return Text(f"  ... and {n} more (storm-queue list shows them all)", style="dim")


def _running_part(frame: Frame) -> list:
    """The running section: a lease bar a lane, coloured by what is left."""
    from rich.text import Text

    if not frame.running:
        return [_heading("running", none="none")]
    t = _table(("lane", {"style": "bold"}), ("issue", {}), ("holder", {}), ("token", {"justify": "right"}),
               ("lease", {"min_width": BAR}), ("left", {}))
    for h in frame.running:
        if h.kind == "marker":
            t.add_row(Text(h.slug), Text(h.issue), Text("-"), Text("-"), Text(""), Text(lease_words(h), style="bold red"))
            continue
        share = 0.0 if h.left is None or not h.ttl else h.left / h.ttl
        colour = "red" if h.kind == "orphan" or share < 0.2 else "yellow" if share < 0.5 else "green"
        cells = filled(h.left, h.ttl)
        t.add_row(Text(h.slug), Text(h.issue), Text(h.holder), Text(str(h.token)),
                  Text.assemble(("━" * cells, colour), ("━" * (BAR - cells), "grey30")),
                  Text(lease_words(h), style="bold red" if h.kind == "orphan" else ""))
    return [_heading("running", len(frame.running)), t]


def _lanes_parts(frame: Frame, p_rows: int, h_rows: int) -> list:
    """The priority lane's section and the held lanes' section, each cut to
    its number of rows, saying how many are not shown."""
    from rich.text import Text

    from .table import STATE_STYLES

    parts: list = []
    if frame.priority:
        parts.append(_heading("priority lane, in run order", len(frame.priority)))
        t = _table(("#", {"justify": "right"}), ("lane", {"style": "bold"}), ("issue", {}), ("state", {}),
                   ("by", {}), ("when", {"style": "dim"}), ("why", {"style": "italic"}))
        for p in frame.priority[:p_rows]:
            t.add_row(Text(str(p.position)), Text(p.slug), Text(p.issue), Text(p.state, style=STATE_STYLES.get(p.state, "")),
                      Text(p.by), Text(ago(p.at, frame.now)), Text(p.why))
        parts.append(t)
        if p_rows < len(frame.priority):
            parts.append(_more(len(frame.priority) - p_rows))
    else:
        parts.append(_heading("priority lane", none="empty"))
    parts.append(Text())
    held_title = ", ".join(HELD)
    if frame.held:
        parts.append(_heading(held_title, len(frame.held)))
        t = _table(("lane", {"style": "bold"}), ("issue", {}), ("state", {}), ("what holds it", {}))
        for h in frame.held[:h_rows]:
            t.add_row(Text(h.slug), Text(h.issue), Text(h.state, style=STATE_STYLES.get(h.state, "")), Text(h.words))
        parts.append(t)
        if h_rows < len(frame.held):
            parts.append(_more(len(frame.held) - h_rows))
    else:
        parts.append(_heading(held_title, none="none"))
    return parts


def _log_part(frame: Frame, e_rows: int) -> list:
    """The last ``e_rows`` log events, refusals in red."""
    from rich.text import Text

    events = frame.events[len(frame.events) - e_rows:] if e_rows else ()
    if events:
        parts = [_heading(f"last {len(events)} log event{'s' if len(events) != 1 else ''}")]
    elif frame.events:
        parts = [_heading("log", none="a taller terminal shows the last events (storm-queue log --last 10)")]
    else:
        parts = [_heading("log", none="nothing recorded yet")]
    for action, text in events:
        parts.append(Text(text, style="red" if action == "refused" else "", no_wrap=True, overflow="ellipsis"))
    return parts


def rich_view(frame: Frame, height: int | None = None, footer: str = "") -> Any:
    """The frame as a rich renderable for a terminal ``height`` lines high
    (None: as long as it takes): long sections are cut to fit (``fit``),
    saying how many lanes are not shown. Every piece of text is a ``Text``;
    a table row is one line, cut with an ellipsis at the terminal's edge."""
    from rich.console import Group
    from rich.text import Text

    p_rows, h_rows, e_rows = fit(frame, height, bool(footer))
    parts: list = [Text.assemble(("storm-queue watch", "bold"), f"  {frame.root}  ", (_when(frame.now), "dim"),
                                 no_wrap=True, overflow="ellipsis")]
    if frame.error:
        parts.append(Text(f"cannot read the storm now: {frame.error}", style="bold red", no_wrap=True, overflow="ellipsis"))
    parts.append(Text.assemble("next: ", (frame.decision, "bold reverse" if frame.decision.startswith("run ") else "bold"),
                               no_wrap=True, overflow="ellipsis"))
    parts.append(Text("lanes: " + summary(frame), style="dim", no_wrap=True, overflow="ellipsis"))
    parts.append(Text())
    parts += _running_part(frame)
    parts.append(Text())
    parts += _lanes_parts(frame, p_rows, h_rows)
    parts.append(Text())
    parts += _log_part(frame, e_rows)
    for note in frame.notes:
        parts.append(Text(f"note: {note}", style="yellow", no_wrap=True, overflow="ellipsis"))
    if footer:
        parts.append(Text(footer, style="dim", no_wrap=True, overflow="ellipsis"))
    return Group(*parts)

"""The listing as a rich table, for a terminal. Only the terminal branch of
``list`` imports this module (and so rich). Every piece of text reaches rich
as a ``Text`` object, escaped first, so markup in outside text is shown
literally and never interpreted."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .desk import Listing
from .names import printable, quote
from .render import mark_words
from .resolver import Row

STATE_STYLES = {
    "ready": "bold green", "running": "bold cyan", "finished": "magenta",
    "waiting": "yellow", "blocked": "bold red", "settled": "dim",
    "quarantined": "bold white on red", "scheduled": "blue",
}
#: how a running lane runs, under its state: a live lease says nothing more;
#: an orphan and a marker with no lease are shown, each in its colour
RUNNING_STYLES = {"orphan": ("orphan", "bold yellow"), "marker": ("no lease", "bold red")}


def _when(at: str) -> str:
    """A stored time to the minute: ``2026-11-30 14:05Z``."""
    return printable(at[:16].replace("T", " ") + "Z") if len(at) >= 16 else printable(at)


def _row(table: Table, r: Row, listing: Listing) -> None:
    mark = listing.marks.get(r.slug) if r.prioritised else None
    who = Text()
    if mark is not None:
        who.append(printable(mark.by))
        who.append(f"\n{_when(mark.at)}", style="dim")
        extra = mark_words(mark, r.slug)
        if extra:
            who.append("\n" + extra, style="italic")
    table.add_row(
        Text(str(r.position) if r.position else "-"),
        Text("*" if r.prioritised else "", style="bold yellow"),
        Text(r.slug, style="bold"),
        Text(r.issue),
        _state(r),
        who,
        _status(r),
    )


def _state(r: Row) -> Text:
    """The state word in its colour; a running lane's kind under it when
    it is an orphan or a marker with no lease, a quarantined lane's attempts."""
    state = Text()
    state.append(r.state, style=STATE_STYLES.get(r.state, ""))
    if r.running in RUNNING_STYLES:
        word, style = RUNNING_STYLES[r.running]
        state.append(f"\n{word}", style=style)
    elif r.state == "quarantined":
        state.append(f"\n{r.run.attempts} attempts", style="dim")
    return state


def _status(r: Row) -> Text:
    """The state in words; for a quarantined lane, how its last attempt
    ended (with its note, quoted: outside text)."""
    status = Text(printable(r.status))
    if r.state == "quarantined" and r.run.history:
        last = r.run.history[-1]
        words = f"last attempt: token {last.token} {printable(last.end or 'not ended')}"
        if last.note is not None:
            words += f", note {quote(last.note)}"
        status.append("\n" + words, style="italic")
    return status


def listing_table(listing: Listing, show_settled: bool = False) -> Group:
    """The renderable of ``list`` at a terminal: the run order as a table,
    then the skipped lines, the stray slugs and the settled count."""
    view = listing.view
    title = Text(f"storm {printable(listing.root)}")
    parts: list = [title, Text.assemble("next: ", (view.decision, "bold"))]
    rows = view.rows + (view.settled if show_settled else ())
    if rows:
        table = Table(header_style="bold", show_lines=False)
        for name, kw in (("#", {"justify": "right"}), ("", {}), ("lane", {}), ("issue", {}),
                         ("state", {}), ("prioritised by", {}), ("waits on", {"ratio": 1})):
            table.add_column(name, **kw)
        for r in rows:
            _row(table, r, listing)
        parts.append(table)
        if any(r.prioritised for r in rows):
            parts.append(Text("* in the priority lane: runs before every other lane", style="dim"))
    else:
        parts.append(Text("no lanes to run"))
    if view.settled and not show_settled:
        parts.append(Text(f"{len(view.settled)} settled lane(s) not shown (--all shows them)", style="dim"))
    if view.stray:
        stray = Table(title="Stray: prioritised, but queue.txt no longer carries them (never run)", title_justify="left")
        stray.add_column("lane")
        stray.add_column("prioritised by")
        for slug in view.stray:
            mark = listing.marks.get(slug)
            stray.add_row(Text(printable(slug)), Text(f"{printable(mark.by)} {_when(mark.at)}" if mark else ""))
        parts.append(stray)
    if listing.skipped:
        skipped = Table(title="Skipped queue.txt lines (never run)", title_justify="left")
        skipped.add_column("line", justify="right")
        skipped.add_column("text")
        skipped.add_column("why")
        for s in listing.skipped:
            skipped.add_row(Text(str(s.line)), Text(quote(s.text)), Text(printable(s.why)))
        parts.append(skipped)
    return Group(*parts)


def print_listing(listing: Listing, console: Console | None = None, show_settled: bool = False) -> None:
    """Print the listing's table on ``console`` (default: stdout)."""
    (console or Console()).print(listing_table(listing, show_settled))

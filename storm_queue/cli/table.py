"""The listing as a rich table, for a terminal. Only the terminal branch of
``list`` imports this module (and so rich). Every piece of text reaches rich
as a ``Text`` object, escaped first, so markup in outside text is shown
literally and never interpreted."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..core.halt import halt_note
from ..core.names import printable, quote
from ..core.resolver import Row
from ..service.storm import Listing
from .render import mark_words

STATE_STYLES = {
    "ready": "bold green", "running": "bold cyan", "finished": "magenta",
    "waiting": "yellow", "blocked": "bold red", "cycle": "bold red", "settled": "dim",
    "quarantined": "bold white on red", "scheduled": "blue",
}
#: how a running lane runs, under its state: a live lease says nothing more;
#: an orphan and a marker with no lease are shown, each in its colour
RUNNING_STYLES = {"orphan": ("orphan", "bold yellow"), "marker": ("no lease", "bold red")}


#: the mark of a starving lane, under its state; the legend under the table says what it means
STARVING = "STARVING"


def _when(at: str) -> str:
    """A stored time to the minute: ``2026-11-30 14:05Z``."""
    return printable(at[:16].replace("T", " ") + "Z") if len(at) >= 16 else printable(at)


#: the lane table's columns (heading, options), in order
COLUMNS = (("#", {"justify": "right"}), ("", {}), ("lane", {}), ("issue", {}),
           ("state", {}), ("prioritised by", {}), ("waits on", {}))
#: the columns a narrow terminal drops, least useful first, until the rest
#: fit without cutting a word; the lane and its state are never dropped
DROP_ORDER = ("#", "issue", "prioritised by", "waits on")
#: who gets the room left once every kept column holds its widest word
GROW_ORDER = ("waits on", "prioritised by", "lane", "state", "issue", "#", "")


def _row(r: Row, listing: Listing) -> tuple[Text, ...]:
    """One lane's cells, one per column of ``COLUMNS``."""
    mark = listing.marks.get(r.slug) if r.prioritised else None
    who = Text()
    if mark is not None:
        who.append(printable(mark.by))
        who.append(f"\n{_when(mark.at)}", style="dim")
        extra = mark_words(mark, r.slug, listing.needs.get(r.slug, ()))
        if extra:
            who.append("\n" + extra, style="italic")
    return (
        Text(str(r.position) if r.position else "-"),
        Text("*" if r.prioritised else "", style="bold yellow"),
        Text(r.slug, style="bold"),
        Text(r.issue),
        _state(r, listing),
        who,
        _status(r),
    )


def _state(r: Row, listing: Listing | None = None) -> Text:
    """The state word in its colour; a running lane's kind under it when
    it is an orphan or a marker with no lease, a quarantined lane's
    attempts, a starving lane's mark (``STARVING``)."""
    state = Text()
    state.append(r.state, style=STATE_STYLES.get(r.state, ""))
    wait = listing.waits.get(r.slug) if listing is not None else None
    if wait is not None and wait.starving:
        state.append(f"\n{STARVING}", style="bold red")
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


def _widest(heading: str, cells: list[Text], unit: str | None) -> int:
    """The widest word (``unit`` None: split on whitespace) or line
    (``unit`` "\\n") of a column, its heading included."""
    pieces = heading.split(unit) + [piece for cell in cells for piece in cell.plain.split(unit)]
    return max((cell_len(piece) for piece in pieces), default=1)


def _fit(rows: list[tuple[Text, ...]], width: int) -> tuple[dict[int, int | None], list[str]]:
    """Each column kept (an index into ``COLUMNS``) with its width, and the
    headings dropped. A column costs its width plus three (padding and a
    rule), the table one more. Every kept column gets at least its widest
    word, so none is cut; columns are dropped in ``DROP_ORDER`` until that
    fits, and the room left goes to the columns whose lines are longer, in
    ``GROW_ORDER``. When even the lane and its state cannot have their
    widest words, the widths are rich's (None), and words are folded."""
    kept = list(range(len(COLUMNS)))
    cells = [[row[i] for row in rows] for i in kept]
    least = [_widest(COLUMNS[i][0], cells[i], None) for i in kept]
    most = [_widest(COLUMNS[i][0], cells[i], "\n") for i in kept]
    dropped: list[str] = []
    for heading in DROP_ORDER:
        if sum(least[i] + 3 for i in kept) + 1 <= width:
            break
        kept = [i for i in kept if COLUMNS[i][0] != heading]
        dropped.append(heading)
    room = width - 1 - sum(least[i] + 3 for i in kept)
    if room < 0:
        return {i: None for i in kept}, dropped
    widths = {i: least[i] for i in kept}
    for heading in GROW_ORDER:
        for i in kept:
            if COLUMNS[i][0] == heading:
                more = min(room, most[i] - widths[i])
                widths[i] += more
                room -= more
    return widths, dropped


def listing_table(listing: Listing, show_settled: bool = False, width: int | None = None) -> Group:
    """The renderable of ``list`` at a terminal: the run order as a table,
    then the skipped lines, the stray slugs and the settled count. On a
    terminal ``width`` columns wide no word is cut: long cells wrap, and when
    even that does not fit, columns are dropped in ``DROP_ORDER`` (and the
    listing says which); a word wider than the whole terminal is folded,
    never cut short with an ellipsis."""
    view = listing.view
    title = Text(f"storm {printable(listing.root)}")
    parts: list = [title, Text.assemble("next: ", (view.decision, "bold"))]
    if view.halt is not None:
        parts.append(Text(f"halted: {halt_note(view.halt)}", style="bold red"))
    rows = view.rows + (view.settled if show_settled else ())
    if rows:
        cells = [_row(r, listing) for r in rows]
        widths, dropped = _fit(cells, width) if width is not None else ({i: None for i in range(len(COLUMNS))}, [])
        table = Table(header_style="bold", show_lines=False)
        for i, column_width in widths.items():
            name, kw = COLUMNS[i]
            table.add_column(name, width=column_width, overflow="fold", **kw)
        for row in cells:
            table.add_row(*(row[i] for i in widths))
        parts.append(table)
        if any(r.prioritised for r in rows):
            parts.append(Text("* in the priority lane: runs before every other lane", style="dim"))
        starving = [r.slug for r in rows if getattr(listing.waits.get(r.slug), "starving", False)]
        if starving:
            from ..core.starving import duration_words

            parts.append(Text(f"{STARVING}: ready for longer than [priority] starving_after "
                              f"({duration_words(listing.starving_after)}) while other lanes started ahead of it; "
                              "shown only, the run order is unchanged", style="bold red"))
        if dropped:
            names = ", ".join(f'"{name}"' for name in dropped)
            parts.append(Text(f"narrow terminal: not shown: {names} (a wider terminal, or list --plain, shows "
                              "every column)", style="dim"))
    else:
        parts.append(Text("no lanes to run"))
    if view.settled and not show_settled:
        parts.append(Text(f"{len(view.settled)} settled lane(s) not shown (--all shows them)", style="dim"))
    if view.stray:
        stray = Table(title="Stray: prioritised, but queue.txt no longer carries them (never run)", title_justify="left")
        stray.add_column("lane", overflow="fold")
        stray.add_column("prioritised by", overflow="fold")
        for slug in view.stray:
            mark = listing.marks.get(slug)
            stray.add_row(Text(printable(slug)), Text(f"{printable(mark.by)} {_when(mark.at)}" if mark else ""))
        parts.append(stray)
    if listing.skipped:
        skipped = Table(title="Skipped queue.txt lines (never run)", title_justify="left")
        skipped.add_column("line", justify="right")
        skipped.add_column("text", overflow="fold")
        skipped.add_column("why", overflow="fold")
        for s in listing.skipped:
            skipped.add_row(Text(str(s.line)), Text(quote(s.text)), Text(printable(s.why)))
        parts.append(skipped)
    return Group(*parts)


def print_listing(listing: Listing, console: Console | None = None, show_settled: bool = False) -> None:
    """Print the listing's table on ``console`` (default: stdout)."""
    console = console or Console()
    console.print(listing_table(listing, show_settled, console.width))

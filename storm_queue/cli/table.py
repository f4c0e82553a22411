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
from ..service.storm import Listing, moved_note
from .render import kept_words, last_attempt
from .standing import next_words, none_words, slots_line

STATE_STYLES = {
    "ready": "bold green", "running": "bold cyan", "finished": "magenta",
    "waiting": "yellow", "blocked": "bold red", "cycle": "bold red", "settled": "dim",
    "quarantined": "bold white on red", "scheduled": "blue", "held": "bold yellow",
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
#: fit; the lane and its state are never dropped
DROP_ORDER = ("#", "issue", "prioritised by", "waits on")
#: who gets the room left once every kept column has its least width, in
#: turn (column, up to what): the detail up to ``DETAIL_FIRST``,
#: "prioritised by" up to when ("dated"), the detail whole, then
#: "prioritised by" whole (a named lane's reason)
GROW_ORDER = ((6, "first"), (5, "dated"), (6, "most"), (5, "most"))
#: the least width of the detail ("waits on"), whose cells are cut with an ellipsis past it
DETAIL_LEAST = 8
#: how wide the detail grows before "prioritised by" gets room for when
DETAIL_FIRST = 40


def _cell(text: str = "", style: str = "") -> Text:
    """A cell of one line: cut with an ellipsis where it does not fit."""
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


def _row(r: Row, listing: Listing) -> tuple[tuple[Text, ...], tuple[int, int]]:
    """One lane's cells, one per column of ``COLUMNS``, each one line; and
    the widths of its "prioritised by" cell up to for whom (never cut) and
    up to when."""
    who, whole = _who(r, listing)
    return (
        _cell(str(r.position) if r.position else "-"),
        _cell("*" if r.prioritised else "", style="bold yellow"),
        _cell(r.slug, style="bold"),
        _cell(r.issue),
        _state(r, listing),
        who,
        _status(r),
    ), whole


def _who(r: Row, listing: Listing) -> tuple[Text, tuple[int, int]]:
    """Who put a prioritised lane there; for a lane that was not named, for
    whom, once (never that lane's reason again); then when, and a named
    lane's reason. With the cell's widths up to for whom and up to when."""
    mark = listing.marks.get(r.slug) if r.prioritised else None
    who = _cell()
    if mark is None:
        return who, (0, 0)
    who.append(printable(mark.by))
    if mark.slug != r.slug:
        who.append(" " + kept_words(mark, listing.needs.get(r.slug, ())).removeprefix("pulled forward "),
                   style="italic")
    whole = who.cell_len
    who.append(f", {_when(mark.at)}", style="dim")
    dated = who.cell_len
    if mark.slug == r.slug and mark.reason is not None:
        who.append(f", reason {quote(mark.reason)}", style="italic")
    return who, (whole, dated)


def _state(r: Row, listing: Listing | None = None) -> Text:
    """The state word in its colour; a running lane's kind after it when it
    is an orphan or a marker with no lease, a starving lane's mark
    (``STARVING``). One line: a quarantined lane's attempts are in its
    detail."""
    state = _cell()
    state.append(r.state, style=STATE_STYLES.get(r.state, ""))
    wait = listing.waits.get(r.slug) if listing is not None else None
    if wait is not None and wait.starving:
        state.append(f" {STARVING}", style="bold red")
    if r.running in RUNNING_STYLES:
        word, style = RUNNING_STYLES[r.running]
        state.append(f" {word}", style=style)
    return state


def _status(r: Row) -> Text:
    """The state in words; for a quarantined lane, first how its last
    attempt ended (with its note, quoted: outside text)."""
    status = _cell()
    last = last_attempt(r)
    if last:
        status.append(last + "; ", style="italic")
    status.append(printable(r.status))
    return status


def _fit(rows: list[tuple[Text, ...]], widest: tuple[int, int], width: int) -> tuple[dict[int, int | None], list[str]]:
    """Each column kept (an index into ``COLUMNS``) with its width, and the
    headings dropped. A column costs its width plus three (padding and a
    rule), the table one more. Each kept column gets at least its least
    width: its widest cell, but for "prioritised by" only who and for whom
    (and one more for the ellipsis after them) and for "waits on"
    ``DETAIL_LEAST``, past which their cells are cut with an ellipsis;
    columns are dropped in ``DROP_ORDER`` until that fits, and the room left
    goes to the two columns that can be cut, in ``GROW_ORDER`` (``widest``:
    the widest of the "prioritised by" cells up to for whom, and up to when). When even the lane and its state cannot have
    their widest cells, the widths are rich's (None), and cells are folded."""
    kept = list(range(len(COLUMNS)))
    word = [max(map(cell_len, COLUMNS[i][0].split() or [""])) for i in kept]  # a heading may wrap
    most = [max([word[i]] + [row[i].cell_len for row in rows]) for i in kept]
    least = list(most)
    whole, dated = widest
    least[5] = min(most[5], max(word[5], whole + 1))
    least[6] = min(most[6], max(word[6], DETAIL_LEAST))
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
    for i, upto in GROW_ORDER:
        if i in widths:
            target = min(most[i], {"first": DETAIL_FIRST, "dated": dated, "most": most[i]}[upto])
            more = max(0, min(room, target - widths[i]))
            widths[i] += more
            room -= more
    return widths, dropped


def listing_table(listing: Listing, show_settled: bool = False, width: int | None = None) -> Group:
    """The renderable of ``list`` at a terminal: the run order as a table,
    then the skipped lines, the stray slugs and the settled count. On a
    terminal ``width`` columns wide each lane is one line (issue 20 item
    10): a pulled-forward lane says for whom, once, and a cell that does not
    fit is cut with an ellipsis ("prioritised by" after who and for whom,
    the detail after ``DETAIL_LEAST``); when even that does not fit, columns
    are dropped in ``DROP_ORDER`` (and the listing says which). A lane name
    wider than the whole terminal is folded, never cut (``list --plain``
    and ``why`` say everything a cut cell held)."""
    view = listing.view
    title = Text(f"storm {printable(listing.root)}")
    parts: list = [title, Text.assemble("next: ", (next_words(view.decision, listing.moved_to), "bold"))]
    if listing.moved_to:
        parts.insert(0, Text(f"moved: {printable(moved_note(listing.moved_to))}", style="bold reverse red"))
    elif listing.slots is not None:
        parts.append(Text(f"slots: {slots_line(view.decision, listing.slots)}", style="yellow"))
    if view.halt is not None:
        parts.append(Text(f"halted: {halt_note(view.halt)}", style="bold red"))
    rows = view.rows + (view.settled if show_settled else ())
    if rows:
        made = [_row(r, listing) for r in rows]
        cells = [row for row, _ in made]
        widest = (max(n[0] for _, n in made), max(n[1] for _, n in made))
        widths, dropped = _fit(cells, widest, width) if width is not None else ({i: None for i in range(len(COLUMNS))}, [])
        if any(w is None for w in widths.values()):  # not even the lane fits: fold every cell
            for row in cells:
                for cell in row:
                    cell.no_wrap, cell.overflow = False, "fold"
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
        parts.append(Text(f"lanes: {none_words(listing)}"))
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


#: the narrowest terminal the table is drawn in (``COLUMNS=0`` drew it 0 wide: nothing at all)
NARROWEST = 20


def print_listing(listing: Listing, console: Console | None = None, show_settled: bool = False) -> bool:
    """Print the listing's table on ``console`` (default: stdout); False,
    printing nothing, when the console is narrower than ``NARROWEST``
    (the caller prints the plain listing instead)."""
    console = console or Console()
    if console.width < NARROWEST:
        return False
    console.print(listing_table(listing, show_settled, console.width))
    return True

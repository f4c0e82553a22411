"""Human and JSON output. Outside text arrives quoted by the library; a last
guard escapes anything unprintable before it reaches a terminal."""

from __future__ import annotations

import json
import sys

from .log.reader import RESET_HINT
from .names import printable, quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .desk import Listing, Outcome
    from .log.audit import Audit


def emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=True) + "\n")


def err(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(printable(text) + "\n")


def listing_json(listing: Listing) -> dict[str, Any]:
    view = listing.view
    return {
        "root": listing.root,
        "decision": view.decision,
        "rows": [
            {"position": r.position, "slug": r.slug, "issue": r.issue, "deps": list(r.deps),
             "prioritised": r.prioritised, "state": r.state, "status": r.status}
            for r in view.rows
        ],
        "stray": list(view.stray),
        "skipped": [{"line": s.line, "text": s.text, "why": s.why} for s in listing.skipped],
        "warnings": listing.warnings,
    }


def listing_text(listing: Listing) -> str:
    """The listing as stable plain text, one row a line (warnings go to
    stderr, as every command's do)."""
    view = listing.view
    lines = [f"storm {printable(listing.root)}", f"next: {view.decision}"]
    if view.rows:
        width = max(len(r.slug) for r in view.rows)
        iw = max(len(r.issue) for r in view.rows)
        for r in view.rows:
            mark = "*" if r.prioritised else " "
            lines.append(f"{r.position:>4} {mark} {r.slug:<{width}}  {r.issue:<{iw}}  {r.state:<8}  {printable(r.status)}")
        lines.append("(* prioritised)" if any(r.prioritised for r in view.rows) else "(nothing prioritised)")
    else:
        lines.append("no lanes to run")
    if view.settled:
        lines.append(f"settled: {len(view.settled)} lane(s)")
    if view.stray:
        lines.append("stray (prioritised, but queue.txt no longer carries them; never run): " + " ".join(view.stray))
    for s in listing.skipped:
        lines.append(f"skipped queue.txt line {s.line}: {quote(s.text)}: {printable(s.why)}")
    return "\n".join(lines)


def outcome_text(out: Outcome) -> str:
    """A request's outcome in words: one line, then what moved."""
    if out.outcome == "refused":
        return f"refused ({out.code}): {printable(out.message)}"
    parts = [printable(out.message)]
    if out.moved:
        parts.append("moved: " + " ".join(out.moved))
    if out.removed:
        parts.append("removed: " + " ".join(out.removed))
    return "; ".join(parts)


def audit_text(audit: Audit) -> str:
    """``verify``'s report: the verdict first, the first bad line named."""
    name = printable(audit.log)
    p = audit.problem
    if p is not None:
        where = f" (line {p.line} starts at byte {p.offset})" if p.line else ""
        hint = "" if audit.checkpoint == "disagrees" else f"\n{RESET_HINT}"
        return f"{name}: NOT sound: {printable(p.what)}{where}{hint}"
    lines = [f"{name}: sound: {audit.lines} line(s), {audit.length} bytes; framing, schema, chain, seq and witness agree"]
    if audit.checkpoint == "agrees":
        lines.append(f"checkpoint: at line {audit.checkpoint_line}, agrees with the whole replay")
    elif audit.checkpoint == "ignored":
        lines.append(f"checkpoint: ignored ({printable(audit.checkpoint_why or '')})")
    else:
        lines.append("checkpoint: none")
    lines.append(f"replay: {len(audit.lane)} lane(s) in the priority lane, {len(audit.named)} by name")
    return "\n".join(lines)


class progress_bar:  # noqa: N801 -- used as a function: with progress_bar(total) as update
    """A progress bar on stderr, for a long job at a terminal: ``with
    progress_bar(total, what) as update: update(done)``. Imports rich only
    when it is shown; elsewhere ``update`` does nothing."""

    def __init__(self, total: int, what: str, show: bool):
        self.total, self.what, self.show, self._bar = total, what, show, None

    def __enter__(self):
        if not self.show:
            return lambda done: None
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.start()
        task = self._bar.add_task(escape(printable(self.what)), total=self.total)
        return lambda done: self._bar.update(task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

"""Human and JSON output. Outside text arrives quoted by the library; a last
guard escapes anything unprintable before it reaches a terminal."""

from __future__ import annotations

import json
import sys

from .names import printable, quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .desk import Listing, Outcome


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

"""The web view's pages as HTML, made on the server from what ``list``,
``why`` and ``log`` show (the same listing, the same words: ``cli.render``),
whole without JavaScript: ``curl`` and a screen reader read what a browser
shows. Every piece of outside text (slugs aside, which are names: reasons,
notes, holders, principals, messages, the storm's root) goes through
``html.escape`` after the terminal's own escaping (``names.printable``), so
no text of the storm can become an element. Nothing here reads the storm."""

from __future__ import annotations

from html import escape

from ..cli.render import event_text, last_attempt, mark_words, why_text
from ..core.fold import outcome
from ..core.halt import halt_note
from ..core.names import printable
from ..core.starving import starving_detail

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from ..core.outcome import Listing
    from ..core.resolver import Row
    from ..core.why import Why

#: the script that follows the storm live (``/live.js``): it asks ``/api/head``
#: every second and, when the storm's version changed, fetches the page again
#: and puts its <main> and head line in place (a 503 page too: the storm cannot
#: be read now, and says why); without it the page is whole
LIVE_JS = """\
"use strict";
(function () {
  var every = 1000;
  function version() { return document.body.getAttribute("data-version"); }
  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    ["main", "#head"].forEach(function (sel) {
      var now = document.querySelector(sel), fresh = doc.querySelector(sel);
      if (now && fresh) { now.replaceWith(document.importNode(fresh, true)); }
    });
    document.body.setAttribute("data-version", doc.body.getAttribute("data-version"));
    document.title = doc.title;
  }
  function tick() {
    fetch("/api/head", {cache: "no-store", credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (head) {
        if (!head || head.version === version()) { return null; }
        return fetch(location.href, {cache: "no-store", credentials: "same-origin"})
          .then(function (r) { return r.ok || r.status === 503 ? r.text() : null; })
          .then(function (html) { if (html) { swap(html); } });
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
"""

STYLE_CSS = """\
body { font-family: system-ui, sans-serif; margin: 1rem 2rem; color: #1b1b1b; background: #fff; }
header { border-bottom: 1px solid #ccc; margin-bottom: 1rem; }
nav a { margin-right: 1rem; }
code, .mono { font-family: ui-monospace, monospace; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1.5rem; }
caption { text-align: left; font-weight: bold; padding: .3rem 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.banner { padding: .5rem .75rem; margin: .5rem 0; border-left: 4px solid; }
.halted { background: #fdecea; border-color: #c62828; }
.moved, .stale, .warning { background: #fff8e1; border-color: #f9a825; }
.error { background: #fdecea; border-color: #c62828; }
tr.ready td.state { color: #1b5e20; font-weight: bold; }
tr.running td.state { color: #0d47a1; font-weight: bold; }
tr.blocked td.state, tr.quarantined td.state, tr.cycle td.state { color: #b71c1c; }
tr.held td.state { color: #e65100; font-weight: bold; }
tr.refused { background: #fff3f3; }
td:nth-child(2), td.state { white-space: nowrap; }
.decision { font-size: 1.2rem; }
form.filter label { margin-right: .5rem; }
"""


def text(value: object) -> str:
    """Outside text as HTML: escaped for a terminal first (what the CLI
    prints), then for HTML (markup, quotes)."""
    return escape(printable(str(value)), quote=True)


def page(title: str, body: str, root: str, head: tuple[int, str | None], version: str) -> str:
    """A whole page: the storm named, the navigation, the chain's head
    (``head``: seq and digest), ``body`` as its <main>; ``version`` is what
    ``/live.js`` compares with ``/api/head`` to know the storm changed."""
    seq, digest = head
    chain = (f"log line {seq}, digest <code title=\"{text(digest)}\">{text(digest[:16])}…</code>" if digest
             else "the log has recorded nothing yet")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{text(title)} · storm-queue</title><link rel=\"stylesheet\" href=\"/style.css\">"
        f"<script src=\"/live.js\" defer></script></head>\n<body data-version=\"{text(version)}\">\n"
        f"<header><p>storm-queue, read-only view of <code>{text(root)}</code></p>"
        "<nav aria-label=\"pages\"><a href=\"/\">Run order</a><a href=\"/log\">Log</a>"
        "<a href=\"/metrics\">Metrics</a><a href=\"/api/list\">/api/list</a><a href=\"/api/log?last=50\">/api/log</a></nav>"
        f"<p id=\"head\">Chain head: {chain}</p></header>\n<main>\n{body}\n</main>\n</body></html>\n"
    )


def banners(listing: Listing) -> str:
    """The halt, a move, a stale lane and the warnings, one banner each."""
    out = []
    view = listing.view
    if view.halt is not None:
        out.append(f"<p class=\"banner halted\" role=\"status\"><strong>Halted:</strong> {text(halt_note(view.halt))}</p>")
    if listing.moved_to:
        out.append(f"<p class=\"banner moved\" role=\"status\"><strong>Moved:</strong> this storm moved to "
                   f"<code>{text(listing.moved_to)}</code>; what follows is the storm as it was when it moved</p>")
    for w in listing.warnings:
        out.append(f"<p class=\"banner warning\"><strong>Warning:</strong> {text(w)}</p>")
    return "\n".join(out)


def _lease(r: Row) -> str:
    lease = r.run.lease
    if lease is None:
        return ""
    return f"{text(lease.holder)} (token {lease.token}, until {text(lease.expires)})"


def _row(r: Row, listing: Listing) -> str:
    mark = listing.marks.get(r.slug) if r.prioritised else None
    why = mark_words(mark, r.slug, listing.needs.get(r.slug, ()))
    prio = f"yes, by {text(mark.by)} at {text(mark.at)}" if mark else ("yes" if r.prioritised else "")
    if why:
        prio += f"; {text(why)}"
    detail = "; ".join(text(w) for w in (r.status, last_attempt(r), starving_detail(listing, r.slug)) if w)
    return (f"<tr class=\"{text(r.state)}\"><td>{r.position or '–'}</td>"
            f"<td><a href=\"/lane/{text(r.slug)}\">{text(r.slug)}</a></td><td>{text(r.issue)}</td>"
            f"<td class=\"state\">{text(r.state)}</td><td>{prio}</td><td>{_lease(r)}</td><td>{detail}</td></tr>")


_HEAD_ROW = ("<tr><th scope=\"col\">#</th><th scope=\"col\">Lane</th><th scope=\"col\">Issue</th>"
             "<th scope=\"col\">State</th><th scope=\"col\">Prioritised</th><th scope=\"col\">Lease</th>"
             "<th scope=\"col\">Detail</th></tr>")


def _table(rows: Iterable[Row], listing: Listing, caption: str, ident: str) -> str:
    body = "\n".join(_row(r, listing) for r in rows)
    return f"<table id=\"{ident}\"><caption>{caption}</caption><thead>{_HEAD_ROW}</thead><tbody>\n{body}\n</tbody></table>"


def run_order(listing: Listing) -> str:
    """The body of ``/``: the decision, the banners, the lanes in run order
    (as ``list`` shows them), the settled ones, stray slugs and skipped lines."""
    view = listing.view
    parts = [f"<h1>Run order</h1>\n<p class=\"decision\">next: <strong>{text(view.decision)}</strong></p>",
             banners(listing)]
    if view.stale:
        parts.append("<p class=\"banner stale\">The priority lane is stale after a change to queue.txt or the "
                     "ledgers; it runs as replayed, and the next request re-derives it.</p>")
    parts.append(_table(view.rows, listing, f"Lanes in run order ({len(view.rows)})", "lanes")
                 if view.rows else "<p>No lane to run.</p>")
    if view.settled:
        parts.append(_table(view.settled, listing, f"Settled lanes ({len(view.settled)})", "settled"))
    if view.stray:
        items = "".join(f"<li>{text(s)}: prioritised, but queue.txt no longer carries it; never run</li>" for s in view.stray)
        parts.append(f"<h2>Stray</h2><ul>{items}</ul>")
    if listing.skipped:
        items = "".join(f"<li>queue.txt line {s.line}: <code>{text(s.text)}</code>: {text(s.why)}</li>"
                        for s in listing.skipped)
        parts.append(f"<h2>Skipped lines</h2><ul>{items}</ul>")
    return "\n".join(p for p in parts if p)


def lane(found: Why) -> str:
    """The body of ``/lane/SLUG``: ``why SLUG``'s lines, each a list item."""
    lines = why_text(found).splitlines()
    items = "\n".join(f"<li>{text(line)}</li>" for line in lines[1:])
    return f"<h1>Lane {text(found.slug)}</h1>\n<p><strong>{text(lines[0])}</strong></p>\n<ul>\n{items}\n</ul>"


def _event_row(event: dict[str, Any]) -> str:
    head = f"{event['seq']:>6} {printable(event['at'])} {printable(event['by'])} "
    words = event_text(event)
    body = words[len(head):] if words.startswith(head) else words
    how = outcome(event)
    action = event.get("requested", event["action"]) if how == "refused" else event["action"]
    return (f"<tr class=\"{how}\"><td>{event['seq']}</td><td>{text(event['at'])}</td><td>{text(event['by'])}</td>"
            f"<td>{text(action)}</td><td>{how}{' (' + text(event.get('code')) + ')' if how == 'refused' else ''}</td>"
            f"<td>{text(body)}</td></tr>")


def log(events: list[dict[str, Any]], slug: str, action: str, actions: tuple[str, ...], window: int, whole: bool) -> str:
    """The body of ``/log``: a filter form (by lane and action), then the
    matching events newest first; ``window``: how many of the log's last
    events were searched (``whole``: they are the whole log)."""
    options = "".join(f"<option value=\"{a}\"{' selected' if a == action else ''}>{a}</option>" for a in ("", *actions))
    form = ("<form class=\"filter\" method=\"get\" action=\"/log\">"
            f"<label>Lane <input name=\"slug\" value=\"{text(slug)}\" size=\"20\"></label>"
            f"<label>Action <select name=\"action\">{options}</select></label>"
            "<button type=\"submit\">Show</button></form>")
    scope = "the whole log" if whole else f"the log's last {window} lines"
    rows = "\n".join(_event_row(e) for e in reversed(events))
    table = (f"<table id=\"events\"><caption>{len(events)} request(s) of {scope}, newest first</caption>"
             "<thead><tr><th scope=\"col\">seq</th><th scope=\"col\">At</th><th scope=\"col\">By</th>"
             "<th scope=\"col\">Action</th><th scope=\"col\">Outcome</th><th scope=\"col\">What</th></tr></thead>"
             f"<tbody>\n{rows}\n</tbody></table>") if events else f"<p>No request of {scope} matches.</p>"
    return f"<h1>Log</h1>\n{form}\n{table}"


def problem(title: str, words: str) -> str:
    """The body of a page that cannot show the storm (or a path it does not know)."""
    return f"<h1>{text(title)}</h1>\n<p class=\"banner error\" role=\"alert\">{text(words)}</p>"

"""Which path answers what (``route``): the pages (``/``, ``/lane/SLUG``,
``/log``), the JSON beside them (``/api/list`` is ``list --all --json``'s
document, ``/api/log?last=N`` the last N events as ``log --json`` prints
them, in a JSON array, ``/api/why/SLUG`` ``why --json``'s, ``/api/head``
the chain's head and the view's version), ``/metrics`` (the text of
``storm-queue metrics``) and the script and style the pages name. The
JSON is made by the functions that make the command line's. A path or a
query this does not know answers 404 without echoing it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from ..core.errors import StormError
from ..core.names import is_name
from . import pages
from .seen import WINDOW

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .seen import Reading, Seen

HTML = "text/html; charset=utf-8"
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
#: the query words each path takes (a path not here takes none)
PARAMS = {"/log": ("slug", "action"), "/api/log": ("last",)}
STATIC = {"/live.js": ("text/javascript; charset=utf-8", pages.LIVE_JS.encode()),
          "/style.css": ("text/css; charset=utf-8", pages.STYLE_CSS.encode())}
#: the events /api/log gives without ?last=N
LAST = 50



def _json(doc: Any, status: int = 200) -> tuple[int, str, bytes]:
    from ..core.jsoncodec import dumps

    return status, JSON, (dumps(doc) + "\n").encode("ascii")


def not_found(words: str = "this view has no such page") -> tuple[int, str, bytes]:
    return 404, TEXT, f"404 not found: {words}; the pages are /, /lane/SLUG, /log, /metrics, /api/list, /api/log\n".encode()


def _page(reading: Reading, title: str, body: str, status: int = 200) -> tuple[int, str, bytes]:
    log = reading.sight.log
    return status, HTML, pages.page(title, body, reading.sight.listing.root, (log.seq, log.digest),
                                    reading.version).encode("utf-8")


def route(seen: Seen, raw: str) -> tuple[int, str, bytes]:
    """The answer to a GET of ``raw`` (the request's target), as (status, content type, body)."""
    if not raw.startswith("/"):
        return not_found()
    parts = urlsplit(raw)
    path = parts.path
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query), max_num_fields=8)
    except ValueError:
        return not_found("a query it cannot read")
    known = PARAMS.get(path, ())
    if any(k not in known or len(v) != 1 for k, v in query.items()):
        return not_found("a query it does not know")
    words = {k: v[0] for k, v in query.items()}
    if path in STATIC:
        kind, body = STATIC[path]
        return 200, kind, body
    reading = seen.current()
    if path == "/api/head":
        log = reading.sight.log if reading.sight is not None else None
        return _json({"version": reading.version, "seq": log.seq if log else None, "digest": log.digest if log else None,
                      "error": reading.error or None})
    if reading.sight is None:
        return _unreadable(reading, path)
    if path == "/":
        return seen.answer(reading, "/", lambda r: _page(r, "Run order", r.front))
    if path == "/api/list":
        from ..cli.render import listing_json

        return seen.answer(reading, "/api/list", lambda r: _json(listing_json(r.sight.listing)))
    if path == "/metrics":
        from ..core.metrics import CONTENT_TYPE, exposition

        return 200, CONTENT_TYPE, exposition(reading.sight.metrics()).encode("utf-8")
    try:
        if path.startswith("/lane/") or path.startswith("/api/why/"):
            return _why(seen, reading, path)
        if path == "/log":
            return _log(seen, reading, words.get("slug", ""), words.get("action", ""))
        if path == "/api/log":
            return _api_log(seen, reading, words.get("last", str(LAST)))
    except StormError as exc:  # the log or the lane read anew, and found unreadable since the reading
        from ..roots import hide
        from .seen import Reading

        return _unreadable(Reading(None, reading.version, error=hide(str(exc)), exit=exc.exit_code), path)
    return not_found()


def _unreadable(reading: Reading, path: str) -> tuple[int, str, bytes]:
    """503: the storm cannot be read now (the words ``list`` would say)."""
    if path.startswith("/api/") or path == "/metrics":
        return _json({"outcome": "unknown" if reading.exit == 3 else "error", "message": reading.error,
                      "exit": reading.exit}, 503)
    body = pages.page("Cannot read the storm", pages.problem("The storm cannot be read now", reading.error),
                      "", (0, None), reading.version)
    return 503, HTML, body.encode("utf-8")


def _why(seen: Seen, reading: Reading, path: str) -> tuple[int, str, bytes]:
    api = path.startswith("/api/")
    slug = path.split("/", 3 if api else 2)[-1]
    if not is_name(slug):
        return not_found("no lane by that name")

    def make(r: Reading) -> tuple[int, str, bytes]:
        found = seen.why(slug)
        if api:
            from ..cli.render import why_json

            return _json(why_json(found), 200 if found.known else 404)
        if not found.known:
            return _page(r, "No such lane", pages.problem("No such lane", "queue.txt, the ledgers and the log know "
                                                          "no lane by that name"), 404)
        return _page(r, f"Lane {slug}", pages.lane(found))

    return seen.answer(reading, path, make)


def _log(seen: Seen, reading: Reading, slug: str, action: str) -> tuple[int, str, bytes]:
    from ..core.framing import ACTIONS
    from ..service.history import Filter

    actions = tuple(a for a in ACTIONS if a != "refused")
    if (slug and not is_name(slug)) or (action and action not in ACTIONS):
        return not_found("a lane or action it does not know")

    def make(r: Reading) -> tuple[int, str, bytes]:
        lines, whole = seen.events(r.sight)
        flt = Filter(frozenset((slug,)) if slug else frozenset(), actions=frozenset((action,)) if action else frozenset(),
                     refused=action == "refused")
        events = [event for _, event in lines if flt.matches(event)]
        return _page(r, "Log", pages.log(events, slug, action, ("refused", *actions), len(lines), whole))

    return seen.answer(reading, f"/log?{slug}&{action}", make)


def _api_log(seen: Seen, reading: Reading, last: str) -> tuple[int, str, bytes]:
    if not (last.isascii() and last.isdigit() and 1 <= int(last) <= WINDOW):
        return 400, TEXT, f"400 bad request: last must be a whole number from 1 to {WINDOW}\n".encode()
    from ..service.history import printable_line

    def make(r: Reading) -> tuple[int, str, bytes]:
        lines, _ = seen.events(r.sight)
        chosen = lines[-int(last):]
        body = b"[" + b",".join(printable_line(line, event).rstrip(b"\n") for line, event in chosen) + b"]\n"
        return 200, JSON + "; charset=utf-8", body

    return seen.answer(reading, f"/api/log?{last}", make)

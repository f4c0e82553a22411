"""Human and JSON output. Outside text arrives quoted by the library; a last
guard escapes anything unprintable before it reaches a terminal."""

from __future__ import annotations

from ..core.exit_codes import AUTHORITY, CODES
from ..core.logread import ADOPT_HINT, OLD_FORMAT
from ..core.names import printable, quote
from ..core.outcome import act_json
from ..roots import shown
from .standing import next_words, none_words, slots_json, slots_line, slots_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..core.fold import Mark, Run
    from ..core.queuetext import Skipped
    from ..core.resolver import Row
    from ..core.verify import Audit
    from ..core.why import Why
    from ..service.storm import Listing


def mark_json(mark: Mark | None) -> dict[str, Any] | None:
    if mark is None:
        return None
    return {"seq": mark.seq, "at": mark.at, "by": mark.by, "action": mark.action, "slug": mark.slug, "reason": mark.reason}


def _row_json(r: Row, listing: Listing) -> dict[str, Any]:
    from ..core.starving import wait_json  # here, not at the top: a request's answer needs neither it nor ``halt``

    return {"position": r.position, "slug": r.slug, "issue": r.issue, "deps": list(r.deps),
            "prioritised": r.prioritised, "state": r.state, "status": r.status,
            "waits_on": list(r.waits_on), "mark": mark_json(listing.marks.get(r.slug) if r.prioritised else None),
            "running": r.running or None, **run_json(r.run), **wait_json(listing.waits.get(r.slug))}


def run_json(run: Run) -> dict[str, Any]:
    """What runners did with a lane: its lease, attempts, their history,
    quarantine and schedule; and the hold in force (who held it, when, why)."""
    lease = run.lease
    return {
        "lease": None if lease is None else {"holder": lease.holder, "token": lease.token, "by": lease.by,
                                             "claimed": lease.claimed, "expires": lease.expires, "ttl": lease.ttl},
        "attempts": run.attempts, "quarantined": run.quarantined, "not_before": run.not_before,
        "unparked": act_json(run.unparked), "cancelled": act_json(run.cancelled), "held": act_json(run.held),
        "history": [{"token": a.token, "holder": a.holder, "at": a.at, "end": a.end, "ended": a.ended, "note": a.note}
                    for a in run.history],
    }


def listing_json(listing: Listing) -> dict[str, Any]:
    view = listing.view
    return {
        "root": listing.root,
        "decision": view.decision,
        "rows": [_row_json(r, listing) for r in view.rows],
        "stray": list(view.stray),
        "skipped": [skipped_json(s) for s in listing.skipped],
        "warnings": listing.warnings,
        "settled": [_row_json(r, listing) for r in view.settled],
        "starving_after": listing.starving_after,
        "halted": view.halt is not None, "halt": act_json(view.halt),
        "slots": slots_json(listing.slots), "moved": listing.moved_to or None,
    }


def skipped_json(s: Skipped) -> dict[str, Any]:
    """A skipped ``queue.txt`` line as JSON."""
    return {"line": s.line, "text": s.text, "why": s.why}


def skipped_text(s: Skipped) -> str:
    """A skipped ``queue.txt`` line in words, its text quoted and escaped."""
    return f"skipped: queue.txt line {s.line}: {quote(s.text)}: {printable(s.why)}"


def kept_words(mark: Mark, needs: tuple[str, ...]) -> str:
    """For which lane a lane that was not named is in the priority lane:
    the lane that pulled it forward while that one still needs it, else
    the named lanes that need it now (``needs``: ``lane.keepers``)."""
    if needs and mark.slug not in needs:
        return f"kept for {', '.join(printable(s) for s in needs)}"
    return f"pulled forward for {printable(mark.slug)}"


def mark_words(mark: Mark | None, slug: str, needs: tuple[str, ...] = ()) -> str:
    """Who put ``slug`` in the priority lane, for which lane (``kept_words``), and why."""
    if mark is None:
        return ""
    words = "" if mark.slug == slug else kept_words(mark, needs)
    if mark.reason is not None:
        words = (words + "; " if words else "") + f"reason {quote(mark.reason)}"
    return words


def last_attempt(r: Row) -> str:
    """How a quarantined lane's last attempt ended, with the failure's own
    note (quoted: outside text); nothing for any other lane."""
    if r.state != "quarantined" or not r.run.history:
        return ""
    last = r.run.history[-1]
    words = f"last attempt: token {last.token} {printable(last.end or 'not ended')}"
    if last.note is not None:
        words += f", note {quote(last.note)}"
    return words


def _plain_row(r: Row, listing: Listing, widths: tuple[int, int, int]) -> str:
    from ..core.starving import starving_detail

    mark = listing.marks.get(r.slug) if r.prioritised else None
    why = mark_words(mark, r.slug, listing.needs.get(r.slug, ()))
    if r.state == "quarantined" and why.startswith("reason "):  # after the failure's note, never read as its reason
        why = f"prioritised with {why}"
    detail = "; ".join(w for w in (printable(r.status), last_attempt(r), why, starving_detail(listing, r.slug)) if w)
    by, at = (printable(mark.by) or "-", printable(mark.at) or "-") if mark else ("-", "-")
    pos = str(r.position) if r.position else "-"
    sw, iw, bw = widths
    return (f"{pos:>4} {'*' if r.prioritised else '-'} {r.slug:<{sw}} {r.issue:<{iw}} {r.state:<8} "
            f"{by:<{bw}} {at:<27} {detail}")


def listing_text(listing: Listing, show_settled: bool = False) -> str:
    """The listing as stable plain text (warnings go to stderr, as every
    command's do). A lane is one line of whitespace-separated fields:
    POSITION PRIORITY SLUG ISSUE STATE BY AT DETAIL, where PRIORITY is ``*``
    for a lane in the priority lane and ``-`` otherwise, BY and AT name the
    request that put it there (``-`` when none), POSITION is ``-`` for a
    settled lane, and DETAIL (the rest of the line) says in words what the
    lane waits on. Every other line starts with a word and a colon."""
    from ..core.halt import halt_note

    view = listing.view
    rows = view.rows + (view.settled if show_settled else ())
    lines = [f"storm: {printable(listing.root)}", f"next: {view.decision}"]
    if listing.moved_to:  # first of all: the storm runs elsewhere
        lines = [f"next: {next_words(view.decision, listing.moved_to)}", lines[0]]
    elif listing.slots is not None:
        lines.append(f"slots: {slots_line(view.decision, listing.slots)}")
    if view.halt is not None:
        lines.append(f"halted: {halt_note(view.halt)}")
    if rows:
        marks = [listing.marks.get(r.slug) for r in rows if r.prioritised]
        widths = (max(len(r.slug) for r in rows), max(len(r.issue) for r in rows),
                  max([len(printable(m.by)) for m in marks if m] + [1]))
        lines += [_plain_row(r, listing, widths) for r in rows]
    if not (rows if listing.only else view.rows):  # narrowed to some states: none of those shown, settled too
        lines.append(f"lanes: {none_words(listing)}")
    if view.settled and not show_settled:
        lines.append(f"settled: {len(view.settled)} lane(s), not listed (--all lists them)")
    for slug in view.stray:
        mark = listing.marks.get(slug)
        who = f" by {printable(mark.by)} at {printable(mark.at)}" if mark else ""
        lines.append(f"stray: {slug} (prioritised{who}, but queue.txt no longer carries it; never run)")
    for s in listing.skipped:
        lines.append(skipped_text(s))
    return "\n".join(lines)


def _lanes(words: str, slugs: list[str]) -> str:
    return f"; {words} {' '.join(printable(s) for s in slugs)}" if slugs else ""


def _refusal_label(event: dict[str, Any]) -> str:
    """What kind of refusal a recorded one was, by its code in the one
    vocabulary (``exit_codes.CODES``): ``[not authorised]`` for an authority
    code the caller did not pass, ``[cannot be done as asked]`` for a shape
    or lookup code, whoever asked; nothing for a code this version does not
    know."""
    code = event.get("code")
    if code in AUTHORITY:
        return "" if event.get("authorised") else " [not authorised]"
    return " [cannot be done as asked]" if code in CODES else ""


def event_text(event: dict[str, Any], appended: str = "appended to queue.txt") -> str:
    """One recorded event as one line: seq, time, who, action, lane, what
    moved, the outcome and the reason; outside text quoted and escaped.
    ``appended``: how the store says a push enqueued its lane
    (``Upkeep.appended``: a directory's queue.txt line, a database's row)."""
    action = event["action"]
    head = f"{event['seq']:>6} {printable(event['at'])} {printable(event['by'])} "
    if action == "refused":
        slug = "-" if event.get("slug") is None else quote(event["slug"])
        body = f"{printable(event['requested'])} {slug} refused ({printable(event['code'])}): {printable(event['message'])}"
        body += _refusal_label(event)
    elif action in ("push", "bump", "unbump"):
        outcome = f"noop: {printable(event['noop'])}" if event.get("noop") else "done"
        body = f"{action} {printable(event['slug'])}"
        if action != "unbump":
            body += f" (issue {printable(event['issue'])})"
        if event.get("appended"):
            body += f" {appended}"
        if event.get("not_before") is not None:
            body += f" not before {printable(event['not_before'])}"
        body += f" {outcome}" + _lanes("moved", event.get("moved", [])) + _lanes("removed", event.get("removed", []))
    elif action == "reset":
        body = f"reset: a new log, abandoning {event['abandons']} bytes of the old one"
        if "kept" in event:  # --keep-intact
            body += (f"; kept its first {event['kept']} line(s), the last with digest "
                     f"{printable(str(event.get('kept_digest')))[:16]}, of {printable(str(event.get('abandoned')))}; "
                     f"{event['lost']} bytes lost")
    elif action == "adopt":
        if event.get("noop"):
            body = f"adopt noop: {printable(event['noop'])}"
        else:
            body = (f"adopt: took over the earlier tool's {printable(event['name'])} ({event['lines']} lines, kept as "
                    f"{printable(event['kept'])}), its lane: {' '.join(printable(r['slug']) for r in event['lane']) or '(empty)'}")
    elif action == "repair":
        body = f"repair: cut {event['torn']} torn bytes, kept in {printable(event['side'])}"
    elif action == "migrate":
        body = f"migrate: the storm moved to {printable(shown(event['to']))}; this log ends here"
        if event.get("carried"):
            body += f"; carried {', '.join(printable(c) for c in event['carried'])}"
    elif action == "init":
        body = f"init: the storm {printable(event['storm'])} begins, operated by {printable(event['operator'])}"
    elif action == "declare":
        body = f"declare: storm.toml {printable(event['sha256'][:16])}"
        if event.get("noop"):
            body += f" noop: {printable(event['noop'])}"
    elif action == "add":
        body = f"add {printable(event['slug'])} (issue {printable(event['issue'])})"
        body += " queued" if event["appended"] else f" noop: {printable(event.get('noop') or 'already queued')}"
    elif action in ("grant", "revoke"):
        body = f"{action} {printable(event['kind'])} {printable(event['role'])}"
        if event.get("noop"):
            body += f" noop: {printable(event['noop'])}"
    elif action == "upgrade":
        body = f"upgrade: the schema from version {event['from']} to {event['to']}"
        if event.get("noop"):
            body += f" noop: {printable(event['noop'])}"
    elif action in ("halt", "resume"):
        body = action + (f" noop: {printable(event['noop'])}" if event.get("noop") else "")
    elif action == "settle":
        body = f"settle {printable(event['slug'])} as {printable(event['ledger'])}"
        if event.get("noop"):
            body += f" noop: {printable(event['noop'])}"
    else:
        body = f"{printable(action)} {printable(event['slug'])}" + _RUNNER_WORDS.get(action, lambda e: "")(event)
    if event.get("key") is not None:
        body += f"; key {quote(event['key'])}"
    if event.get("reason") is not None:
        body += f"; reason {quote(event['reason'])}"
    return head + body


_RUNNER_WORDS = {
    "claim": lambda e: f" to {printable(e['holder'])}: token {e['token']}, attempt {e['attempt']}, until {printable(e['expires'])}",
    "renew": lambda e: f": token {e['token']} until {printable(e['expires'])}",
    "finish": lambda e: f": token {e['token']} {printable(e['result'])}" + (f"; note {quote(e['note'])}" if e.get("note") is not None else "")
    + (f"; claimed again after {printable(e['not_before'])}" if e.get("not_before") is not None else ""),
    "expire": lambda e: f": token {e['token']}, lease expired at {printable(e['expired'])}",
    "recover": lambda e: (f": the live lease of token {e['token']}, its holder gone (--force)" if e.get("force") else
                          f": a running marker with no lease (token {e['token'] if e['token'] is not None else 'none'})"),
    "release": lambda e: f": token {e['token']} given back by its holder {printable(e['holder'])}",
    "cancel": lambda e: (f" noop: {printable(e['noop'])}" if e.get("noop") else
                         ": settled abandoned" + ("" if e["token"] is None else f"; the lease of token {e['token']} revoked")),
    "quarantine": lambda e: f": after {e['attempts']} attempts (budget {e['budget']})",
    "waive": lambda e: (f": waiver of {printable(e['dep'])} ended" if e["undo"] else f": {printable(e['dep'])} waived")
    + (f" (noop: {printable(e['noop'])})" if e.get("noop") else "") + _lanes("moved", e.get("moved", []))
    + _lanes("removed", e.get("removed", [])),
    "hold": lambda e: f" noop: {printable(e['noop'])}" if e.get("noop") else ": not started until unheld",
    "unhold": lambda e: f" noop: {printable(e['noop'])}" if e.get("noop") else ": may start again",
    "schedule": lambda e: f": not before {printable(e['not_before'] or 'any time')}" + (f" (noop: {printable(e['noop'])})" if e.get("noop") else ""),
}


def why_json(why: Why) -> dict[str, Any]:
    return {
        "slug": why.slug, "known": why.known, "state": why.state, "status": why.status,
        "issue": why.issue, "position": why.position, "of": why.of, "next": why.is_next,
        "ahead": list(why.ahead), "running": list(why.running),
        "deps": [{"slug": d.slug, "state": d.state, "status": d.status, "satisfied": d.satisfied, "waived": d.waived}
                 for d in why.deps],
        "waits_on": list(why.waits_on), "prioritised": why.prioritised, "named": why.named,
        "mark": mark_json(why.mark), "needed_by": list(why.needed_by), "in_queue": why.in_queue,
        "skipped": [skipped_json(s) for s in why.skipped],
        "decision": why.decision, "stale": why.stale,
        # what runners did with it (added by issue 6; the fields above never change)
        "running_kind": why.how or None, "marker_token": why.marker_token, "last_token": why.run.token,
        "budget": why.budget, **run_json(why.run),
        # the operator's waivers of its dependencies (issue 12)
        "waivers": [{"dep": dep, "seq": w.seq, "at": w.at, "by": w.by, "reason": w.reason} for dep, w in why.waivers],
        "halted": why.halt is not None, "halt": act_json(why.halt),
        # every slot held (issue 33 item 7), and a storm that moved (item 6)
        "slots": slots_json(why.slots), "waits_for_slot": why.waits_for_slot, "moved": why.moved or None,
        "warnings": list(why.warnings),
    }


#: how many of the lanes ahead ``why`` names (``--json``'s ``ahead`` holds them all): a lane late in a
#: long queue would otherwise be one line of every lane before it
AHEAD_NAMED = 10


def _list(slugs: tuple[str, ...], most: int | None = None) -> str:
    """The slugs, escaped; past ``most``, the first ``most`` and how many more."""
    if most is None or len(slugs) <= most:
        return ", ".join(printable(s) for s in slugs)
    return f"{_list(slugs[:most])} and {len(slugs) - most:,} more (storm-queue list shows the order)"


def why_text(why: Why) -> str:
    """Where the lane stands and why, a few plain lines; outside text escaped."""
    from ..core.halt import halt_note

    name = quote(why.slug) if why.state == "invalid" else why.slug
    lines = [f"{name}: {why.state}" + ("" if why.status == why.state else f": {printable(why.status)}")
             + (f": waits for a slot ({slots_words(why.slots)})" if why.waits_for_slot else "")]
    if why.issue is not None:
        lines.append(f"issue: {printable(why.issue)}")
    if why.position is not None:
        where = f"position {why.position} of {why.of} in run order"
        if why.waits_for_slot:
            where += "; it is what runs next, once a slot frees"
        elif why.is_next:
            where += "; it is what next runs"
        lines.append(where)
        if why.ahead:
            lines.append(f"runs after: {_list(why.ahead, AHEAD_NAMED)}")
        if why.running:
            lines.append(f"running now: {_list(why.running)}")
    lines += _run_lines(why)
    for d in why.deps:
        lines.append(f"depends on: {printable(d.slug)}: {printable(d.status)}"
                     + (" (waived)" if d.waived else "" if d.satisfied else " (not satisfied)"))
    for dep, w in why.waivers:
        lines.append(f"waiver: {printable(dep)} waived by {printable(w.by)} at {printable(w.at)} (waive #{w.seq})"
                     + ("" if w.reason is None else f", reason {quote(w.reason)}")
                     + f"; it runs without waiting for it (storm-queue waive {printable(why.slug)} {printable(dep)} "
                     "--undo --reason TEXT ends it)")
    if why.prioritised:
        mark = why.mark
        how = "prioritised by name" if why.named else (
            f"in the priority lane, {kept_words(mark, why.needed_by)}" if mark and mark.slug != why.slug
            else "in the priority lane")
        if mark is not None:
            how += f" by {printable(mark.by)} at {printable(mark.at)} ({mark.action} #{mark.seq})"
            if mark.reason is not None:
                how += f", reason {quote(mark.reason)}"
        lines.append(how)
        if why.needed_by:
            lines.append(f"needed by prioritised: {_list(why.needed_by)}")
    elif why.in_queue:
        lines.append("not prioritised: it runs in queue.txt order")
    for s in why.skipped:
        lines.append(skipped_text(s))
    if why.stale:
        lines.append("note: the priority lane is stale after a change to queue.txt or the ledgers; "
                     "the next request re-derives it")
    if why.halt is not None:
        lines.append(f"halted: {halt_note(why.halt)}")
    lines.append(f"next: {next_words(why.decision, why.moved, why.slots)}")
    return "\n".join(lines)


_ENDS = {"ok": "finished ok", "failed": "failed", "expired": "its lease expired and was taken back",
         "recovered": "taken back by the operator's recover", "released": "released by its holder",
         "cancelled": "its lease revoked by a cancel"}


def _run_lines(why: Why) -> list[str]:
    """What runners did with the lane, in words: how it runs (a lease, an
    orphan, a marker with no lease), the attempts spent of the budget and
    each attempt, quarantine and schedule; outside text quoted or escaped."""
    run, slug, lines = why.run, printable(why.slug), []
    lease = run.lease
    if why.how == "lease" and lease is not None:
        lines.append(f"lease: held by {printable(lease.holder)} under token {lease.token}, claimed at "
                     f"{printable(lease.claimed)} by {printable(lease.by)}, until {printable(lease.expires)}; "
                     "only that token may renew or finish it")
    elif why.how == "orphan" and lease is not None:
        lines.append(f"lease: orphaned: the lease of {printable(lease.holder)} under token {lease.token} (claimed at "
                     f"{printable(lease.claimed)}) expired at {printable(lease.expires)}; the next claim or "
                     "storm-queue recover takes it back")
    elif why.how == "marker":
        token = "carrying no token" if why.marker_token is None else f"carrying token {why.marker_token}"
        lines.append(f"marker: a running marker with no lease behind it ({token}): a runner that takes no leases (one "
                     "that runs what storm-queue next decides) marks every lane it runs so; claim and next leave it "
                     f"alone, and it runs until that runner finishes it (should that runner be gone, the operator's "
                     f"storm-queue recover {slug} --force --reason TEXT takes it back)")
    if run.history or run.attempts or run.quarantined is not None:
        of = "" if why.budget is None else f" of {why.budget}"
        earlier = len(run.history) - run.attempts
        lines.append(f"attempts: {run.attempts}{of} spent" + (
            f" since it was last unparked ({earlier} before that)" if earlier > 0 else ""))
        for number, a in enumerate(run.history, 1):
            if a.end is not None:
                end = f"{_ENDS.get(a.end, printable(a.end))} at {printable(a.ended or '')}"
            elif lease is not None and lease.token == a.token:
                end = "its lease expired, not yet taken back" if why.how == "orphan" else "held now"
            else:
                end = "not ended"
            note = "" if a.note is None else f"; note {quote(a.note)}"
            lines.append(f"attempt {number}: token {a.token}, {printable(a.holder)}, claimed at {printable(a.at)}: {end}{note}")
    if run.unparked is not None:
        u = run.unparked
        lines.append(f"unparked: by {printable(u.by)} at {printable(u.at)} (unpark #{u.seq})"
                     + (f", reason {quote(u.reason)}" if u.reason is not None else ""))
    if run.cancelled is not None:
        c = run.cancelled
        lines.append(f"cancelled: by {printable(c.by)} at {printable(c.at)} (cancel #{c.seq})"
                     + (f", reason {quote(c.reason)}" if c.reason is not None else ""))
    if run.quarantined is not None:
        lines.append(f"quarantined: since {printable(run.quarantined)}, after {run.attempts} attempts; it is never "
                     f"claimed until the operator, having looked at its attempts, runs: "
                     f"storm-queue unpark {slug} --reason TEXT")
    if run.held is not None:
        h = run.held
        lines.append(f"held: by {printable(h.by)} at {printable(h.at)} (hold #{h.seq})"
                     + (f", reason {quote(h.reason)}" if h.reason is not None else "")
                     + f"; it is not started until storm-queue unhold {slug} --reason TEXT")
    if run.not_before is not None:
        lines.append(f"scheduled: not before {printable(run.not_before)}"
                     + ("; that time has come" if why.due else "; until then it keeps its place and is passed over"))
    return lines


def audit_text(audit: Audit) -> str:
    """``verify``'s report: the verdict first, the first bad line named, and
    what the operator does (``Audit.remedy``, the store's words: a reset, or
    an adopt of the earlier tool's log, or a restore from a backup)."""
    name = printable(audit.log)
    p = audit.problem
    if p is not None:
        where = f" (line {p.line} starts at byte {p.offset})" if p.line else ""
        way = ADOPT_HINT if p.what == OLD_FORMAT else audit.remedy
        hint = "" if audit.checkpoint == "disagrees" else f"\n{way}"
        return f"{name}: NOT sound: {printable(p.what)}{where}{hint}"
    lines = [f"{name}: sound: {audit.lines} line(s), {audit.length} bytes; {audit.agree}"]
    if audit.checkpoint == "agrees":
        lines.append(f"{audit.kept}: at line {audit.checkpoint_line}, agrees with the whole replay")
    elif audit.checkpoint == "ignored":
        lines.append(f"{audit.kept}: ignored ({printable(audit.checkpoint_why or '')})")
    else:
        lines.append(f"{audit.kept}: none")
    lines.append(f"replay: {len(audit.lane)} lane(s) in the priority lane, {len(audit.named)} by name")
    return "\n".join(lines)

"""What the service answers: a listing, the outcome of a request, the step
an admitted request takes, and the request itself as it was given."""

from __future__ import annotations

from . import fold, queuetext
from .exit_codes import exit_code
from .framing import sha256
from .names import printable
from .records import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    from .logread import Cut
    from .resolver import View
    from .runs import Slots


@dataclass
class Listing:
    """What ``list`` shows: the resolved view and everything worth saying;
    ``marks`` says, for each slug in the priority lane, which recorded
    request put it there (who, when, why), and ``needs`` which named
    lanes keep it there now. ``seq`` is the number of the
    log's last line as read (0: nothing recorded): a reader that keeps
    the listing knows the log has grown when it changes."""

    root: str
    view: View
    skipped: tuple[queuetext.Skipped, ...]
    warnings: list[str]
    marks: Mapping[str, fold.Mark] = field(default_factory=dict)
    seq: int = 0
    #: how long each lane of the view has waited (``starving.Wait``, by slug; empty when not asked)
    waits: Mapping[str, Any] = field(default_factory=dict)
    #: ``[priority] starving_after`` in seconds (None: no lane is ever starving)
    starving_after: int | None = None
    #: for each lane a prioritised lane requires, the live named lanes that require it now (``lane.keepers``)
    needs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: where the storm moved (``migrate``), as printed; '' while it is kept here
    moved_to: str = ""
    #: the states the rows were narrowed to (``list --state``), in the order asked; () for every lane
    only: tuple[str, ...] = ()
    #: every one of ``[runner] slots`` held while ``next`` answers run: a claim answers wait (``runs.full_slots``)
    slots: Slots | None = None

    @property
    def decision(self) -> str:
        return self.view.decision


#: why a lane left the priority lane without the request asking, as the sentence says it
_SWEPT = {"settled": "now settled", "finished": "now finished, awaiting review",
          "gone": "no longer in queue.txt", "unneeded": "no longer needed by a prioritised lane"}


@dataclass
class Outcome:
    """The answer to a request. ``outcome`` is ``done``, ``noop`` or
    ``refused``; ``recorded`` says whether its log line was written. A dry
    run (``dry_run``) records nothing and carries the run ``order`` the
    request would leave."""

    outcome: str
    action: str
    slug: str | None
    by: str
    code: str | None = None
    message: str = ""
    moved: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    recorded: bool = False
    appended: bool | None = None
    warnings: list[str] = field(default_factory=list)
    event: dict[str, Any] | None = None
    dry_run: bool = False
    order: list[str] | None = None
    #: a claim's decision line; the fencing token and expiry of a lease it took or renewed
    decision: str | None = None
    holder: str | None = None
    token: int | None = None
    expires: str | None = None
    #: the ``seq`` of the first request made under the same key, when this is its repeat
    repeat: int | None = None
    #: the lanes of ``removed`` that left whatever was asked, each with why (``lane.Plan.swept``)
    swept: dict[str, str] = field(default_factory=dict)
    #: what an adopt took over: the old log's name, the name it is kept under, its sha256, bytes, lines and lane
    adopted: dict[str, Any] | None = None
    #: the operator's halt a claim met (it then leased nothing and its decision is ``halted``)
    halt: fold.Act | None = None
    #: a claim's: the first moment after it when time alone changes what the storm decides (a lease
    #: expiring, a schedule coming due; ``runs.next_due``), for a claim that waits; not in the JSON
    due: str | None = None
    #: the lanes a batch (``add --from``) queued, in order
    added: list[str] | None = None
    #: the lanes a batch review (``settle --finished``, ``settle --from``) settled, or would settle, in order
    settled: list[str] | None = None
    #: what a reset kept of the unreadable log and lost, each lost line named (``logread.Cut``)
    cut: Cut | None = None
    #: a ``finish --then-claim``'s: the claim that followed the finish (None: none was asked, the finish was refused)
    claim: Outcome | None = None

    @property
    def exit_code(self) -> int:
        return exit_code(self.code)

    def check(self) -> "Outcome":
        """Return this outcome, or raise ``Refused`` when the request was refused."""
        if self.outcome == "refused":
            from .errors import Refused

            raise Refused(self.code or "", self.message, self.exit_code, self.recorded)
        return self

    def text(self) -> str:
        """A request's outcome in words: one line of what it did (what moved,
        what it removed), then one sentence for each kind of lane it swept out
        of the priority lane whatever it asked (``also took out of the lane,
        now settled: A B``)."""
        if self.outcome == "refused":
            return f"refused ({self.code}): {printable(self.message)}"
        parts = [printable(self.message)]
        if self.moved:
            parts.append("moved: " + " ".join(self.moved))
        own = [s for s in self.removed if s not in self.swept]
        if own:
            parts.append("removed: " + " ".join(own))
        text = "; ".join(parts)
        for why, words in _SWEPT.items():
            swept = [s for s in self.removed if self.swept.get(s) == why]
            if swept:
                text += f"\nalso took out of the lane, {words}: " + " ".join(printable(s) for s in swept)
        if self.cut is not None:
            text += "\n" + cut_text(self.cut)
        if self.order is not None:
            text += "\nrun order after it: " + (" ".join(self.order) or "(no lanes to run)")
        return text

    def to_json(self) -> dict[str, Any]:
        out = {
            "outcome": self.outcome, "code": self.code, "action": self.action, "slug": self.slug,
            "by": self.by, "moved": self.moved, "already": self.already, "removed": self.removed,
            "recorded": self.recorded, "message": self.message,
        }
        if self.appended is not None:
            out["appended"] = self.appended
        out["warnings"] = self.warnings
        if self.dry_run:
            out["dry_run"] = True
            out["order"] = self.order
        for name in ("decision", "holder", "token", "expires", "repeat", "adopted", "added", "settled"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.action == "claim" and self.outcome != "refused":
            out["halted"] = self.halt is not None
            out["halt"] = act_json(self.halt)
        if self.cut is not None:
            out["kept"] = self.cut.kept.seq
            out["lost"] = [line.to_json() for line in self.cut.lost]
            out["abandons"] = self.cut.abandons
            out["missing"] = {"from": self.cut.missing[0], "to": self.cut.missing[1]} if self.cut.missing else None
        return out


#: how many lost lines a reset names in words (``--json`` names every one)
LOST_SHOWN = 20


def cut_text(cut: Cut) -> str:
    """What a reset keeps and loses, in words: the lines kept, then each
    lost line, its number, seq, action and lane (outside text quoted), or
    why it could not be read; past ``LOST_SHOWN``, how many more."""
    from .names import is_name, quote

    def word(text: str | None) -> str:
        return "" if text is None else text if is_name(text) else quote(text)

    lines = [f"kept: lines 1 to {cut.kept.seq}" if cut.kept.seq else "kept: no line"]
    for lost in cut.lost[:LOST_SHOWN]:
        if not lost.readable:
            lines.append(f"lost: line {lost.line}: could not be read ({printable(lost.why or '')})")
            continue
        what = " ".join(w for w in (word(lost.action), word(lost.requested), word(lost.slug)) if w)
        lines.append(f"lost: line {lost.line} (seq {lost.seq}): {what}")
    if len(cut.lost) > LOST_SHOWN:
        lines.append(f"lost: {len(cut.lost) - LOST_SHOWN} more line(s) (--json names every one)")
    if cut.missing:
        first, last = cut.missing
        lines.append(f"lost: line{f's {first} to {last}' if last > first else f' {first}'}: gone from the file (its "
                     f"witness recorded {last} lines), so what they did cannot be named")
    if not cut.lost and not cut.missing:
        lines.append("lost: no line")
    return "\n".join(lines)


def act_json(act: fold.Act | None) -> dict[str, Any] | None:
    """An operator's act (a halt, an unpark) as JSON: who, when, why and its line."""
    if act is None:
        return None
    return {"by": act.by, "at": act.at, "reason": act.reason, "seq": act.seq}


@dataclass
class Step:
    """What an admitted request does: the ``events`` to record (``own`` is
    the index of the request's own, which carries its key and reason; None
    when none is; no events: nothing to record), its answer, a
    ``queue.txt`` line to append first, file effects that must come
    ``before`` the record (undone when the record is not made), and those that only cache it ``after`` (given
    the events recorded, they return notes for stderr)."""

    out: Outcome
    events: list[dict[str, Any]]
    line: str | None = None
    before: Callable[[], Callable[[], None] | None] | None = None  # returns what undoes it
    after: Callable[[list[dict[str, Any]]], list[str]] | None = None
    own: int | None = -1


@dataclass(frozen=True)
class _Asked:
    verb: str
    slug: str | None  # raw text as given, its passwords masked
    reason: str | None
    source: str | None
    key: str | None = None
    args: tuple = ()  # every other argument as given: with the rest, what a key's fingerprint covers


class Request(_Asked):
    """A request as it was given, its caller's text as it may be shown,
    recorded and sent to a database's server: each password in it (a URL
    or a ``password=`` typed where a slug, issue, dependency, time, reason
    or note goes) masked ``***`` (``passwords.hidden``), so no store, no
    refusal and no answer ever holds one. A valid name, issue or time
    holds none, so only refused text and free text change."""

    def __init__(self, verb: str, slug: str | None, reason: str | None, source: str | None, key: str | None = None,
                 args: tuple = ()) -> None:
        super().__init__(verb, masked(slug), masked(reason), masked(source), masked(key), masked(args))

    def fingerprint(self) -> str:
        """What a key binds: a hash of the request's JSON (its verb, slug,
        reason, source and every other argument as given), the same for
        the same arguments. An argument JSON cannot write (a Python
        caller's ``Decimal`` token, an int too long for ``str``) is written
        as ``_written`` says it: such a request is refused by its shape
        check, and recorded under its key as it is without one, never a
        ``TypeError`` or ``ValueError`` of the encoder."""
        from .jsoncodec import dumps

        body = [self.verb, self.slug, self.reason, self.source, list(self.args)]
        try:
            text = dumps(body)
        except (TypeError, ValueError):
            text = dumps(_written(body))
        return sha256(text.encode("ascii")).hexdigest()[:32]


def _written(value: Any) -> Any:
    """``value`` as a fingerprint writes it: itself when JSON writes it
    (so every fingerprint it could write before is kept), a list's items
    each so, an int too long for ``str`` as ``{"int": names.figure(n)}``,
    anything else as ``{"object": TYPE, "repr": ITS REPR}`` (at most 200
    characters of it)."""
    from .jsoncodec import dumps

    try:
        dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    if isinstance(value, (list, tuple)):
        return [_written(item) for item in value]
    if isinstance(value, int):
        from .names import figure

        return {"int": figure(value)}
    try:
        shown = repr(value)[:200]
    except Exception:  # noqa: BLE001 -- a repr that fails: the type alone says it
        shown = ""
    return {"object": type(value).__qualname__, "repr": printable(shown)}


def masked(value: Any) -> Any:
    """``value`` (text, or a tuple or list of values, as a request's
    arguments are) with each password in its text masked ``***``
    (``passwords.hidden``); anything else as it is."""
    if isinstance(value, str):
        if "@" not in value and "=" not in value and "%3" not in value:  # none to mask: re is never loaded for it
            return value
        from .passwords import hidden

        return hidden(value)
    if isinstance(value, (tuple, list)):
        return type(value)(masked(v) for v in value)
    return value


def repeated(req: Request, by: str, keyed: fold.Keyed, at: str, lease: tuple[int, str] | None, dry_run: bool = False,
             warnings: list[str] | None = None) -> Outcome:
    """The first outcome of a keyed request asked again with the same
    arguments, rebuilt from the event that recorded it (``keyed``);
    nothing new is recorded. A claim is repeated only while the lease it
    took is live at ``at`` (``lease``: the token and expiry of its lane's
    lease now, None when it holds none): a repeat never sends a runner to
    work without one. The one answer of a repeat, whichever store (or
    server) found it."""
    from .names import quote

    event = keyed.event
    note = f"a repeat of line {keyed.seq} (key {quote(req.key or '')}): nothing new recorded"
    action = event["action"]
    if action == "claim" and (lease is None or lease[0] != event["token"] or lease[1] <= at):
        out = Outcome("refused", req.verb, event["slug"], by, "stale_fence",
                      f"the lease that this key's claim took (token {event['token']} on {event['slug']}) has ended; "
                      f"claim again under a new key ({note})")
    elif action == "refused":
        out = Outcome("refused", req.verb, req.slug, by, event["code"], f"{event['message']} ({note})")
    else:
        words = (f"nothing changed: {event['noop']}" if event.get("noop") else
                 f"{action} {event.get('slug') or ''}".rstrip() + " was recorded")
        out = Outcome("noop" if event.get("noop") else "done", req.verb, req.slug, by, message=f"{words} ({note})",
                      moved=list(event.get("moved", ())), removed=list(event.get("removed", ())),
                      token=event.get("token"), expires=event.get("expires"))
        if action == "claim":
            out.slug, out.holder = event["slug"], event["holder"]
            out.decision = f"run {event['slug']} {event['issue']} {event['token']}"
        if action in ("push", "add"):
            out.appended = event["appended"]
    out.repeat = keyed.seq
    out.dry_run = dry_run
    out.warnings = list(warnings or ())
    return out

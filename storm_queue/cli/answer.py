"""The answers both command lines print (``entry``'s quick path and
``cli``'s click commands call the same functions, so both print the same
bytes), and the one place where errors become exit codes. The commands run
most often (``next``, ``claim``, ``bump``, ``unbump``, ``push``) are done
here, so that they load no module of the other commands (``handlers``).
SIGINT and SIGTERM end either path through ``interrupted`` (exit 130, 143)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (``signum``). Not an ``Exception``: no
    handler of errors takes it for a crash; ``finally`` blocks still run."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def on_signals() -> None:
    """SIGINT and SIGTERM raise ``Interrupted`` (``_signal``: ``signal``
    would import enum, a tenth of a request's start-up)."""
    import _signal

    for signum in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(signum, _on_signal)


def emit_json(doc: Any) -> None:
    """One JSON document on stdout, ASCII only."""
    from ..core.jsoncodec import dumps

    sys.stdout.write(dumps(doc) + "\n")


def err(text: str) -> None:
    """One line on stderr (after what stdout holds), escaped where it is not printable."""
    from ..core.errors import OutputFailed
    from ..core.names import printable

    try:
        sys.stdout.flush()
    except OutputFailed:  # stdout's own failure is said by run; this line still goes to stderr
        pass
    sys.stderr.write(printable(text) + "\n")


def warn(warnings: list[str]) -> None:
    """Each warning on stderr, one line each."""
    for w in warnings:
        err(f"storm-queue: warning: {w}")


#: while a ``claim --wait`` waits for work: how many lines this process had
#: appended to a directory's log when the wait began, whether the claim
#: recorded anything before it (either store), and when the wait began
WAITING: list[tuple[int, bool, str]] = []


def _lines(events: list[dict[str, Any]]) -> str:
    """Recorded events in words: ``the quarantine a (line 3)``, and so on."""
    return ", ".join(f"the {e['action']}{' ' + e['slug'] if e.get('slug') else ''} (line {e['seq']})" for e in events)


def interrupted(signum: int, as_json: bool) -> NoReturn:
    """Exit 128 + ``signum`` (130 for SIGINT, 143 for SIGTERM) with one line
    on stderr saying what was recorded, and with ``--json`` one document on
    stdout. The writers' lock defers both signals while it is held
    (``log.lock.held``), so a request is either not begun or recorded
    whole: the log lines this process appended say which. A ``claim
    --wait`` interrupted while it waits recorded nothing at the interrupt;
    what it recorded when it began (an expired lease, a quarantine) is said
    as recorded then (``WAITING``)."""
    writer = sys.modules.get("storm_queue.store.directory.log.writer")
    events = list(getattr(writer, "appended", ()))
    if WAITING:
        count, began, since = WAITING[-1]
        words = f"interrupted while claim --wait waited for work (since {since})"
        words += (f": after it began waiting it recorded {_lines(events[count:])}, and its answer may not have been "
                  "printed" if events[count:] else ": nothing was recorded at the interrupt")
        if events[:count]:
            words += f"; when the claim began it recorded {_lines(events[:count])}"
        elif began:
            words += "; when the claim began it recorded what it found (expired leases, quarantines)"
        if events or began:
            words += f"; storm-queue log --last {max(len(events), 1)} shows {'them' if len(events) > 1 else 'it'}"
    elif events:
        last = events[-1]
        slug = f" {last['slug']}" if last.get("slug") else ""
        words = (f"interrupted: the {last['action']}{slug} was recorded (line {last['seq']}) but its answer may not "
                 f"have been printed; storm-queue log --last {len(events)} shows it")
    else:
        words = "interrupted: nothing was recorded"
    from ..core.exit_codes import interrupted as exit_of

    code = exit_of(signum)
    try:
        if as_json:
            emit_json({"outcome": "error", "message": words, "exit": code, "recorded": bool(events)})
        sys.stderr.write(f"\nstorm-queue: {words}\n")
        sys.stderr.flush()
    except (Interrupted, OSError):  # a second signal, or a closed stream: the exit code still tells
        pass
    sys.exit(code)


def said(exc: BaseException) -> tuple[str, str, int]:
    """What a command says of the error ``exc`` that ends it: its outcome
    word (``unknown`` for exit 3, ``error`` for a typed refusal, ``crashed``
    for anything else), its words (no password: ``roots.hide``) and its
    exit code (``core.exit_codes``)."""
    from ..core.errors import StormError
    from ..core.exit_codes import CRASHED
    from ..roots import hide

    if isinstance(exc, StormError):
        return ("unknown" if exc.exit_code == 3 else "error"), hide(str(exc)), exc.exit_code
    return "crashed", hide(f"{type(exc).__name__}: {exc}"), CRASHED


def run(as_json: bool, work: Callable[[], int]) -> NoReturn:
    """Run a command's work and exit with its code; typed errors and crashes
    get the exit codes ``core.exit_codes`` maps them to."""
    from ..core.errors import StormError

    try:
        code = work()
        sys.stdout.flush()
    except (Interrupted, KeyboardInterrupt) as exc:
        interrupted(getattr(exc, "signum", 2), as_json)
    except Exception as exc:  # noqa: BLE001 -- a crash is kept distinct from every refusal
        outcome, words, code = said(exc)
        if as_json:
            doc = {"outcome": outcome, "message": words, "exit": code}
            if hasattr(exc, "recorded"):
                doc["recorded"] = exc.recorded
            if getattr(exc, "moved", ""):  # a storm that moved: where it went, as every read document says
                doc["moved"] = exc.moved
            done = getattr(exc, "outcome", None)
            if done is not None:  # what the request recorded all the same (a claim's decision and token)
                doc = {**done.to_json(), **doc, "warnings": done.warnings}
            emit_json(doc)
        if isinstance(exc, StormError):
            err(f"storm-queue: {words}")
        else:
            err(f"storm-queue: crashed: {words} (this is a bug; please report it)")
    sys.exit(code)


def storm(root: str | None, wait: float = 30.0, reads: bool = False):
    """The storm at ``root`` (or found as ``Storm.find`` finds it). A
    command that only ``reads`` never waits for the writers' lock; one that
    writes to a directory storm says, at a terminal, who holds the lock it
    waits for. A request
    kind loads its own module on first use (``service.storm.KINDS``)."""
    from ..service.storm import Storm

    found = Storm.find(root, wait=wait)
    if not reads:
        found.store.upkeep.tell_waits(_waiting)
    return found


def _waiting(who: str, path: str, wait: float) -> None:
    """Once, while a request waits for the writers' lock: who holds it, at a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write(f"storm-queue: waiting up to --wait {wait:g} seconds for the writers' lock {path}: "
                         f"{who} holds it (Ctrl-C stops, recording nothing)\n")
        sys.stderr.flush()


def next_decision(root: str | None, as_json: bool) -> int:
    """``next``: decide, do the owner's side effects, print the decision
    line (under the operator's halt: ``halted`` and who halted the storm,
    when and why, ``decision_line``). When it cannot decide (any
    exit but 0), its one-line reason (``OUTCOME: WORDS``, ``said``) goes to
    stdout as well as stderr: a runner that logs what ``next`` prints says
    why."""
    try:
        listing, notes = storm(root, reads=True).next()
    except Exception as exc:
        if not as_json:
            from ..core.names import printable

            outcome, words, _ = said(exc)
            say(printable(f"{outcome}: {words}"))
        raise
    for note in notes:
        err(f"storm-queue: {note}")
    halt = listing.view.halt
    if halt is not None:
        from ..core.halt import halt_note

        err(f"storm-queue: {halt_note(halt)}")
    if as_json:
        from ..core.outcome import act_json

        emit_json({"decision": listing.decision, "warnings": listing.warnings, "halted": halt is not None,
                   "halt": act_json(halt)})
    else:
        say(decision_line(listing.decision, halt))  # names and digits, and a halt's words escaped
        warn(listing.warnings)
    return 0


def decision_line(decision: str, halt: Any) -> str:
    """The line ``next`` and ``claim`` print for ``decision``: itself, but
    under the operator's halt (``fold.Act``), ``halted`` followed on the
    same line by who halted the storm, when and why (``halted by
    operator:NAME at STAMP, reason "TEXT"``, the reason escaped and
    quoted), so that a runner that logs a line it does not know says why
    nothing starts."""
    if decision == "halted" and halt is not None:
        from ..core.halt import halt_words

        return halt_words(halt)
    return decision


def claim_decision(root: str | None, as_json: bool, holder: str | None = None, ttl: int | None = None,
                   source: str | None = None, reason: str | None = None, key: str | None = None,
                   wait: float = 0.0) -> int:
    """``claim``: take back orphans, decide, lease; print the decision line
    (or the refusal on stderr). ``wait``: how long to wait for work
    (``leases.claim``), and for the writers' lock when longer than 30 s."""
    with _lease_heard(as_json, lambda done: done):
        out = storm(root, max(30.0, wait)).claim(holder, ttl, source=source, reason=reason, key=key, wait=wait,
                                                 waiting=_claim_waits(wait))
    WAITING.clear()  # answered: an interrupt from here on is not one during the wait
    if as_json:
        emit_json(out.to_json())
    else:
        _decision(out)
    return out.exit_code


def finish_then_claim(root: str | None, as_json: bool, slug: str, token: int, result: str, note: str | None,
                      holder: str | None, ttl: int | None, key: str | None, wait: float, reason: str | None,
                      source: str | None) -> int:
    """``finish --then-claim``: the claim's decision line (a refused
    finish: its refusal, and the finish's exit code); ``--json``: the
    finish's document and the claim's, ``{"finish": …, "claim": …}``."""
    with _lease_heard(as_json, lambda done: done.claim):
        out = storm(root, max(30.0, wait)).finish(slug, token, result, note, source=source, reason=reason, key=key,
                                                  then_claim=True, holder=holder, ttl=ttl, wait=wait,
                                                  waiting=_claim_waits(wait))
    WAITING.clear()
    then = out.claim
    if as_json:
        emit_json({"finish": out.to_json(), "claim": None if then is None else then.to_json()})
    elif then is None:
        err(f"storm-queue: {out.text()}")
    else:
        _decision(then)
    if not as_json:
        warn(out.warnings)
    return out.exit_code if then is None or out.exit_code else then.exit_code


class _lease_heard:
    """A lease recorded all the same counts (``RecordFailed``, exit 4): its
    runner hears its decision line (``claim_of`` the answer carried)."""

    def __init__(self, as_json: bool, claim_of: Callable[[Any], Any]):
        self.as_json, self.claim_of = as_json, claim_of

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: object) -> bool:
        from ..core.errors import RecordFailed

        if isinstance(exc, RecordFailed):
            done = exc.outcome and self.claim_of(exc.outcome)
            if not self.as_json and done is not None and done.decision:
                sys.stdout.write(done.decision + "\n")
                sys.stdout.flush()
        return False


def _decision(out: Any) -> None:
    """A claim's answer in words: its decision line (a halt's words
    escaped, and its note on stderr), or its refusal on stderr; then its
    warnings."""
    if out.outcome == "refused":
        err(f"storm-queue: {out.text()}")
    else:
        say(decision_line(out.decision, out.halt))  # names and digits, and a halt's words escaped
        if out.halt is not None:
            from ..core.halt import halt_note

            err(f"storm-queue: {halt_note(out.halt)}")
    warn(out.warnings)


def _claim_waits(wait: float) -> Callable[[Any], None]:
    """What a claim notes once it begins to wait for work (``WAITING``, for
    an interrupt to say what was recorded when), and says at a terminal."""
    def note(out: Any) -> None:
        from ..wall import now

        writer = sys.modules.get("storm_queue.store.directory.log.writer")
        WAITING.append((len(getattr(writer, "appended", ())), bool(out.recorded), now()))
        if not sys.stderr.isatty():
            return
        word = out.decision.split(" ")[0]
        if word == "review":
            word = "review: the finished lanes await a review you may not make"
        sys.stderr.write(f"storm-queue: nothing to lease now ({word}); waiting up to --wait "
                         f"{wait:g} seconds for a change that can make a lane claimable (Ctrl-C stops, recording "
                         "nothing)\n")
        sys.stderr.flush()

    return note


def say(text: str) -> None:
    """``text`` and a newline on stdout, as click's echo writes it."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(out: Any, as_json: bool) -> int:
    """A request's outcome: JSON, its words on stdout, or its refusal on stderr."""
    if as_json:
        emit_json(out.to_json())
    elif out.outcome == "refused":
        err(f"storm-queue: {out.text()}")
    else:
        say(out.text())
    if not as_json:
        warn(out.warnings)
    return out.exit_code


def bump(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float,
         key: str | None, dry_run: bool) -> int:
    return answer(storm(root, wait).bump(slug, reason=reason, source=source, dry_run=dry_run, key=key), as_json)


def unbump(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float,
           key: str | None, dry_run: bool) -> int:
    return answer(storm(root, wait).unbump(slug, reason=reason, source=source, dry_run=dry_run, key=key), as_json)


def push(root: str | None, as_json: bool, slug: str, issue: str, deps: str | None, not_before: str | None,
         reason: str | None, source: str | None, wait: float, key: str | None, dry_run: bool) -> int:
    return answer(storm(root, wait).push(slug, issue, deps, reason=reason, source=source, dry_run=dry_run,
                                                     key=key, not_before=not_before), as_json)


def list_json(root: str | None, states: str | None = None) -> int:
    """``list --json``: the listing as one JSON document."""
    from . import render

    emit_json(render.listing_json(listed(root, states)))
    return 0


def listed(root: str | None, states: str | None = None):
    """The listing ``list`` shows (saying first where a storm that moved
    went): with ``states`` (``--state A,B``), only the lanes in those."""
    wanted = None
    if states is not None:
        from ..core.errors import BadArgument
        from ..core.resolver import STATES

        wanted = tuple(dict.fromkeys(s.strip() for s in states.split(",") if s.strip()))
        unknown = sorted(set(wanted) - set(STATES))
        if unknown or not wanted:
            raise BadArgument(f"--state {states!r}: {', '.join(unknown) or 'no state'} is not a state; the states are "
                              f"{', '.join(STATES)}")
    listing = storm(root, reads=True).listing()
    if listing.moved_to:
        say_moved(listing.moved_to)
    if wanted is None:
        return listing
    from ..core.records import replace
    from ..core.resolver import only

    return replace(listing, view=only(listing.view, frozenset(wanted)), only=wanted)


def reading(root: str | None):
    """The storm at ``root`` for a reader that shows its history or its
    findings (``why``, ``log``, ``doctor``): first saying, when it moved,
    where it went."""
    source = storm(root, reads=True)
    moved = source.moved()
    if moved:
        say_moved(moved)
    return source


def reason_from(path: str, given: str | None) -> str:
    """The reason ``--reason-file PATH`` gives (``-``: standard input), its
    final line ending aside; ``BadArgument`` (exit 2) when ``--reason`` is
    given too, or the file cannot be read as UTF-8 text."""
    from ..core.errors import BadArgument

    if given is not None:
        raise BadArgument("give the reason once: --reason TEXT or --reason-file FILE, not both; nothing was done")
    try:
        return read_arg(path, "--reason-file").decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError:
        raise BadArgument(f"--reason-file {path}: not UTF-8 text; nothing was done") from None


def read_arg(path: str, flag: str) -> bytes:
    """The bytes of the file ``flag PATH`` names (``-``: standard input);
    ``BadArgument`` (exit 2) when it cannot be read (``given.read``)."""
    from ..given import read

    return read(path, flag)


def say_moved(url: str) -> None:
    """A reader's first words on a storm that moved (``migrate``) to ``url``."""
    from ..service.storm import moved_note

    err(f"storm-queue: {moved_note(url)}")

"""What each command does once its words are parsed (by either command
line): call the library, print the answer, return the exit code. Each
takes ``root``, ``as_json`` and its params by name, as ``commands``
names them; ``answer.run`` maps errors to exit codes around it."""

from __future__ import annotations

import os
import sys

from .answer import answer, emit_json, err, finish_then_claim, reading, say, storm, warn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: a log at least this long shows verify's progress bar (at a terminal)
LONG_LOG = 32 << 20


def add(root: str | None, as_json: bool, slug: str | None, issue: str | None, deps: str | None, from_file: str | None,
        reason: str | None, source: str | None, wait: float, key: str | None) -> int:
    from ..core.errors import BadArgument
    from .answer import read_arg

    if from_file is None:
        if issue is None:
            raise BadArgument("add takes SLUG ISSUE (or --from FILE, the lanes of FILE); nothing was done")
        return answer(storm(root, wait).add(slug, issue, deps, reason=reason, source=source, key=key), as_json)
    if slug is not None or deps is not None:
        raise BadArgument("add takes SLUG ISSUE [--deps] or --from FILE, not both; nothing was done")
    text = read_arg(from_file, "--from").decode("utf-8", "replace")
    return answer(storm(root, wait).add_batch(text, from_file, reason=reason, source=source, key=key), as_json)


def settle(root: str | None, as_json: bool, slug: str | None, ledger: str | None, finished: bool, from_file: str | None,
           force: bool, reason: str | None, source: str | None, wait: float, key: str | None, dry_run: bool) -> int:
    from ..core.errors import BadArgument

    forms = "settle SLUG LEDGER, settle --finished LEDGER or settle --from FILE LEDGER"
    if not finished and from_file is None:
        if slug is None or ledger is None:
            raise BadArgument(f"settle takes SLUG and LEDGER (integrated or abandoned): {forms}; nothing was done")
        return answer(storm(root, wait).settle(slug, ledger, reason=reason, source=source, key=key, force=force,
                                               dry_run=dry_run), as_json)
    batch = "--finished" if finished else "--from FILE"
    if finished and from_file is not None:
        raise BadArgument(f"give --finished or --from FILE, not both: {forms}; nothing was done")
    if ledger is not None:
        raise BadArgument(f"settle {batch} takes LEDGER alone, no SLUG: {forms}; nothing was done")
    if slug not in ("integrated", "abandoned"):
        raise BadArgument(f"settle {batch} takes LEDGER, integrated or abandoned"
                          + ("" if slug is None else f", not {slug!r}") + "; nothing was done")
    text = None
    if from_file is not None:
        from .answer import read_arg

        text = read_arg(from_file, "--from").decode("utf-8", "replace")
    return answer(storm(root, wait).settle_batch(slug, text, from_file or "-", reason=reason, source=source, key=key,
                                                 force=force, dry_run=dry_run), as_json)


def declare(root: str | None, as_json: bool, file: str, reason: str | None, key: str | None, wait: float) -> int:
    return answer(storm(root, wait).declare(file, reason=reason, key=key), as_json)


def grant(root: str | None, as_json: bool, kind: str, role: str, reason: str | None, key: str | None,
          wait: float) -> int:
    from ..ops import grants

    return answer(grants.grant(storm(root, wait), kind, role, reason=reason, key=key), as_json)


def revoke(root: str | None, as_json: bool, kind: str, role: str, reason: str | None, key: str | None,
           wait: float) -> int:
    from ..ops import grants

    return answer(grants.revoke(storm(root, wait), kind, role, reason=reason, key=key), as_json)


def upgrade(root: str | None, as_json: bool, url: str | None, reason: str | None, key: str | None, wait: float) -> int:
    if url is not None and root is not None and url != root:
        from ..core.errors import BadArgument

        raise BadArgument("upgrade takes one storm: URL or --root, not both; nothing was done")
    from ..ops.upgrade import upgrade as carry

    return answer(carry(storm(url or root, wait), reason=reason, key=key), as_json)


def reset(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
          keep_intact: bool = False, dry_run: bool = False) -> int:
    return answer(storm(root, wait).reset(reason, source=source, key=key, keep_intact=keep_intact, dry_run=dry_run),
                  as_json)


def adopt(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
          dry_run: bool) -> int:
    from ..ops.adopt import adopt as take_over

    return answer(take_over(storm(root, wait), reason, source=source, key=key, dry_run=dry_run), as_json)


def waive(root: str | None, as_json: bool, slug: str, dep: str, undo: bool, reason: str | None, source: str | None,
          wait: float, key: str | None, dry_run: bool) -> int:
    return answer(storm(root, wait).waive(slug, dep, reason, undo=undo, source=source, dry_run=dry_run, key=key), as_json)


def lease(root: str | None, as_json: bool, slug: str, token: int, wait: float) -> int:
    from ..core.exit_codes import LEASE_LIVE
    from ..core.names import printable

    source = reading(root)
    found = source.tenure(slug, token, wait)
    if as_json:
        emit_json({**found.to_json(), "moved": source.moved() or None})
    else:
        say(printable(found.line))
    return LEASE_LIVE if found.ended is None else 0


def renew(root: str | None, as_json: bool, slug: str, token: int, ttl: int | None, reason: str | None,
          source: str | None, wait: float, key: str | None) -> int:
    return answer(storm(root, wait).renew(slug, token, ttl, source=source, reason=reason, key=key), as_json)


def finish(root: str | None, as_json: bool, slug: str, token: int, result: str, note: str | None, then_claim: bool,
           holder: str | None, ttl: int | None, key: str | None, wait: float | None, reason: str | None,
           source: str | None) -> int:
    from ..service.finishing import claims_own

    claims_own(then_claim, holder, ttl)  # before the storm is opened
    if then_claim:
        return finish_then_claim(root, as_json, slug, token, result, note, holder, ttl, key, wait or 0.0, reason, source)
    return answer(storm(root, 30.0 if wait is None else wait).finish(slug, token, result, note, source=source,
                                                                     reason=reason, key=key), as_json)


def release(root: str | None, as_json: bool, slug: str, token: int, reason: str | None, source: str | None,
            wait: float, key: str | None) -> int:
    return answer(storm(root, wait).release(slug, token, source=source, reason=reason, key=key), as_json)


def recover(root: str | None, as_json: bool, slug: str | None, force: bool, reason: str | None, source: str | None,
            wait: float, key: str | None) -> int:
    return answer(storm(root, wait).recover(slug, source=source, reason=reason, key=key, force=force), as_json)


def cancel(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float,
           key: str | None) -> int:
    return answer(storm(root, wait).cancel(slug, reason, source=source, key=key), as_json)


def unpark(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None,
           wait: float, key: str | None) -> int:
    return answer(storm(root, wait).unpark(slug, reason, source=source, key=key), as_json)


def halt(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
         dry_run: bool) -> int:
    return answer(storm(root, wait).halt(reason, source=source, dry_run=dry_run, key=key), as_json)


def resume(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
           dry_run: bool) -> int:
    return answer(storm(root, wait).resume(reason, source=source, dry_run=dry_run, key=key), as_json)


def hold(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float,
         key: str | None, dry_run: bool) -> int:
    return answer(storm(root, wait).hold(slug, reason, source=source, dry_run=dry_run, key=key), as_json)


def unhold(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float,
           key: str | None, dry_run: bool) -> int:
    return answer(storm(root, wait).unhold(slug, reason, source=source, dry_run=dry_run, key=key), as_json)


def schedule(root: str | None, as_json: bool, slug: str, not_before: str, reason: str | None,
             source: str | None, wait: float, key: str | None) -> int:
    return answer(storm(root, wait).schedule(slug, not_before, source=source, reason=reason, key=key), as_json)


def show_list(root: str | None, as_json: bool, plain: bool, show_all: bool, states: str | None = None) -> int:
    from . import render
    from .answer import list_json, listed

    if as_json:
        return list_json(root, states)
    listing = listed(root, states)
    show_all = show_all or (states is not None and "settled" in states)
    if plain or os.environ.get("NO_COLOR") or not sys.stdout.isatty():
        say(render.listing_text(listing, show_all))
    else:
        from .table import print_listing

        if not print_listing(listing, show_settled=show_all):
            say(render.listing_text(listing, show_all))
    warn(listing.warnings)
    return 0


def show_log(root: str | None, as_json: bool, slugs: tuple[str, ...], by: tuple[str, ...], actions: tuple[str, ...],
             refused: bool, since: Any, last: int | None) -> int:
    from ..service import history
    from . import render
    from .streams import reader_gone

    source = reading(root)
    flt = history.Filter(frozenset(slugs), frozenset(by), frozenset(actions), refused, since)
    out = sys.stdout
    if as_json:
        def emit(line: bytes, event: dict) -> None:
            out.buffer.write(history.printable_line(line, event))
            if reader_gone():
                raise BrokenPipeError
    else:
        appended = source.store.upkeep.appended

        def emit(line: bytes, event: dict) -> None:
            out.write(render.event_text(event, appended) + "\n")
            if reader_gone():
                raise BrokenPipeError
    try:
        read = history.walk(source.history, flt, last, emit)
        moved = source.moved() if as_json else ""
        if moved:  # one line more, not an event (it has no seq): where the storm went
            from ..core.jsoncodec import dumps

            out.buffer.write((dumps({"moved": moved}) + "\n").encode("ascii"))
        out.flush()
    except BrokenPipeError:  # the reader stopped reading (| head): end quietly, reading no further
        return 0
    if read.fresh:
        err("storm-queue: the storm has recorded nothing yet")
    warn(read.warnings)
    return 0


def show_why(root: str | None, as_json: bool, slug: str) -> int:
    from . import render

    source = reading(root)
    found = source.why(slug)
    if as_json:
        emit_json(render.why_json(found))
        return found.exit_code
    warn(list(found.warnings))
    if found.known:
        say(render.why_text(found))
    else:
        err(f"storm-queue: {render.why_text(found).splitlines()[0]}")
    return found.exit_code


def whoami(root: str | None, as_json: bool, source: str | None = None) -> int:
    from ..core.names import printable

    found = storm(root, reads=True).whoami(source)
    refusal = found.refusal
    if as_json:
        emit_json({"by": found.by, "operator": found.operator, "settles": found.settles, "may": list(found.may),
                   "refused": None if refusal is None else {"code": refusal.code, "message": refusal.message}})
        return 0
    say(printable(found.by))
    say(f"may: {' '.join(found.may) or 'nothing'}")
    if refusal is not None:
        say(printable(f"{'nothing else' if found.may else 'nothing'} ({refusal.code}): {refusal.message}"))
    return 0


def show_watch(root: str | None, as_json: bool, interval: float, once: bool) -> int:
    from .watch import run

    return run(root, interval, once)


def verify(root: str | None, as_json: bool) -> int:
    from . import render

    source = storm(root, reads=True)
    decl = source.declaration()
    try:
        log_file = source.store.upkeep.log_file(decl)
        size = os.stat(log_file, follow_symlinks=False).st_size if log_file is not None else 0
    except OSError:
        size = 0
    from .progress import progress_bar

    with progress_bar(size, "verifying the log", show=size >= LONG_LOG and sys.stderr.isatty()) as update:
        audit = source.verify(progress=update)
    from ..roots import shown

    moved = shown(audit.state.moved_to)
    if as_json:
        emit_json({**audit.to_json(), "moved": moved or None})
    else:
        say(render.audit_text(audit))
        if moved:
            say(f"moved: {render.printable(moved)}: the log's last line says the storm moved there; its lanes run there")
        warn(audit.warnings)
    return 0 if audit.sound else 3


def demo(root: str | None, as_json: bool, keep: bool) -> int:
    from ..ops.demo import run
    from .app import main

    return run(main, keep)


def init(root: str | None, as_json: bool, directory: str) -> int:
    from ..roots import create
    from . import render

    made = create(directory)
    if hasattr(made, "operator"):  # a database storm
        if as_json:
            emit_json({"outcome": "done", "root": made.root, "created": list(made.files), "operator": made.operator})
        else:
            say(f"created a storm in {render.printable(made.root)}, operated by {render.printable(made.operator)}")
            say("declare it (storm-queue declare storm.toml), add lanes (storm-queue add SLUG ISSUE), then: storm-queue list")
        return 0
    if as_json:
        emit_json({"outcome": "done", "root": made.root, "created": list(made.files)})
    else:
        say(f"created a storm in {render.printable(made.root)}: {', '.join(made.files)}")
        say("add lanes to queue.txt (one a line: SLUG ISSUE [DEPS]), then run: storm-queue list")
    return 0


def migrate(root: str | None, as_json: bool, directory: str, url: str, wait: float) -> int:
    from ..ops.migrate import migrate as carry
    from ..roots import find_root
    from . import render

    made = carry(find_root(directory, {}), url, os.environ, wait)
    if as_json:
        emit_json({"outcome": "done", "root": made.root, "lines": made.lines, "lanes": made.lanes,
                   "carried": list(made.carried), "not_carried": list(made.left)})
    else:
        say(f"migrated {made.lines} log lines and {made.lanes} lanes to {render.printable(made.root)}")
        for what in made.carried:
            say(f"carried: {render.printable(what)}")
        for what in made.left:
            err(f"storm-queue: not carried (a database storm cannot hold it): {render.printable(what)}")
    return 0


def doctor(root: str | None, as_json: bool, running_hours: float | None) -> int:
    from ..core import checkup
    from . import render

    source = reading(root)
    found = source.store.upkeep.doctor(running_hours)
    findings = list(found.findings)
    if as_json:
        emit_json(checkup.report_json(source.root, found.running_hours, findings, source.moved()))
    elif findings:
        say(checkup.render_text(findings))
        errors = sum(f.severity == checkup.ERROR for f in findings)
        err(f"storm-queue: doctor: {errors} error(s), {len(findings) - errors} warning(s)")
    else:
        say(f"no findings: the storm at {render.printable(source.root)} is sound")
    return 1 if findings else 0


def completion(root: str | None, as_json: bool, shell: str) -> int:
    from .app import main
    from .completion import script

    sys.stdout.write(script(shell, main))
    sys.stdout.flush()
    return 0

"""The command line: each command parses, calls the library, renders.
Errors become exit codes in one place, ``_run``."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

import click

from .completion import complete_deps, complete_slug
from .answer import claim_decision, list_json, next_decision
from .answer import run as _run  # errors become exit codes there, for both paths
from .answer import storm as _storm
from .log.framing import ACTIONS
from .render import warn as _warn

MEANINGS = {
    0: "done (a recorded no-op too)",
    1: "refused: not authorised",
    2: "refused: cannot be carried out as asked; or a usage error",
    3: "the priority order is unknown: the log cannot be replayed",
    4: "crashed, or the record could not be written",
    5: "busy: another writer held the lock for longer than --wait",
}


def exit_codes(*codes: int | tuple[int, str]) -> str:
    """A command's help epilog: exactly the exit codes it can give, each
    with its meaning (``(code, words)`` says it in the command's own words)."""
    lines = ["\b", "Exit codes:"]
    for code in codes:
        num, words = code if isinstance(code, tuple) else (code, MEANINGS[code])
        lines.append(f"  {num}  {words}")
    return "\n".join(lines)


# The codes a request (bump, push, unbump) can give. Every other command
# names its own with exit_codes(...): only the codes it can give.
EXIT_CODES = exit_codes(0, 1, 2, 3, 4, 5)


class RootPath(click.Path):
    """A storm root as given: a directory completes as one, but every check
    (missing, a file, not a storm) is the tool's own, in ``find_root``, with
    its own message and exit code."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, readable=False)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return os.fsdecode(value) if isinstance(value, bytes) else value


ROOT_HELP = "The storm's root: a directory or a postgresql:// URL (default: $STORM_QUEUE_ROOT, else the nearest directory holding queue.txt or storm.toml)."
JSON_HELP = "Write one JSON document to stdout."


def group_options() -> tuple[str | None, bool]:
    """``--root`` and ``--json`` as given before the command name."""
    ctx = click.get_current_context(silent=True)
    params = ctx.find_root().params if ctx is not None else {}
    return params.get("root"), bool(params.get("as_json"))


def no_group_options(command: str, root_too: bool = True) -> None:
    """A usage error when ``--root`` (or ``--json``) before the command name
    names an option the command does not take."""
    root, as_json = group_options()
    ctx = click.get_current_context(silent=True)
    if root is not None and root_too:
        raise click.UsageError(f"{command} does not take --root" + (": storm-queue init DIR" if command == "init" else ""), ctx)
    if as_json and command != "init":
        raise click.UsageError(f"{command} does not take --json", ctx)


def common(fn: Callable[..., int]) -> Callable[..., None]:
    """Add --root and --json to a command, and run it through ``_run``.
    Either may also come before the command name; the command's own wins."""

    @click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
    @click.option("--root", type=RootPath(), help=ROOT_HELP)
    @functools.wraps(fn)
    def wrapper(root: str | None, as_json: bool, **kwargs: Any) -> None:
        top_root, top_json = group_options()
        root = top_root if root is None else root
        as_json = as_json or top_json
        _run(as_json, lambda: fn(root=root, as_json=as_json, **kwargs))

    return wrapper


def wants_json(args: list[str]) -> bool:
    """Whether ``--json`` is among the arguments (before any ``--``): what a
    usage error answers with before anything is parsed."""
    words = args[:args.index("--")] if "--" in args else args
    return "--json" in words


class StormGroup(click.Group):
    """click's group, whose exits are the tool's own: a usage error with
    ``--json`` also prints one JSON document on stdout, and an interrupt
    (SIGINT, SIGTERM) is exit 130 or 143 with one line saying what was
    recorded (``answer.interrupted``) instead of click's "Aborted!"."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        from .answer import Interrupted, interrupted, on_signals

        args = list(sys.argv[1:] if args is None else args)
        as_json = wants_json(args)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        on_signals()
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            exc.show()
            if as_json:
                from .render import emit_json

                emit_json({"outcome": "error", "message": exc.format_message(), "exit": exc.exit_code})
            sys.exit(exc.exit_code)
        except click.Abort as exc:  # click's word for an interrupt (or end of input) it caught
            interrupted(getattr(exc.__cause__, "signum", 2), as_json)
        except (Interrupted, KeyboardInterrupt) as exc:
            interrupted(getattr(exc, "signum", 2), as_json)
        sys.exit(code if isinstance(code, int) else 0)


class SinceType(click.ParamType):
    """A time for ``log --since``: a date or RFC 3339; anything else is a
    usage error (exit 2) naming the accepted forms."""

    name = "time"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from .history import parse_since

        try:
            return parse_since(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def dry_run_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--dry-run", is_flag=True, help="Show what would move and the run order after it; record nothing.")(fn)


def request_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--source", metavar="NAME", help="Ask as the automation NAME, declared in storm.toml [priority] sources.")(fn)
    fn = click.option("--reason", metavar="TEXT", help="Why you ask; recorded with the request.")(fn)
    fn = click.option("--wait", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS", help="How long to wait for another writer.")(fn)
    fn = click.option("--key", metavar="KEY", help="An idempotency key: asked again with the same key and arguments, the first outcome is returned and nothing is recorded.")(fn)
    return fn


def ttl_option(default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--ttl", type=click.IntRange(min=1), metavar="SECONDS", help=f"The lease's time to live (default: {default}).")


def token_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--token", type=click.IntRange(min=1), required=True, metavar="TOKEN", help="The fencing token the claim printed.")(fn)


def not_before_option(required: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--not-before", metavar="TIME", required=required, help="Start no earlier than TIME: now, +N with s, m, h or d (+90m), a date (2026-12-01) or RFC 3339.")


def _answer(out, as_json: bool) -> int:
    from . import render

    if as_json:
        render.emit_json(out.to_json())
    elif out.outcome == "refused":
        render.err(f"storm-queue: {render.outcome_text(out)}")
    else:
        click.echo(render.outcome_text(out))
    if not as_json:
        _warn(out.warnings)
    return out.exit_code


@click.group(cls=StormGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="storm-queue", prog_name="storm-queue")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP + " Also accepted after the command name.")
@click.option("--root", type=RootPath(), help=ROOT_HELP + " Also accepted after the command name.")
def main(root: str | None, as_json: bool) -> None:
    """Decide what a storm runs next, and keep its priority lane.

    A storm is a directory with queue.txt (one lane a line: SLUG ISSUE
    [DEPS]). Every bump, push and unbump is one line in the priority log.
    """


@main.command("list", epilog=exit_codes((0, "the listing was printed"), (2, "no storm here, a storm file cannot be read, or a usage error"), 3, 4))
@click.option("--plain", is_flag=True, help="Plain text, one lane a line, even at a terminal.")
@click.option("--all", "show_all", is_flag=True, help="List settled lanes too (by default they are counted).")
@common
def list_(root: str | None, as_json: bool, plain: bool, show_all: bool) -> int:
    """Show the order the storm will run, each lane's state, and why.

    At a terminal, a table; when stdout is not a terminal, NO_COLOR is set
    or --plain is given, one lane a line: POSITION PRIORITY SLUG ISSUE STATE
    BY AT DETAIL (see docs/commands.md).

    Example: storm-queue list --root ~/storms/spring

    Example: storm-queue list --plain | awk '$2 == "*" {print $3}'
    """
    from . import render

    if as_json:
        return list_json(root)
    listing = _storm(root).listing()
    if plain or os.environ.get("NO_COLOR") or not sys.stdout.isatty():
        click.echo(render.listing_text(listing, show_all))
    else:
        from .table import print_listing

        print_listing(listing, show_settled=show_all)
    _warn(listing.warnings)
    return 0


@main.command("log", epilog=exit_codes((0, "the matching events were printed"), (2, "no storm here, a storm file cannot be read, or a usage error"), (3, "the log is damaged: the lines before the damage, then the damage"), 4))
@click.option("--slug", "slugs", multiple=True, metavar="SLUG", shell_complete=complete_slug, help="Only events that name SLUG (as the lane asked for, or among those moved or removed). Repeatable.")
@click.option("--by", "by", multiple=True, metavar="WHO", help="Only events by WHO: a principal (operator:alice, source:bot) or the name after its colon. Repeatable.")
@click.option("--action", "actions", multiple=True, type=click.Choice(ACTIONS), help="Only this action (a refusal counts as the verb it refused, too). Repeatable.")
@click.option("--refused", is_flag=True, help="Only refused requests.")
@click.option("--since", type=SinceType(), metavar="TIME", help="Only events at or after TIME: a date (2026-11-30, midnight UTC) or RFC 3339 (2026-11-30T14:05:00Z).")
@click.option("--last", type=click.IntRange(min=0), metavar="N", help="Only the last N matching events.")
@common
def log(root: str | None, as_json: bool, slugs: tuple[str, ...], by: tuple[str, ...], actions: tuple[str, ...],
        refused: bool, since, last: int | None) -> int:
    """Show the recorded requests, oldest first, one line each.

    Each line: seq, time, who, the action and lane, what moved, the outcome
    (done, noop, refused with its code) and the reason. With --json, the
    matching events as JSON lines, byte for byte as the log stores them.

    Example: storm-queue log --refused --since 2026-11-30

    Example: storm-queue log --slug billing --last 5
    """
    from . import history, render

    storm = _storm(root)
    flt = history.Filter(frozenset(slugs), frozenset(by), frozenset(actions), refused, since)
    out = sys.stdout
    if as_json:
        def emit(line: bytes, event: dict) -> None:
            out.buffer.write(line)
    else:
        def emit(line: bytes, event: dict) -> None:
            out.write(render.event_text(event) + "\n")
    try:
        read = history.walk(storm.history, flt, last, emit)
        out.flush()
    except BrokenPipeError:  # the reader stopped reading (| head): end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 0
    if read.fresh:
        render.err("storm-queue: the storm has recorded nothing yet")
    _warn(read.warnings)
    return 0


@main.command(epilog=exit_codes((0, "the answer was printed"), (2, "SLUG is unknown or not a name; no storm here; or a usage error"), 3, 4))
@click.argument("slug", shell_complete=complete_slug)
@common
def why(root: str | None, as_json: bool, slug: str) -> int:
    """Say where SLUG stands and why, in plain words.

    Its state, its position, what runs before it, the dependencies it waits
    on, who prioritised it and why, and whether it is stray or skipped.

    Example: storm-queue why billing
    """
    from . import render

    answer = _storm(root).why(slug)
    if as_json:
        render.emit_json(render.why_json(answer))
    elif answer.known:
        click.echo(render.why_text(answer))
    else:
        render.err(f"storm-queue: {render.why_text(answer).splitlines()[0]}")
    return answer.exit_code


@main.command(epilog=exit_codes((0, "left with q or Ctrl-C, or the one frame was printed"),
                                (2, "no storm here, a storm file cannot be read, or a usage error"), 3, (4, "crashed")))
@click.option("--interval", type=click.FloatRange(min=0.1, max=3600), default=2.0, show_default=True,
              metavar="SECONDS", help="How often to check the storm for change and redraw the time left on leases.")
@click.option("--once", is_flag=True, help="Print one frame and exit (what watch does when stdout is not a terminal).")
@click.option("--root", type=RootPath(), help=ROOT_HELP)
def watch(root: str | None, interval: float, once: bool) -> None:
    """Show the storm live, full screen, until q or Ctrl-C.

    The decision next would give; the running lanes with holder, token and
    the time left on each lease; the priority lane in run order with who
    put each lane there and why; quarantined, scheduled and blocked lanes;
    the last ten log events. Redrawn when the storm's files change (inotify
    where available, else a check every --interval); a database storm is
    read again every --interval. It reads only: no lock, nothing written.

    When stdout is not a terminal, or with --once, one frame is printed and
    watch exits; plain text when not at a terminal or NO_COLOR is set.
    NO_COLOR also keeps colour out of the live view. SIGTERM exits 143.

    Example: storm-queue watch --root ~/storms/spring --interval 5

    Example: storm-queue watch --once | grep '^next:'
    """
    from .watch import run as watch_storm

    no_group_options("watch", root_too=False)
    root = root if root is not None else group_options()[0]
    _run(False, lambda: watch_storm(root, interval, once))


@main.command("next", epilog=exit_codes((0, "the decision was printed"), (2, "no storm here, a storm file cannot be read, or a usage error"), 3, 4))
@common
def next_(root: str | None, as_json: bool) -> int:
    """Print the decision: run, review, wait or empty.

    One line: run SLUG ISSUE | review SLUG... | wait [SLUG...] | empty.

    Example: storm-queue next
    """
    return next_decision(root, as_json)


@main.command(epilog=EXIT_CODES)
@click.argument("slug", shell_complete=complete_slug)
@request_options
@dry_run_option
@common
def bump(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float, key: str | None,
         dry_run: bool) -> int:
    """Prioritise SLUG to run next after what is running.

    It runs after lanes prioritised earlier, ahead of every other lane; its
    unfinished dependencies are pulled forward with it.

    Example: storm-queue bump e --reason "customer outage"

    Example: storm-queue bump e --dry-run
    """
    return _answer(_storm(root, wait).bump(slug, reason=reason, source=source, dry_run=dry_run, key=key), as_json)


@main.command(epilog=EXIT_CODES)
@click.argument("slug", shell_complete=complete_slug)
@click.argument("issue")
@click.option("--deps", metavar="A,B", shell_complete=complete_deps, help="The lane's dependencies, comma-separated.")
@not_before_option()
@request_options
@dry_run_option
@common
def push(root: str | None, as_json: bool, slug: str, issue: str, deps: str | None, not_before: str | None,
         reason: str | None, source: str | None, wait: float, key: str | None, dry_run: bool) -> int:
    """Enqueue SLUG ISSUE already prioritised.

    Appends the lane to queue.txt (unless it is queued) and prioritises it.
    With --not-before it is also scheduled: it keeps its place but does not
    start before that time.

    Example: storm-queue push z 26 --deps c,e

    Example: storm-queue push nightly 30 --not-before 2026-12-01T02:00:00Z --key nightly-2026-12-01
    """
    return _answer(_storm(root, wait).push(slug, issue, deps, reason=reason, source=source, dry_run=dry_run,
                                           key=key, not_before=not_before), as_json)


@main.command(epilog=EXIT_CODES)
@click.argument("slug", shell_complete=complete_slug)
@request_options
@dry_run_option
@common
def unbump(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None, wait: float, key: str | None,
           dry_run: bool) -> int:
    """Take SLUG out of the priority lane.

    Everything that no other prioritised lane requires leaves with it.

    Example: storm-queue unbump e

    Example: storm-queue unbump e --dry-run --json
    """
    return _answer(_storm(root, wait).unbump(slug, reason=reason, source=source, dry_run=dry_run, key=key), as_json)


@main.command(epilog=EXIT_CODES)
@click.argument("slug", shell_complete=complete_slug)
@click.argument("issue")
@click.option("--deps", metavar="A,B", shell_complete=complete_deps, help="The lane's dependencies, comma-separated.")
@request_options
@common
def add(root: str | None, as_json: bool, slug: str, issue: str, deps: str | None, reason: str | None,
        source: str | None, wait: float, key: str | None) -> int:
    """Enqueue SLUG ISSUE, not prioritised.

    On a directory storm it appends the line to queue.txt, as push does; on
    a database storm it adds the lane's row. A slug already queued is a
    recorded no-op.

    Example: storm-queue add api 13 --deps schema
    """
    return _answer(_storm(root, wait).add(slug, issue, deps, reason=reason, source=source, key=key), as_json)


@main.command(epilog=EXIT_CODES)
@click.argument("slug", shell_complete=complete_slug)
@click.argument("ledger", type=click.Choice(["integrated", "abandoned"]))
@click.option("--force", is_flag=True, help="Settle a lane that holds a live lease, expiring the lease first (recorded).")
@request_options
@common
def settle(root: str | None, as_json: bool, slug: str, ledger: str, force: bool, reason: str | None,
           source: str | None, wait: float, key: str | None) -> int:
    """Settle SLUG as integrated or abandoned.

    LEDGER is integrated or abandoned. On a directory storm it appends SLUG to integrated.txt or
    abandoned.txt; on a database storm it adds the settled row. A lane
    holding a live lease is refused (lane_running) unless --force.

    Example: storm-queue settle api integrated --reason "merged"
    """
    return _answer(_storm(root, wait).settle(slug, ledger, reason=reason, source=source, key=key, force=force), as_json)


@main.command(epilog=exit_codes((0, "the declaration was recorded (or was already the storm's)"), 1,
                                (2, "a malformed FILE, a directory storm, or a usage error; nothing changed"), 4, 5))
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--reason", metavar="TEXT", help="Why you declare it; recorded with the request.")
@click.option("--key", metavar="KEY", help="An idempotency key.")
@click.option("--wait", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS", help="How long to wait for another writer.")
@common
def declare(root: str | None, as_json: bool, file: str, reason: str | None, key: str | None, wait: float) -> int:
    """Record FILE as a database storm's declaration (operator only).

    The file is read as storm.toml is ([priority] sources, [runner]); the
    log records its sha256 and parsed content, and every host then reads
    the declaration from the database. On a directory storm, storm.toml is
    the declaration: declare refuses (exit 2).

    Example: storm-queue declare storm.toml --root postgresql://operator@db.example/storm
    """
    return _answer(_storm(root, wait).declare(file, reason=reason, key=key), as_json)


@main.command(epilog=exit_codes((0, "a new log was started"), 1, (2, "refused: a blank --reason, the log still replays, or a usage error"), 4, 5))
@request_options
@common
def reset(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None) -> int:
    """Start a new log when the old one cannot be replayed.

    Operator only, and refused while the log replays.

    The old log and witness are kept beside it under new names.

    Example: storm-queue reset --reason "log lost in a disk move"
    """
    return _answer(_storm(root, wait).reset(reason, source=source, key=key), as_json)


@main.command(epilog=exit_codes((0, "adopted, or a recorded no-op: the log is already storm-queue's"), 1,
                                (2, "refused: a blank --reason, or a usage error"),
                                (3, "the old log breaks its format (the line is named) or is shorter than its witness; nothing changed"), 4, 5))
@dry_run_option
@request_options
@common
def adopt(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
          dry_run: bool) -> int:
    """Take over a priority log written by the earlier priority tool.

    Operator only. The old log is checked line by line, kept byte for byte
    as priority.log.adopted-STAMP, and replayed: the new log's first line
    records its lane in the same order, each lane with who put it there
    and when. On a storm whose log is already storm-queue's: a recorded
    no-op. With --dry-run: the lane it would adopt and the run order
    after it; nothing is written.

    Example: storm-queue adopt --reason "moving the storm to storm-queue"
    """
    return _answer(_storm(root, wait).adopt(reason, source=source, key=key, dry_run=dry_run), as_json)


RUNNER_CODES = exit_codes((0, "done; for claim, a decision was printed"), 1,
                          (2, "refused: a stale token, a TTL out of range, a lane not in that state; or a usage error"),
                          3, 4, 5)


@main.command(epilog=RUNNER_CODES)
@click.option("--holder", metavar="NAME", help="Who holds the lease (default: this host and the runner's pid).")
@ttl_option("storm.toml [runner] ttl, else 600")
@request_options
@common
def claim(root: str | None, as_json: bool, holder: str | None, ttl: int | None, reason: str | None,
          source: str | None, wait: float, key: str | None) -> int:
    """Decide as next does and lease the lane to run.

    One line: run SLUG ISSUE TOKEN | review SLUG... | wait [SLUG...] |
    empty. Only run takes a lease (recorded, with a fencing token greater
    than any before it for that lane); it is wait while storm.toml
    [runner] slots lanes are running. Leases past their expiry are taken
    back first (recorded).

    Example: storm-queue claim --holder runner-1 --ttl 900
    """
    return claim_decision(root, as_json, holder, ttl, source=source, reason=reason, key=key, wait=wait)


@main.command(epilog=RUNNER_CODES)
@click.argument("slug", shell_complete=complete_slug)
@token_option
@ttl_option("the TTL it was claimed or last renewed with")
@request_options
@common
def renew(root: str | None, as_json: bool, slug: str, token: int, ttl: int | None, reason: str | None,
          source: str | None, wait: float, key: str | None) -> int:
    """Extend the lease on SLUG held under TOKEN.

    Only the live lease's token is accepted (else stale_fence), and no lease
    lives past storm.toml [runner] max_lease_age from its claim.

    Example: storm-queue renew e --token 3 --ttl 900
    """
    return _answer(_storm(root, wait).renew(slug, token, ttl, source=source, reason=reason, key=key), as_json)


@main.command(epilog=RUNNER_CODES)
@click.argument("slug", shell_complete=complete_slug)
@token_option
@click.option("--result", type=click.Choice(["ok", "failed"]), required=True, help="How the lane's work ended.")
@click.option("--note", metavar="TEXT", help="A note on the result; recorded.")
@request_options
@common
def finish(root: str | None, as_json: bool, slug: str, token: int, result: str, note: str | None,
           reason: str | None, source: str | None, wait: float, key: str | None) -> int:
    """End the lease on SLUG held under TOKEN.

    ok: the lane is finished and awaits review. failed: it is claimed again
    later, until storm.toml [runner] attempts are spent; then it is
    quarantined. A token that is not the live lease's is refused
    (stale_fence) and recorded.

    Example: storm-queue finish e --token 3 --result ok
    """
    return _answer(_storm(root, wait).finish(slug, token, result, note, source=source, reason=reason, key=key), as_json)


@main.command(epilog=RUNNER_CODES)
@click.argument("slug", required=False, shell_complete=complete_slug)
@request_options
@common
def recover(root: str | None, as_json: bool, slug: str | None, reason: str | None, source: str | None,
            wait: float, key: str | None) -> int:
    """Take back orphaned leases (every one, or SLUG's).

    A lease past its expiry is an orphan: its lane may be claimed again.
    With SLUG (operator only), also end a running marker that has no lease
    behind it (written by hand or by an older runner).

    Example: storm-queue recover

    Example: storm-queue recover e --reason "runner host lost"
    """
    return _answer(_storm(root, wait).recover(slug, source=source, reason=reason, key=key), as_json)


@main.command(epilog=RUNNER_CODES)
@click.argument("slug", shell_complete=complete_slug)
@request_options
@common
def unpark(root: str | None, as_json: bool, slug: str, reason: str | None, source: str | None,
           wait: float, key: str | None) -> int:
    """Return quarantined SLUG to the queue with fresh attempts.

    Operator only, with --reason. The lane's attempt history stays.

    Example: storm-queue unpark e --reason "flaky disk replaced"
    """
    return _answer(_storm(root, wait).unpark(slug, reason, source=source, key=key), as_json)


@main.command(epilog=exit_codes(0, 1, (2, "refused: DEP is not a dependency SLUG's line names, a blank --reason; or a usage error"), 3, 4, 5))
@click.argument("slug", shell_complete=complete_slug)
@click.argument("dep", shell_complete=complete_slug)
@click.option("--undo", is_flag=True, help="End the waiver: SLUG waits for DEP again.")
@request_options
@dry_run_option
@common
def waive(root: str | None, as_json: bool, slug: str, dep: str, undo: bool, reason: str | None, source: str | None,
          wait: float, key: str | None, dry_run: bool) -> int:
    """Let SLUG run although its dependency DEP is not integrated.

    Operator only, with --reason; recorded. A waived DEP that is abandoned
    no longer blocks SLUG, and a waived DEP is not pulled forward when SLUG
    is prioritised. --undo ends the waiver. why SLUG shows each waiver.

    Example: storm-queue waive billing schema --reason "schema ships in the next release"

    Example: storm-queue waive billing schema --undo --reason "schema is back in scope"
    """
    return _answer(_storm(root, wait).waive(slug, dep, reason, undo=undo, source=source, dry_run=dry_run, key=key), as_json)


@main.command(epilog=RUNNER_CODES)
@request_options
@dry_run_option
@common
def halt(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
         dry_run: bool) -> int:
    """Halt the storm: no lane starts until resume.

    Operator only, with --reason. While halted, claim leases nothing and
    answers halted, next says wait; leases already held run on and may
    renew and finish. Halting a halted storm is a recorded no-op.

    Example: storm-queue halt --reason "disk full on the build host"
    """
    return _answer(_storm(root, wait).halt(reason, source=source, dry_run=dry_run, key=key), as_json)


@main.command(epilog=RUNNER_CODES)
@request_options
@dry_run_option
@common
def resume(root: str | None, as_json: bool, reason: str | None, source: str | None, wait: float, key: str | None,
           dry_run: bool) -> int:
    """End the halt: lanes start again.

    Operator only, with --reason. Resuming a storm that is not halted is
    a recorded no-op.

    Example: storm-queue resume --reason "disk cleaned"
    """
    return _answer(_storm(root, wait).resume(reason, source=source, dry_run=dry_run, key=key), as_json)


@main.command(epilog=RUNNER_CODES)
@click.argument("slug", shell_complete=complete_slug)
@not_before_option(required=True)
@request_options
@common
def schedule(root: str | None, as_json: bool, slug: str, not_before: str, reason: str | None,
             source: str | None, wait: float, key: str | None) -> int:
    """Let SLUG start no earlier than --not-before TIME.

    Until then it keeps its place in the run order and is passed over
    (state scheduled). --not-before now lifts the schedule.

    Example: storm-queue schedule e --not-before +2h
    """
    return _answer(_storm(root, wait).schedule(slug, not_before, source=source, reason=reason, key=key), as_json)


#: a log at least this long shows verify's progress bar (at a terminal)
LONG_LOG = 32 << 20


@main.command(epilog=exit_codes((0, "the log is sound"), (2, "no storm here, or a usage error"),
                                (3, "the log is not sound (the first bad line is named), or its place is unknown"), 4))
@common
def verify(root: str | None, as_json: bool) -> int:
    """Audit the whole priority log, naming the first bad line.

    Checks every line's framing and schema, the chain from the first line,
    seq without gaps, the witness, the checkpoint, and replays the log.
    Exit 0 when sound, 3 when not. Reads only.

    Example: storm-queue verify --json
    """
    import os
    import sys

    from . import render

    storm = _storm(root)
    decl = storm.declaration()
    try:
        size = os.stat(storm.log_path(decl), follow_symlinks=False).st_size if not decl.log_error else 0
    except OSError:
        size = 0
    from .progress import progress_bar

    with progress_bar(size, "verifying the log", show=size >= LONG_LOG and sys.stderr.isatty()) as update:
        audit = storm.verify(progress=update)
    if as_json:
        render.emit_json(audit.to_json())
    else:
        click.echo(render.audit_text(audit))
        _warn(audit.warnings)
    return 0 if audit.sound else 3


@main.command(epilog=exit_codes((0, "the story was told"), (2, "a usage error"), 4))
@click.option("--keep", is_flag=True, help="Keep the throwaway storm and print where it is.")
def demo(keep: bool) -> None:
    """Tell the whole story on a throwaway example storm.

    It copies the bundled example storm to a temporary directory and shows
    list, next, bump, push and unbump there with their real output.

    Example: storm-queue demo
    """
    from .demo import run

    no_group_options("demo")
    _run(False, lambda: run(main, keep))


@main.command(epilog=exit_codes((0, "the storm was created"), (2, "refused: a file exists, or DIR cannot be a storm; or a usage error"), 4))
@click.argument("directory", metavar="[DIR|URL]", required=False, default=".")
@click.option("--json", "as_json", is_flag=True, help="Write one JSON document to stdout.")
def init(directory: str, as_json: bool) -> None:
    """Create a storm in DIR (default: .) or a database URL.

    DIR defaults to the current directory; a postgresql:// URL names a
    PostgreSQL database instead.

    Creates DIR when missing, an empty queue.txt, the ledgers integrated.txt
    and abandoned.txt, and storm.toml from the commented example with every
    setting commented out (no source declared). Files are 0644 and DIR 0755,
    owned by you. Refuses, writing nothing, when any of them exists.

    In a database, it creates the schema storm_queue and records the
    first line; the connecting role becomes the storm's operator. A
    database that holds a storm already is refused (exit 2).

    Example: storm-queue init ~/storms/spring

    Example: storm-queue init postgresql://operator@db.example/storm
    """

    no_group_options("init")
    as_json = as_json or group_options()[1]

    def work() -> int:
        from . import render
        from .roots import is_url

        if is_url(directory):
            from .postgres import create as create_in_database

            made = create_in_database(directory)
            if as_json:
                render.emit_json({"outcome": "done", "root": made.root, "created": list(made.files), "operator": made.operator})
            else:
                click.echo(f"created a storm in {render.printable(made.root)}, operated by {render.printable(made.operator)}")
                click.echo("declare it (storm-queue declare storm.toml), add lanes (storm-queue add SLUG ISSUE), then: storm-queue list")
            return 0
        from .init import create

        made = create(directory)
        if as_json:
            render.emit_json({"outcome": "done", "root": made.root, "created": list(made.files)})
        else:
            click.echo(f"created a storm in {render.printable(made.root)}: {', '.join(made.files)}")
            click.echo("add lanes to queue.txt (one a line: SLUG ISSUE [DEPS]), then run: storm-queue list")
        return 0

    _run(as_json, work)


@main.command(epilog=exit_codes((0, "the storm was carried into the database"), (1, "refused: not the directory's operator"),
                                (2, "the database is not empty or cannot be reached, DIR is not a storm, or a usage error"),
                                (3, "DIR's log cannot be replayed"), 4, 5))
@click.argument("directory", metavar="DIR")
@click.argument("url", metavar="URL")
@click.option("--json", "as_json", is_flag=True, help="Write one JSON document to stdout.")
@click.option("--wait", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS", help="How long to wait for another writer.")
def migrate(directory: str, url: str, as_json: bool, wait: float) -> None:
    """Carry the directory storm DIR into the empty database URL.

    Lanes, ledgers, results, leases, the declaration and every line of
    DIR's log (its seq and chain unbroken) go into the database; DIR then
    records a last line naming URL, and later requests there are refused
    (exit 2); reads still work. The database's connecting role becomes the
    operator.

    Example: storm-queue migrate ~/storms/spring postgresql://operator@db.example/storm
    """

    def work() -> int:
        from . import render
        from .migrate import migrate as carry
        from .roots import find_root

        made = carry(find_root(directory, {}), url, os.environ, wait)
        if as_json:
            render.emit_json({"outcome": "done", "root": made.root, "lines": made.lines, "lanes": made.lanes,
                              "not_carried": list(made.left)})
        else:
            click.echo(f"migrated {made.lines} log lines and {made.lanes} lanes to {render.printable(made.root)}")
            for what in made.left:
                render.err(f"storm-queue: not carried (a database storm cannot hold it): {render.printable(what)}")
        return 0

    no_group_options("migrate")
    _run(as_json, work)


@main.command(epilog=exit_codes((0, "no findings: the storm is sound"), (1, "findings, one a line (not a refusal)"),
                                (2, "no storm here, or a usage error"), 4))
@click.option("--running-hours", type=click.FloatRange(min=0, min_open=True), metavar="HOURS",
              help="Report lanes marked running for longer than HOURS (default: storm.toml [doctor] running_hours, else 24).")
@common
def doctor(root: str | None, as_json: bool, running_hours: float | None) -> int:
    """Audit the storm and say what to fix, one finding a line.

    Each line is SEVERITY CODE SUBJECT: MESSAGE (fix: FIX). An error is a
    storm that is unsafe or cannot work as declared: a file another account
    could forge, a storm its owner cannot write, a log that does not replay,
    a storm.toml that requests refuse. A warning needs a look: a skipped
    queue.txt line, a stray slug, an unknown storm.toml key, a witness behind
    its log, a torn tail, a lane marked running for longer than HOURS, an
    orphaned lease, a running marker with no lease, a quarantined lane.
    Doctor only reads.

    Example: storm-queue doctor --running-hours 6
    """
    from . import doctor as audit, render

    storm = _storm(root)
    if getattr(storm, "url", None):  # a database storm: its doctor, imported only for one
        from .dbdoctor import gather

        facts = gather(storm)
    else:
        facts = audit.gather(storm.directory("doctor"))
    hours = running_hours or facts.declaration.running_hours or audit.DEFAULT_RUNNING_HOURS
    findings = facts.diagnose(hours)
    if as_json:
        render.emit_json(audit.report_json(storm.root, hours, findings))
    elif findings:
        click.echo(audit.render_text(findings))
        errors = sum(f.severity == audit.ERROR for f in findings)
        render.err(f"storm-queue: doctor: {errors} error(s), {len(findings) - errors} warning(s)")
    else:
        click.echo(f"no findings: the storm at {render.printable(storm.root)} is sound")
    return 1 if findings else 0


@main.command(epilog=exit_codes((0, "the script was printed"), (2, "a usage error (an unknown SHELL)"), 4))
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    Sourced by the shell, it completes commands, options, and the slugs
    queue.txt carries wherever a command takes a SLUG (and --deps, --slug).
    Each Tab runs storm-queue, so it must be on PATH. Install once, then
    open a new shell:

    \b
      bash 4.4 or newer; the bash-completion package is not needed.
      Add to ~/.bashrc:
        eval "$(storm-queue completion bash)"
      zsh: its completion system (compinit) must be started first.
      Add to ~/.zshrc (without the first line if it already runs compinit):
        autoload -Uz compinit && compinit
        eval "$(storm-queue completion zsh)"
      fish: nothing else is needed. Run once:
        mkdir -p ~/.config/fish/completions
        storm-queue completion fish > ~/.config/fish/completions/storm-queue.fish

    Example: storm-queue completion bash
    """

    no_group_options("completion")

    def work() -> int:
        from .completion import script

        click.echo(script(shell, main), nl=False)
        return 0

    _run(False, work)

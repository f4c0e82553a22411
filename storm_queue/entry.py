"""The ``storm-queue`` entry point, and the one place where errors become
exit codes.

A runner asks ``next`` (or ``claim``) once a minute or more, so the commonest
forms are answered here without loading click: ``next``, ``next --json``,
``list --json`` and ``claim`` with ``--json``, ``--holder NAME`` and
``--ttl N``, each with at most one ``--root DIR`` naming a readable
directory. Every other form, help and usage errors included, goes to the
click command line in ``cli.py``, whose commands call the same functions
below, so both paths print the same bytes and exit with the same code.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, NoReturn


def run(as_json: bool, work: Callable[[], int]) -> NoReturn:
    """Run a command's work and exit with its code; typed errors and crashes
    are mapped to exit codes here and nowhere else."""
    from . import render
    from .errors import StormError

    try:
        code = work()
    except StormError as exc:
        if as_json:
            doc = {"outcome": "unknown" if exc.exit_code == 3 else "error", "message": str(exc)}
            if hasattr(exc, "recorded"):
                doc["recorded"] = exc.recorded
            render.emit_json(doc)
        render.err(f"storm-queue: {exc}")
        code = exc.exit_code
    except Exception as exc:  # noqa: BLE001 -- a crash is kept distinct from every refusal
        if as_json:
            render.emit_json({"outcome": "crashed", "message": f"{type(exc).__name__}: {exc}"})
        render.err(f"storm-queue: crashed: {type(exc).__name__}: {exc} (this is a bug; please report it)")
        code = 4
    sys.exit(code)


def storm(root: str | None, wait: float = 30.0):
    """The storm at ``root`` (or found as ``Storm.find`` finds it)."""
    from .desk import Storm

    return Storm.find(root, wait=wait)


def next_decision(root: str | None, as_json: bool) -> int:
    """``next``: decide, do the owner's side effects, print the decision."""
    from . import render

    listing, notes = storm(root).next()
    for note in notes:
        render.err(f"storm-queue: {note}")
    if as_json:
        render.emit_json({"decision": listing.decision, "warnings": listing.warnings})
    else:
        sys.stdout.write(listing.decision + "\n")  # a decision is ASCII: names and digits
        sys.stdout.flush()
        render.warn(listing.warnings)
    return 0


def claim_decision(root: str | None, as_json: bool, holder: str | None = None, ttl: int | None = None,
                   source: str | None = None, reason: str | None = None, key: str | None = None,
                   wait: float = 30.0) -> int:
    """``claim``: take back orphans, decide, lease; print the decision line
    (or the refusal on stderr)."""
    from . import render

    out = storm(root, wait).claim(holder, ttl, source=source, reason=reason, key=key)
    if as_json:
        render.emit_json(out.to_json())
    elif out.outcome == "refused":
        render.err(f"storm-queue: {render.outcome_text(out)}")
    else:
        sys.stdout.write(out.decision + "\n")  # names and digits
        sys.stdout.flush()
    if not as_json:
        render.warn(out.warnings)
    return out.exit_code


def list_json(root: str | None) -> int:
    """``list --json``: the listing as one JSON document."""
    from . import render

    render.emit_json(render.listing_json(storm(root).listing()))
    return 0


def _quick_form(args: list[str]) -> tuple[str, str | None, bool, dict[str, object]] | None:
    """(command, root, as_json, claim's options) when ``args`` is a form
    answered here, else None. Only forms that click would accept and pass
    on unchanged qualify."""
    if not args or args[0] not in ("next", "list", "claim") or "_STORM_QUEUE_COMPLETE" in os.environ:
        return None
    root, as_json, rest, options = None, False, args[1:], {}
    while rest:
        word = rest.pop(0)
        if word == "--json" and not as_json:
            as_json = True
        elif word == "--root" and root is None and rest and not rest[0].startswith("-"):
            root = rest.pop(0)
            if not (os.path.isdir(root) and os.access(root, os.R_OK)):
                return None  # click's own checks of the path speak for it
        elif args[0] == "claim" and word == "--holder" and "holder" not in options and rest and not rest[0].startswith("-"):
            options["holder"] = rest.pop(0)
        elif (args[0] == "claim" and word == "--ttl" and "ttl" not in options and rest and rest[0].isascii()
              and rest[0].isdigit() and len(rest[0]) < 10 and int(rest[0]) >= 1):
            options["ttl"] = int(rest.pop(0))
        else:
            return None
    if args[0] == "list" and not as_json:
        return None
    return args[0], root, as_json, options


def main() -> None:
    """The console script: a quick form is answered here, every other goes to click."""
    form = _quick_form(sys.argv[1:])
    if form is None:
        from .cli import main as click_main

        click_main(prog_name="storm-queue")
        return
    command, root, as_json, options = form
    try:
        if command == "next":
            run(as_json, lambda: next_decision(root, as_json))
        if command == "claim":
            run(as_json, lambda: claim_decision(root, as_json, **options))
        run(True, lambda: list_json(root))
    except (EOFError, KeyboardInterrupt):  # as click says it
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)

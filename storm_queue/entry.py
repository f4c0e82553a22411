"""The ``storm-queue`` entry point.

A runner asks ``next`` (or ``claim``) once a minute or more, so the commonest
forms are answered here without loading click: ``next``, ``next --json``,
``list --json`` and ``claim`` with ``--json``, ``--holder NAME`` and
``--ttl N``, each with at most one ``--root DIR`` naming a readable
directory (``--root DIR`` and ``--json`` may come before the command name).
Every other form, help and usage errors included, goes to the
click command line in ``cli.py``; both call the same functions of
``answer``, so both paths print the same bytes and exit with the same code.
SIGINT and SIGTERM end either path through ``interrupted`` (exit 130, 143).
"""

from __future__ import annotations

import os
import sys

from .answer import Interrupted, claim_decision, interrupted, list_json, next_decision, on_signals, run


def _quick_form(args: list[str]) -> tuple[str, str | None, bool, dict[str, object]] | None:
    """(command, root, as_json, claim's options) when ``args`` is a form
    answered here, else None. Only forms that click would accept and pass
    on unchanged qualify."""
    lead = 0  # --root DIR and --json may come before the command name
    while lead < len(args) and args[lead] in ("--root", "--json"):
        lead += 1 if args[lead] == "--json" else 2
    if lead >= len(args) or args[lead] not in ("next", "list", "claim") or "_STORM_QUEUE_COMPLETE" in os.environ:
        return None
    args = [args[lead]] + args[:lead] + args[lead + 1:]
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
    on_signals()
    try:
        form = _quick_form(sys.argv[1:])
        if form is None:
            from .cli import main as click_main

            click_main(prog_name="storm-queue")
            return
        command, root, as_json, options = form
        if command == "next":
            run(as_json, lambda: next_decision(root, as_json))
        if command == "claim":
            run(as_json, lambda: claim_decision(root, as_json, **options))
        run(True, lambda: list_json(root))
    except (Interrupted, KeyboardInterrupt) as exc:  # before or after a command's own handling
        interrupted(getattr(exc, "signum", 2), "--json" in sys.argv[1:])

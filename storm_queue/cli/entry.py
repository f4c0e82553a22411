"""The ``storm-queue`` entry point.

Every command's ordinary forms are parsed here from the one table in
``commands``, without loading click, and done by the same function the
click command calls (``handlers``), so both paths print the same bytes and
exit with the same code. A form this parser does not take as click would
(help, ``--version``, shell completion, a usage error, anything unusual:
a repeated option, a value that starts with ``-``, a number click would
read but this does not) goes to the click command line in ``cli.py``,
which prints exactly what it prints. SIGINT and SIGTERM end either path
through ``interrupted`` (exit 130, 143).
"""

from __future__ import annotations

import os
import sys

from .answer import Interrupted, interrupted, on_signals, run
from .commands import BY_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .commands import Command, Param

#: what the quick path gives up on, to let click speak
NOT_QUICK = None


def _value(p: Param, word: str) -> object:
    """``word`` as the param's value, or ``NOT_QUICK`` where click would
    refuse it or might read it otherwise."""
    if p.kind == "int" or p.kind == "float":
        whole, dot, part = word.partition(".")
        if not (whole.isascii() and whole.isdigit() and len(whole) < 10) or (dot and p.kind == "int") \
                or (dot and not (part.isascii() and part.isdigit())):
            return NOT_QUICK
        number = int(word) if p.kind == "int" else float(word)
        if (p.low is not None and (number <= p.low if p.low_open else number < p.low)) \
                or (p.high is not None and number > p.high):
            return NOT_QUICK
        return number
    if p.kind == "choice":
        return word if word in p.choices else NOT_QUICK
    if p.kind == "time":
        from ..service.history import parse_since

        try:
            return parse_since(word)
        except ValueError:
            return NOT_QUICK
    if p.kind == "file" and os.path.exists(word) and (os.path.isdir(word) or not os.access(word, os.R_OK)):
        return NOT_QUICK  # click.Path's own words
    return word


def quick_form(args: list[str]) -> tuple[Command, dict[str, object]] | None:
    """The command and its keywords (``root`` and ``as_json`` among them)
    when ``args`` is a form click would accept and pass on unchanged; else
    None, for click to answer."""
    if "_STORM_QUEUE_COMPLETE" in os.environ:
        return None
    top: dict[str, object] = {}
    at = 0
    while at < len(args) and args[at] in ("--root", "--json"):
        if args[at] == "--json":
            if "json" in top:
                return None
            top["json"], at = True, at + 1
        elif "root" in top or at + 1 >= len(args) or args[at + 1].startswith("-"):
            return None
        else:
            top["root"], at = args[at + 1], at + 2
    command = BY_NAME.get(args[at]) if at < len(args) else None
    if command is None or not command.quick or any(k not in command.top for k in top):
        return None
    words = _parse(command, args[at + 1:])
    if words is None:
        return None
    if words.get("root") is None:
        words["root"] = top.get("root")
    words["as_json"] = bool(words.get("as_json")) or bool(top.get("json"))
    return command, words


def _parse(command: Command, rest: list[str]) -> dict[str, object] | None:
    """The command's keywords from the words after its name, or None."""
    options = {p.flag: p for p in command.params if p.flag is not None}
    positional = [p for p in command.params if p.flag is None]
    words: dict[str, object] = {}
    given: list[str] = []
    at, only_args = 0, False
    while at < len(rest):
        word = rest[at]
        at += 1
        if word == "--" and not only_args:
            only_args = True
            continue
        if not only_args and word.startswith("-") and word != "-":
            name, eq, inline = word.partition("=")
            p = options.get(name)
            if p is None or (p.name in words and not p.multiple):
                return None
            if p.kind == "flag":
                if eq:
                    return None
                words[p.name] = True
                continue
            if not eq:
                if at >= len(rest) or (rest[at].startswith("-") and rest[at] != "-"):  # "-": standard input
                    return None
                inline, at = rest[at], at + 1
            value = _value(p, inline)
            if value is NOT_QUICK:
                return None
            if p.multiple:
                words[p.name] = (*words.get(p.name, ()), value)  # type: ignore[misc]
            else:
                words[p.name] = value
            continue
        if word.startswith("-") or len(given) >= len(positional):
            return None
        given.append(word)
    for p, word in zip(positional, given):
        value = _value(p, word)
        if value is NOT_QUICK:
            return None
        words[p.name] = value
    for p in command.params:
        if p.name not in words:
            if p.required:
                return None
            words[p.name] = () if p.multiple else (False if p.kind == "flag" else p.default)
    return words


def main() -> None:
    """The console script: a quick form is done here, every other goes to click."""
    from .streams import standard

    standard()
    on_signals()
    try:
        form = quick_form(sys.argv[1:])
        if form is None:
            from .app import main as click_main

            click_main(prog_name="storm-queue")
            return
        command, words = form
        run(bool(words["as_json"]), lambda: command.call(**words))
    except (Interrupted, KeyboardInterrupt) as exc:  # before or after a command's own handling
        interrupted(getattr(exc, "signum", 2), "--json" in sys.argv[1:])

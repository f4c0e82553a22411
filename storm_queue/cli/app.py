"""The click command line, made from the one table in ``commands``: help,
shell completion and usage errors are click's; what each command does is
``handlers``'s (the same functions ``entry``'s quick path calls). Errors
become exit codes in one place, ``answer.run``."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .answer import run as _run
from .commands import COMMANDS, JSON_HELP, ROOT_HELP, Command, Param
from .completion import complete_deps, complete_slug

COMPLETE = {"slug": complete_slug, "deps": complete_deps}


class RootPath(click.Path):
    """A storm root as given: a directory completes as one, but every check
    (missing, a file, not a storm) is the tool's own, in ``find_root``, with
    its own message and exit code."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, readable=False)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return os.fsdecode(value) if isinstance(value, bytes) else value


class FileType(click.Path):
    """A file that is not a directory (it need not exist)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)


class SinceType(click.ParamType):
    """A time for ``log --since``: a date or RFC 3339; anything else is a
    usage error (exit 2) naming the accepted forms."""

    name = "time"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from ..service.history import parse_since

        try:
            return parse_since(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class FloatRange(click.FloatRange):
    """click's float range, refusing NaN too (it compares as in range)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        got = super().convert(value, param, ctx)
        if got != got:
            self.fail(f"{value} is not a number", param, ctx)
        return got


def click_type(p: Param) -> Any:
    """The click type of a table param."""
    if p.kind == "int":
        return click.IntRange(min=p.low, max=p.high, min_open=p.low_open)
    if p.kind == "float":
        return FloatRange(min=p.low, max=p.high, min_open=p.low_open)
    if p.kind == "choice":
        return click.Choice(p.choices)
    return {"time": SinceType, "file": FileType, "root": RootPath}.get(p.kind, lambda: click.STRING)()


def click_param(p: Param) -> click.Parameter:
    """The click argument or option of a table param."""
    extra: dict[str, Any] = {} if p.default is None else {"default": p.default}
    complete = COMPLETE.get(p.complete or "")
    if p.flag is None:
        return click.Argument([p.name], type=click_type(p), required=p.required, metavar=p.metavar,
                              shell_complete=complete, **extra)
    if p.kind == "flag":
        return click.Option([p.flag, p.name], is_flag=True, help=p.help)
    return click.Option([p.flag, p.name], type=click_type(p), metavar=p.metavar, help=p.help, required=p.required,
                        multiple=p.multiple, show_default=p.show_default or None, shell_complete=complete, **extra)


def group_options() -> tuple[str | None, bool]:
    """``--root`` and ``--json`` as given before the command name."""
    ctx = click.get_current_context(silent=True)
    params = ctx.find_root().params if ctx is not None else {}
    return params.get("root"), bool(params.get("as_json"))


def click_command(command: Command) -> click.Command:
    """The click command of a table entry: options before the command name
    that it does not take are a usage error; its own win over them."""

    def callback(**kwargs: Any) -> None:
        top_root, top_json = group_options()
        ctx = click.get_current_context()
        if top_root is not None and "root" not in command.top:
            raise click.UsageError(f"{command.name} does not take --root"
                                   + (": storm-queue init DIR" if command.name == "init" else ""), ctx)
        if top_json and "json" not in command.top:
            raise click.UsageError(f"{command.name} does not take --json", ctx)
        root = kwargs.pop("root", None)
        as_json = bool(kwargs.pop("as_json", False)) or top_json
        root = top_root if root is None else root
        _run(as_json, lambda: command.call(root=root, as_json=as_json, **kwargs))

    return click.Command(command.name, callback=callback, params=[click_param(p) for p in command.params],
                         help=command.help, epilog=command.epilog,
                         context_settings={"help_option_names": ["-h", "--help"]})


def wants_json(args: list[str]) -> bool:
    """Whether ``--json`` is among the arguments (before any ``--``): what a
    usage error answers with before anything is parsed."""
    words = args[:args.index("--")] if "--" in args else args
    return "--json" in words


def usage_words(exc: click.ClickException) -> str:
    """A usage error's words as they may be printed: each password masked
    (``core.passwords.hidden``: an argument is outside text that may be a
    root) and one printable line (``core.names.printable``), whichever
    argument click quotes and however (raw, or as Python's ``repr``)."""
    from ..core.names import printable
    from ..core.passwords import hidden

    return printable(hidden(exc.format_message()))


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
            words = usage_words(exc)
            exc.format_message = lambda: words  # type: ignore[method-assign] -- show() prints click's usage, then these
            exc.show()
            if as_json:
                from .answer import emit_json

                emit_json({"outcome": "error", "message": words, "exit": exc.exit_code})
            sys.exit(exc.exit_code)
        except click.Abort as exc:  # click's word for an interrupt (or end of input) it caught
            interrupted(getattr(exc.__cause__, "signum", 2), as_json)
        except (Interrupted, KeyboardInterrupt) as exc:
            interrupted(getattr(exc, "signum", 2), as_json)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=StormGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="storm-queue", prog_name="storm-queue")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP + " Also accepted after the command name.")
@click.option("--root", type=RootPath(), metavar="ROOT", help=ROOT_HELP + " Also accepted after the command name.")
def main(root: str | None, as_json: bool) -> None:
    """Decide what a storm runs next, and keep its priority lane.

    A storm is a directory with queue.txt (one lane a line: SLUG ISSUE
    [DEPS]). Every bump, push and unbump is one line in the priority log.
    """


for _command in COMMANDS:
    main.add_command(click_command(_command))

"""The documentation's pictures: what a person sees at a terminal, exported
by rich as SVG from real runs on a copy of the example storm.

    python -m storm_queue.cli.pictures --write docs/img   # (re)write every picture
    python -m storm_queue.cli.pictures --check docs/img   # exit 1 if any is stale

The storm is the bundled example (``examples/storm``) after a short story
told through the Python API (a bump by the operator, a bump by the declared
automation, a runner's claim), at a fixed time and under a fixed operator
name, shown as if it lived in ``SHOWN_ROOT``: so the pictures come out the
same on every machine, and change only when what the commands show changes.

Each picture is one entry of ``PICTURES``: a name (the file is
``NAME.svg``), the command line it shows, and a callable that prints that
command's terminal output on the console it is given, for the storm at the
root it is given. Adding a picture is one line there.

No command imports this module.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from typing import Callable, Iterator
from xml.sax.saxutils import escape

from rich.console import Console
from rich.text import Text

#: columns of the pictured terminal
WIDTH = 100
#: the clock the story runs on: 2026-11-30T09:00:00Z, then as ``story`` advances it
START = 1_796_029_200.0
#: the account that owns the storm, as the pictures name it
OPERATOR = "alice"
#: where the storm is said to live
SHOWN_ROOT = "/home/alice/storms/example"

REGENERATE = "python -m storm_queue.cli.pictures --write docs/img"

# rich's own SVG template (rich.console.CONSOLE_SVG_FORMAT) without the web
# fonts it fetches from a CDN: the pages then load nothing from elsewhere,
# and use Fira Code where it is installed, else the reader's monospace. It
# carries a <desc> with the picture's text, for readers who cannot see it
# (and for the freshness test), and says how it was made.
SVG_FORMAT = """\
<svg class="rich-terminal" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
    <!-- @@MADE@@ -->
    <desc>@@DESC@@</desc>
    <style>

    .{unique_id}-matrix {{
        font-family: Fira Code, monospace;
        font-size: {char_height}px;
        line-height: {line_height}px;
        font-variant-east-asian: full-width;
    }}

    .{unique_id}-title {{
        font-size: 18px;
        font-weight: bold;
        font-family: arial;
    }}

    {styles}
    </style>

    <defs>
    <clipPath id="{unique_id}-clip-terminal">
      <rect x="0" y="0" width="{terminal_width}" height="{terminal_height}" />
    </clipPath>
    {lines}
    </defs>

    {chrome}
    <g transform="translate({terminal_x}, {terminal_y})" clip-path="url(#{unique_id}-clip-terminal)">
    {backgrounds}
    <g class="{unique_id}-matrix">
    {matrix}
    </g>
    </g>
</svg>
"""


def rich_version() -> str:
    from importlib.metadata import version

    return version("rich")


class Clock:
    """The wall clock (``wall.clock``) while the story runs: still, unless told to move."""

    def __init__(self, at: float):
        self.at = at

    def __call__(self) -> float:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += seconds


@contextmanager
def fixed_world(at: float = START) -> Iterator[Clock]:
    """Run with the clock stopped at ``at`` and every account named
    ``OPERATOR``; both are put back afterwards."""
    from .. import wall
    from ..store.directory import accounts

    clock = Clock(at)
    saved_time, saved_name = wall.clock, accounts.account_name
    wall.clock = clock
    accounts.account_name = lambda uid: OPERATOR  # type: ignore[assignment]
    try:
        yield clock
    finally:
        wall.clock = saved_time
        accounts.account_name = saved_name  # type: ignore[assignment]


def story(root: str, clock: Clock) -> None:
    """What happened in the pictured storm: a customer outage makes the
    operator bump billing (its dependencies come with it), the declared
    automation bumps docs, and a runner claims the first lane."""
    from ..service.storm import Storm

    storm = Storm.find(root, env={})
    storm.bump("billing", reason="customer outage").check()
    clock.advance(5 * 60)
    storm.bump("docs", source="nightly-triage", reason="release notes").check()
    clock.advance(7 * 60)
    storm.claim(holder="runner-1", ttl=900).check()
    clock.advance(3 * 60)


def show_list(root: str, console: Console) -> None:
    """``storm-queue list`` at a terminal."""
    from ..core.records import replace
    from ..service.storm import Storm
    from .table import print_listing

    listing = Storm.find(root, env={}).listing()
    print_listing(replace(listing, root=SHOWN_ROOT), console=console)


def show_why(slug: str) -> Callable[[str, Console], None]:
    """``storm-queue why SLUG``."""

    def show(root: str, console: Console) -> None:
        from ..service.storm import Storm
        from .render import why_text

        console.print(Text(why_text(Storm.find(root, env={}).why(slug))))

    return show


def show_watch(root: str, console: Console) -> None:
    """One frame of ``storm-queue watch`` at a terminal."""
    from .. import wall
    from ..core.records import replace
    from ..service.storm import Storm
    from .frame import build, rich_view
    from .watch import Source

    listing, events = Source(Storm.find(root, env={})).read()
    console.print(rich_view(build(replace(listing, root=SHOWN_ROOT), events, wall.now())))


#: name, the command line shown, and what prints its output (root, console)
PICTURES: list[tuple[str, str, Callable[[str, Console], None]]] = [
    ("list", "storm-queue list", show_list),
    ("why", "storm-queue why api", show_why("api")),
    ("watch", "storm-queue watch", show_watch),
]


def example_storm(into: str) -> str:
    """A copy of the bundled example storm in a new folder under ``into``."""
    from ..ops.demo import EXAMPLE_FILES, example_dir

    root = os.path.join(into, "storm")
    os.mkdir(root)
    for name in EXAMPLE_FILES:
        shutil.copyfile(os.path.join(example_dir(), name), os.path.join(root, name))
    return root


def svg(name: str, command: str, show: Callable[[str, Console], None], root: str) -> str:
    """One picture: the prompt and ``command``'s output, as SVG."""
    console = Console(record=True, width=WIDTH, force_terminal=True, color_system="truecolor", no_color=False,
                      legacy_windows=False, file=open(os.devnull, "w"), _environ={})
    with console.file:
        console.print(Text.assemble(("$ ", "dim"), (command, "bold")))
        show(root, console)
        text = console.export_text(clear=False)
        picture = console.export_svg(title=command, code_format=SVG_FORMAT, unique_id=f"storm-queue-{name}")
    made = f"made by `{REGENERATE}` with rich {rich_version()}; do not edit by hand"
    return picture.replace("@@MADE@@", made).replace("@@DESC@@", escape(text.rstrip("\n")))


def pictures() -> dict[str, str]:
    """Every picture: file name to SVG."""
    with tempfile.TemporaryDirectory(prefix="storm-queue-pictures-") as scratch:
        root = example_storm(scratch)
        with fixed_world() as clock:
            story(root, clock)
            return {f"{name}.svg": svg(name, command, show, root) for name, command, show in PICTURES}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("--write", "--check"):
        print("usage: python -m storm_queue.cli.pictures --write|--check DIR", file=sys.stderr)
        return 2
    mode, folder = args
    fresh = pictures()
    stale = []
    for name, text in fresh.items():
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as f:
                held = f.read()
        except FileNotFoundError:
            held = None
        if held == text:
            continue
        if mode == "--check":
            stale.append(path)
        else:
            os.makedirs(folder, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    for path in stale:
        print(f"{path} is stale or missing; run `{REGENERATE}`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""``storm-queue demo``: a throwaway copy of the example storm, and the story
of list, push, bump, unbump, next, claim and finish told with their real
output."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from contextlib import redirect_stderr

import click

EXAMPLE_FILES = ("queue.txt", "storm.toml")

STORY = [
    ("The storm as it stands: nothing prioritised, file order.", ["list"]),
    ("What a runner would start now.", ["next"]),
    ("A customer outage: docs must run next.", ["bump", "docs", "--reason", "customer outage"]),
    ("What would bumping billing move? A dry run answers and records nothing.", ["bump", "billing", "--dry-run"]),
    ("billing needs auth and api, which need schema: all are pulled forward, dependencies first.", ["bump", "billing"]),
    ("Why is api where it is?", ["why", "api"]),
    ("Enqueue a hotfix already prioritised, after the earlier bumps.", ["push", "hotfix", "31", "--deps", "schema", "--reason", "security fix"]),
    ("schema is needed by prioritised lanes, so it cannot be un-bumped alone.", ["unbump", "schema"]),
    ("An undeclared automation is refused, and the refusal is recorded.", ["bump", "ui", "--source", "github-label"]),
    ("The declared automation may bump.", ["bump", "ui", "--source", "nightly-triage"]),
    ("Un-bumping billing takes back what only it pulled forward.", ["unbump", "billing"]),
    ("The order now.", ["list"]),
    ("The runner's decision.", ["next"]),
    ("A runner claims it: a lease on docs under fencing token 1.", ["claim", "--holder", "runner-1", "--ttl", "900"]),
    ("Its work fails: the attempt is spent, and docs may be claimed again.", ["finish", "docs", "--token", "1", "--result", "failed", "--note", "exit 1"]),
    ("The next claim of docs gets a greater token.", ["claim", "--holder", "runner-2", "--ttl", "900"]),
    ("The first runner, late, cannot overwrite the result: its token is stale.", ["finish", "docs", "--token", "1", "--result", "ok"]),
    ("The live lease's holder finishes: docs awaits review.", ["finish", "docs", "--token", "2", "--result", "ok"]),
    ("Every request, the refused one included, as the log records it.", ["log"]),
]


def example_dir() -> str:
    """The bundled example storm: inside the installed package, else the
    repository's ``examples/storm``."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package: ops/ is in it
    for candidate in (os.path.join(here, "example_storm"), os.path.join(os.path.dirname(here), "examples", "storm")):
        if os.path.isfile(os.path.join(candidate, "queue.txt")):
            return candidate
    raise FileNotFoundError("the bundled example storm is missing; reinstall storm-queue")


def run(main: click.Group, keep: bool = False) -> int:
    """Tell the story through ``main``, the ``storm-queue`` click group;
    return 0 when every step answered as expected."""
    root = tempfile.mkdtemp(prefix="storm-queue-demo-")
    log = os.path.join(root, "priority.log")
    try:
        for name in EXAMPLE_FILES:
            shutil.copyfile(os.path.join(example_dir(), name), os.path.join(root, name))
        click.echo(f"# a throwaway storm in {root}, copied from the bundled example\n")
        for words, args in STORY:
            click.echo(f"# {words}")
            click.echo("$ storm-queue " + shlex.join(args))
            try:
                with redirect_stderr(sys.stdout):  # refusals read in line with the story
                    main.main(args=args + ["--root", root], prog_name="storm-queue", standalone_mode=False)
            except SystemExit as exc:
                if exc.code not in (0, 1, 2):
                    raise
                if exc.code:
                    click.echo(f"(exit {exc.code})")
            click.echo()
    except BaseException:
        if keep:
            click.echo(f"# kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
        raise
    if keep:
        click.echo(f"# every request above is one line in {log}")
        click.echo(f"# kept: {root}")
        return 0
    # the last line names no file of a storm that is gone
    shutil.rmtree(root, ignore_errors=True)
    if os.path.exists(root):
        click.echo(f"# every request above is one line in {log}; the throwaway storm could not be deleted")
    else:
        click.echo("# every request above was one line in the throwaway storm's priority.log, deleted now "
                   "with it; storm-queue demo --keep keeps the storm to look at")
    return 0

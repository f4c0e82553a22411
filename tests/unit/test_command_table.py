"""The two command lines agree because both are made from one table
(``storm_queue.cli.commands``): every form the click-free parser takes, click
parses to the same keywords (a property, over forms Hypothesis builds from
the table); every command's ordinary forms are taken by the quick path;
and, run for real on twin storms, both paths print the same bytes and
exit with the same code, for every command of the table."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
import pytest
from hypothesis import given, settings, strategies as st

from storm_queue.cli import app as cli, entry
from storm_queue.cli.commands import COMMANDS, Command, Param
from tests.conftest import clean_env, make_storm, run_main

QUICK = [c for c in COMMANDS if c.quick]

#: a value of each kind that click takes, by param name first, then by kind
SAMPLE = {"slug": "b", "dep": "a", "issue": "9", "ledger": "integrated", "token": "1", "result": "ok", "not_before": "+1h",
          "since": "2026-11-30", "actions": "bump", "directory": "made", "url": "postgresql://nobody@/none?host=/nonexistent",
          "file": "storm.toml", "interval": "0.5", "holder": "r1", "shell": "bash"}
BY_KIND = {"flag": "", "int": "7", "float": "2.5", "choice": None, "time": "2026-11-30", "text": "words", "file": "storm.toml",
           "root": "."}


def sample(p: Param) -> str:
    if p.name in SAMPLE:
        return SAMPLE[p.name]
    return p.choices[0] if p.kind == "choice" else BY_KIND[p.kind]


def words_of(p: Param) -> list[str]:
    """``p`` given once, as a command line gives it."""
    if p.flag is None:
        return [sample(p)]
    return [p.flag] if p.kind == "flag" else [p.flag, sample(p)]


def minimal(command: Command) -> list[str]:
    """The command with what it requires and nothing else."""
    return [command.name] + [w for p in command.params if p.required for w in words_of(p)]


def full(command: Command) -> list[str]:
    """The command with every param given once (no --root: the test gives it)."""
    return [command.name] + [w for p in command.params if p.kind != "root" for w in words_of(p)]


def clicked(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, object]] | None:
    """The command and keywords click's command line would call it with,
    or None where click refuses the form (a usage error, help)."""
    seen: list[tuple[str, dict[str, object]]] = []

    def call(self: Command, **words: object) -> int:  # what the command is done with, as parsed
        seen.append((self.name, words))
        return 0

    monkeypatch.setattr(Command, "call", call)
    monkeypatch.setattr(cli, "_run", lambda as_json, work: work())
    try:
        cli.main.main(args=list(args), prog_name="storm-queue", standalone_mode=False)
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        return None
    return seen[0] if seen else None


def quick(args: list[str]) -> tuple[str, dict[str, object]] | None:
    form = entry.quick_form(args)
    return None if form is None else (form[0].name, form[1])


@pytest.mark.parametrize("command", QUICK, ids=[c.name for c in QUICK])
def test_every_commands_ordinary_forms_take_the_quick_path(command: Command, monkeypatch: pytest.MonkeyPatch) -> None:
    for args in (minimal(command), full(command), ["--json", *minimal(command)] if "json" in command.top else minimal(command)):
        form = quick(args)
        assert form is not None, f"not quick: {args}"
        assert form == clicked(args, monkeypatch), args


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.quick], ids=lambda c: c.name)
def test_what_only_click_can_do_goes_to_click(command: Command) -> None:
    assert quick(full(command)) is None


#: values near the edge of what click takes, by kind
TRICKY = {"int": ["0", "1", "-1", "1.5", "٣", "1e3", " 2", "007", "9999999999"],
          "float": ["0", "0.05", "0.1", "3600", "3601", "1e3", ".5", "5.", "1.5", "-0"],
          "choice": ["", "OK", "merged", "bump", "fish"], "time": ["soon", "2026-13-01", "2026-11-30T10:00:00Z"],
          "text": ["", "-x", "a b", "--json", "--", "-"], "file": [".", "/nonexistent", "", "/etc/shadow"],
          "root": [".", "", "-x"], "flag": [""]}
ODD = ["--bogus", "--json", "--help", "-h", "--", "-", "extra", "--root"]


@st.composite
def forms(draw: st.DrawFn) -> list[str]:
    """A command's form as a user might type it: some of its params, each
    with its sample value or a tricky one, options and arguments in any
    order, ``--name=value`` at times, now and then an odd word or a
    repeated option, and options before the command name."""
    command = draw(st.sampled_from(COMMANDS))
    parts: list[list[str]] = []
    for p in command.params:
        if not (p.required or draw(st.booleans())):
            continue
        times = 2 if draw(st.integers(0, 9)) == 0 else 1
        for _ in range(times):
            value = draw(st.sampled_from(TRICKY[p.kind])) if draw(st.integers(0, 2)) == 0 else sample(p)
            if p.flag is None:
                parts.append([value])
            elif p.kind == "flag":
                parts.append([p.flag])
            elif draw(st.booleans()):
                parts.append([f"{p.flag}={value}"])
            else:
                parts.append([p.flag, value])
    options = [part for part in parts if part[0].startswith("--")]
    arguments = [part for part in parts if not part[0].startswith("--")]
    order = draw(st.permutations(options + [["<args>"]]))
    if draw(st.integers(0, 4)) == 0:
        order.insert(draw(st.integers(0, len(order))), [draw(st.sampled_from(ODD))])
    lead = draw(st.lists(st.sampled_from([["--json"], ["--root", "."], ["--root", "-x"]]), max_size=2))
    words = [w for part in order for w in ([w for a in arguments for w in a] if part == ["<args>"] else part)]
    return [w for part in lead for w in part] + [command.name] + words


@settings(max_examples=600, deadline=None)
@given(args=forms())
def test_a_form_the_quick_path_takes_click_reads_the_same(args: list[str]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        form = quick(args)
        if form is not None:
            assert form == clicked(args, mp), args


# -- for real, on twin storms ------------------------------------------------

QUEUE = "a 1\nb 2 a\nc 3\n"
STAMP = re.compile(rb"\d{4}-\d\d-\d\d[T ][\d:.]+Z")
#: a figure of ``metrics`` that is a time (how long a lane has waited, now)
WAITED = re.compile(rb"(storm_queue_oldest_ready_seconds) \S+")


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storm with a recorded request, copied for each run."""
    root = make_storm(tmp_path_factory.mktemp("base") / "storm", QUEUE, toml="[runner]\nslots = 1\n")
    assert run_main(["bump", "b", "--root", str(root)]).returncode == 0
    return root


@pytest.mark.parametrize("command", QUICK, ids=[c.name for c in QUICK])
def test_both_paths_answer_alike_for_real(tmp_path: Path, storm: Path, command: Command) -> None:
    """Each form on a storm of its own through each path: the same exit
    code, the same bytes (times and the storm's own path aside)."""
    for n, args in enumerate((minimal(command), full(command))):
        ran = []
        for path in ("quick", "click"):
            root = Path(shutil.copytree(storm, tmp_path / f"{n}-{path}" / "storm", symlinks=True))
            extra = ["--root", str(root)] if "root" in command.top or any(p.kind == "root" for p in command.params) else []
            done = run_main([*args, *extra], cwd=root, env=clean_env(NO_COLOR="1"), text=False, click=path == "click")
            ran.append((done.returncode, *(WAITED.sub(rb"\1 N", STAMP.sub(b"T", out.replace(str(root).encode(), b"ROOT")))
                                           for out in (done.stdout, done.stderr))))
        assert ran[0] == ran[1], args

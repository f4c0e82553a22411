"""The README's promises about itself: the quick start's test command is
what CI runs, and every command and refusal code is documented."""

from __future__ import annotations

import re
from pathlib import Path

from storm_queue import desk, reference

REPO = Path(__file__).resolve().parent.parent.parent
README = (REPO / "README.md").read_text()


def _quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ")]


def test_quick_start_is_exactly_two_commands():
    commands = _quick_start_commands()
    assert len(commands) == 2
    assert commands[0].endswith("storm-queue demo")
    assert "'.[test]'" in commands[1] and "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text()
    test_command = _quick_start_commands()[1]
    runs = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert test_command in runs
    assert "set -euo pipefail" in ci


def test_every_refusal_code_in_the_code_is_in_the_vocabulary_and_back():
    """No code is made up on the spot, and none is listed that no code makes."""
    from storm_queue import refusals

    made = set()
    for path in (REPO / "storm_queue").rglob("*.py"):
        text = path.read_text()
        made |= set(re.findall(r'Refusal\(\s*"([a-z_]+)"', text))
        made |= set(re.findall(r'Outcome\("refused", [^,]+, [^,]+, [^,]+, "([a-z_]+)"', text))
    assert made == set(refusals.CODES), (made ^ set(refusals.CODES))
    table = README.split(reference.CODES_BEGIN, 1)[1].split(reference.CODES_END, 1)[0]
    for code, (exit_code, meaning) in refusals.CODES.items():
        assert f"| `{code}` | {exit_code} | {meaning} |" in table, f"{code}: run `{reference.REGENERATE}`"
        assert refusals.exit_code(code) == exit_code


def test_every_command_is_documented():
    from storm_queue.cli import main

    for name in main.commands:
        assert f"storm-queue {name}" in README, name


def test_readme_command_reference_is_every_commands_help():
    from storm_queue import reference

    fix = f"run `{reference.REGENERATE}`"
    held = reference.sections(README)
    fresh = reference.titled_helps()
    assert list(held) == list(fresh), f"the README's command reference lists {list(held)}, the CLI has {list(fresh)}; {fix}"
    for title, text in fresh.items():
        assert held[title] == text, f"the README's reference for `{title}` differs from its --help; {fix}"
    assert reference.splice(README) == README, f"the command reference is not exactly as generated; {fix}"


def test_every_command_help_teaches():
    """A one-line summary, its arguments named in words, the exit codes it
    can give (each one the README's table knows) and an example."""
    import click

    from storm_queue import reference
    from storm_queue.cli import main

    table = README.split("## Exit codes", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"^\| (\d) \|", table, re.M))
    listing = reference.help_text().split("Commands:\n", 1)[1].splitlines()
    for name in reference.commands():
        command = main.commands[name]
        text = reference.help_text(name)
        body = text.split("\n", 1)[1]  # without the usage line
        summary = (command.help or "").strip().splitlines()[0]
        row = next(line for line in listing if line.split()[0] == name)
        assert row.endswith(" " + summary), f"{name}: its summary must fit whole in `storm-queue --help`: {row!r}"
        for param in command.params:
            if isinstance(param, click.Argument):
                word = param.human_readable_name.strip("[].")
                assert re.search(rf"\b{word}\b", body), f"{name}: argument {word} is not explained"
        assert "Exit codes:" in body, f"{name} lists no exit codes"
        codes = re.findall(r"^    (\d)  \S", body.split("Exit codes:", 1)[1], re.M)
        assert codes and "0" in codes and "2" in codes, f"{name}: every command can give 0, and 2 for a usage error"
        assert set(codes) <= documented, (name, codes)
        assert re.search(rf"^  Example: storm-queue {re.escape(name)}\b", body, re.M), f"{name} has no 'Example: storm-queue {name} ...' line"

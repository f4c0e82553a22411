"""The README's promises about itself: the quick start's test command is
what CI runs, and every command and refusal code is documented."""

from __future__ import annotations

import re
from pathlib import Path

from storm_queue import desk

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


def test_every_refusal_code_is_documented_with_its_exit_code():
    codes = set(re.findall(r'Refusal\(\s*"([a-z_]+)"', (REPO / "storm_queue" / "lane.py").read_text()))
    for module in ("desk.py", "authority.py"):
        codes |= set(re.findall(r'Refusal\(\s*"([a-z_]+)"', (REPO / "storm_queue" / module).read_text()))
    assert len(codes) >= 19
    table = README.split("Refusal codes, with their exit code:", 1)[1].split("\n\n", 2)[1]
    for code in codes:
        row = next((line for line in table.splitlines() if f"`{code}`" in line), None)
        assert row is not None, f"{code} is not in the README's refusal table"
        assert f"| {desk.exit_code(code)} |" in row, (code, row)


def test_every_command_is_documented():
    from storm_queue.cli import main

    for name in main.commands:
        assert f"storm-queue {name}" in README, name

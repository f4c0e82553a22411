"""The documentation's promises about itself: the README is short and its
quick start's test command is what CI runs; every command and refusal code
is documented in docs/, and what is generated there is fresh."""

from __future__ import annotations

import re
from pathlib import Path

from storm_queue.cli import reference

REPO = Path(__file__).resolve().parent.parent.parent
README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"
REFERENCE = (REPO / reference.REFERENCE_PAGE).read_text()
CODES = (REPO / reference.CODES_PAGE).read_text()


def test_the_readme_is_at_most_300_lines():
    lines = README.count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move detail to a page under docs/ and link it"


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
    from storm_queue.core import exit_codes

    made = set()
    for path in (REPO / "storm_queue").rglob("*.py"):
        text = path.read_text()
        made |= set(re.findall(r'Refusal\(\s*"([a-z_]+)"', text))
        made |= set(re.findall(r'Outcome\("refused", [^,]+, [^,]+, [^,]+, "([a-z_]+)"', text))
    assert made == set(exit_codes.CODES), (made ^ set(exit_codes.CODES))
    table = CODES.split(reference.CODES_BEGIN, 1)[1].split(reference.CODES_END, 1)[0]
    for code, (exit_code, meaning) in exit_codes.CODES.items():
        assert f"| `{code}` | {exit_code} | {meaning} |" in table, f"{code}: run `{reference.REGENERATE}`"
        assert exit_codes.exit_code(code) == exit_code


def test_every_command_is_documented():
    """In a page of its own words, not only in the generated reference."""
    from storm_queue.cli.app import main

    pages = "".join(path.read_text() for path in sorted(DOCS.glob("*.md")) if path.name != "reference.md")
    for name in main.commands:
        assert f"storm-queue {name}" in pages, name


def test_the_readme_and_the_docs_give_the_same_exit_codes():
    def table(text: str) -> str:
        return text.split("\n| code | meaning |\n", 1)[1].split("\n\n", 1)[0]

    assert table(README) == table(CODES)


def test_the_command_reference_is_every_commands_help():
    fix = f"run `{reference.REGENERATE}`"
    held = reference.sections(REFERENCE)
    fresh = reference.titled_helps()
    assert list(held) == list(fresh), f"{reference.REFERENCE_PAGE} lists {list(held)}, the CLI has {list(fresh)}; {fix}"
    for title, text in fresh.items():
        assert held[title] == text, f"{reference.REFERENCE_PAGE}'s reference for `{title}` differs from its --help; {fix}"
    assert reference.splice(REFERENCE, require=False) == REFERENCE, f"the command reference is not exactly as generated; {fix}"


def test_every_generated_block_is_fresh():
    """What `python -m storm_queue.cli.reference --check` says, CI's view."""
    assert reference.main(["--check"]) == 0, f"run `{reference.REGENERATE}`"


def _copy_docs(into: Path) -> Path:
    import shutil

    shutil.copyfile(REPO / "README.md", into / "README.md")
    shutil.copytree(DOCS, into / "docs", ignore=shutil.ignore_patterns("img"))
    return into


def test_write_regenerates_the_pages_also_when_told_the_readme(tmp_path, capsys):
    """Other branches still run `--write README.md`: it rewrites the docs/
    beside that README, and a stale reference (a command whose help
    changed, a block written under the older marker) comes out fresh."""
    root = _copy_docs(tmp_path)
    page = root / reference.REFERENCE_PAGE
    stale = page.read_text().replace(reference.BEGIN, reference.BEGIN.replace(
        reference.REGENERATE, "python -m storm_queue.cli.reference --write README.md"))
    stale = stale.replace("Example: storm-queue why billing", "Example: storm-queue why nothing")
    page.write_text(stale)
    assert reference.main(["--check", str(root / "README.md")]) == 1
    assert "run `python -m storm_queue.cli.reference --write`" in capsys.readouterr().err
    assert reference.main(["--write", str(root / "README.md")]) == 0
    assert page.read_text() == REFERENCE
    assert (root / "README.md").read_text() == README
    assert reference.main(["--check", str(root / "README.md")]) == 0


def test_check_fails_when_no_page_holds_a_block(tmp_path, capsys):
    root = _copy_docs(tmp_path)
    codes = root / reference.CODES_PAGE
    codes.write_text(codes.read_text().replace(reference.CODES_END, "<!-- gone -->"))
    assert reference.main(["--check", str(root / "README.md")]) == 2
    codes.write_text(CODES.split(reference.CODES_BEGIN, 1)[0])
    assert reference.main(["--check", str(root / "README.md")]) == 1
    assert "no file holds the refusal codes" in capsys.readouterr().err


def test_every_command_help_teaches():
    """A one-line summary, its arguments named in words, the exit codes it
    can give (each one the README's table knows) and an example."""
    import click

    from storm_queue.cli.app import main

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


def test_the_pages_show_every_picture():
    from storm_queue.cli import pictures

    pages = "".join(p.read_text() for p in DOCS.glob("*.md"))
    for name, _, _ in pictures.PICTURES:
        assert f"](img/{name}.svg)" in pages, f"no page shows docs/img/{name}.svg"

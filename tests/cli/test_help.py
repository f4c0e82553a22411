"""The command reference (docs/reference.md) is what a real terminal shows."""

from __future__ import annotations

from storm_queue.cli import reference
from tests.conftest import REPO, clean_env, run_cli


def test_help_on_an_80_column_terminal_is_the_documented_reference():
    held = reference.sections((REPO / reference.REFERENCE_PAGE).read_text())
    assert len(held) >= 8
    for title, text in held.items():
        argv = title.split()[1:] + ["--help"]
        out = run_cli(None, *argv, env=clean_env(COLUMNS="80"))
        assert out.returncode == 0, out.stderr
        assert "\n".join(line.rstrip() for line in out.stdout.splitlines()) == text, (
            f"`{title} --help` differs from {reference.REFERENCE_PAGE}; run `{reference.REGENERATE}`")

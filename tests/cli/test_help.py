"""The README's command reference is what a real terminal shows."""

from __future__ import annotations

from storm_queue import reference
from tests.conftest import REPO, clean_env, run_cli


def test_help_on_an_80_column_terminal_is_the_readme_reference():
    held = reference.sections((REPO / "README.md").read_text())
    assert len(held) >= 8
    for title, text in held.items():
        argv = title.split()[1:] + ["--help"]
        out = run_cli(None, *argv, env=clean_env(COLUMNS="80"))
        assert out.returncode == 0, out.stderr
        assert "\n".join(line.rstrip() for line in out.stdout.splitlines()) == text, (
            f"`{title} --help` differs from the README; run `{reference.REGENERATE}`")

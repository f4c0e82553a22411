"""`storm-queue demo` tells the whole story on a throwaway storm."""

from __future__ import annotations

import re

from tests.conftest import run_cli


def test_demo_runs_every_step_and_leaves_nothing_behind(tmp_path):
    done = run_cli(None, "demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for command in ("storm-queue list", "storm-queue next", "storm-queue bump docs", "storm-queue push hotfix",
                    "storm-queue unbump billing"):
        assert f"$ {command}" in out
    assert "billing is prioritised; moved: schema api auth billing" in out
    assert "refused (needed_by_named)" in out and "refused (undeclared_source)" in out
    root = re.search(r"a throwaway storm in (\S+),", out).group(1)
    import os

    assert not os.path.exists(root)
    assert out.rstrip().splitlines()[-1].startswith("# every request above")
    assert "next: run docs 15" in out
    dry = out.split("$ storm-queue bump billing --dry-run\n", 1)[1].split("\n\n", 1)[0]
    assert "(dry run: nothing recorded)" in dry and "moved: schema api auth billing" in dry
    assert "pulled forward for billing" in out.split("$ storm-queue why api\n", 1)[1].split("\n\n", 1)[0]
    logged = out.split("$ storm-queue log\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in logged] == [str(n) for n in range(1, len(logged) + 1)]
    assert any("refused (undeclared_source)" in line for line in logged)


def test_demo_shows_a_lease_and_a_stale_token_refused(tmp_path):
    out = run_cli(None, "demo", cwd=tmp_path).stdout
    assert "$ storm-queue claim --holder runner-1 --ttl 900\nrun docs 15 1\n" in out
    assert "$ storm-queue claim --holder runner-2 --ttl 900\nrun docs 15 2\n" in out
    late = out.split("$ storm-queue finish docs --token 1 --result ok\n", 1)[1].split("\n\n", 1)[0]
    assert "refused (stale_fence)" in late and "(exit 2)" in late
    assert "docs finished ok (token 2); it awaits review" in out

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


def test_the_last_line_names_no_file_in_the_storm_it_deleted(tmp_path):
    """Issue 13 item 13: without --keep the storm is gone, so no line after
    its deletion may send the reader to one of its files."""
    import os

    out = run_cli(None, "demo", cwd=tmp_path).stdout
    root = re.search(r"a throwaway storm in (\S+),", out).group(1)
    assert not os.path.exists(root)
    last = out.rstrip().splitlines()[-1]
    assert root not in last and "priority.log" in last and "deleted" in last and "--keep" in last
    for path in re.findall(r"(/\S+priority\.log)", out):
        assert not path.startswith(root), f"{path} is in the deleted storm"


def test_keep_names_the_log_it_kept_and_it_is_there(tmp_path):
    import json
    import shutil
    from pathlib import Path

    out = run_cli(None, "demo", "--keep", cwd=tmp_path).stdout
    root = re.search(r"a throwaway storm in (\S+),", out).group(1)
    try:
        told, kept = out.rstrip().splitlines()[-2:]
        assert kept == f"# kept: {root}"
        log = Path(told.removeprefix("# every request above is one line in "))
        assert log == Path(root) / "priority.log"
        assert [json.loads(line)["seq"] for line in log.read_text().splitlines()] == list(range(1, 13))
    finally:
        shutil.rmtree(root, ignore_errors=True)

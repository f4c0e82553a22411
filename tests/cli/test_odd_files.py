"""Storm files that are not what they should be (a directory, a planted
link) get a clear refusal naming them, never a traceback."""

from __future__ import annotations

import os

import pytest

from tests.conftest import make_storm, run_cli


@pytest.mark.parametrize("name", ["queue.txt", "integrated.txt", "abandoned.txt"])
@pytest.mark.parametrize("odd", ["directory", "link"])
def test_an_odd_storm_file_is_refused_by_name(tmp_path, name, odd):
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\n")
    assert run_cli(root, "bump", "a").returncode == 0
    path = root / name
    if path.exists():
        os.rename(path, root / "elsewhere")
    if odd == "directory":
        path.mkdir()
    else:
        (root / "elsewhere").touch()
        path.symlink_to(root / "elsewhere")
    log = (root / "priority.log").read_bytes()
    for args in (["list"], ["next"], ["bump", "b"]):
        done = run_cli(root, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert str(path) in done.stderr
        assert ("symbolic link" if odd == "link" else "is a directory") in done.stderr
        assert "Traceback" not in done.stderr and "crashed" not in done.stderr
    assert (root / "priority.log").read_bytes() == log

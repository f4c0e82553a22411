"""bench/runner_api.py's modes run, a few lanes each, on a directory storm
(its figures are the bench's to measure; here: that it asks what it says)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "runner_api.py"


@pytest.mark.parametrize("mode", ["requests", "lease", "shell"])
def test_each_mode_runs_its_lanes_to_the_end(mode):
    spec = importlib.util.spec_from_file_location("runner_api_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    root = bench.directory(3)
    took, made = bench.run(mode, root, 3)
    assert took > 0 and made == 0
    from storm_queue import Storm

    storm = Storm.find(root, env=bench.ENV)
    assert [row.state for row in storm.listing().view.rows] == ["finished"] * 3

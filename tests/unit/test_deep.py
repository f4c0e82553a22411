"""No recursion limit and no quadratic walk: a dependency chain 100,000
lanes deep through the library and once through the CLI; the in-place fold
equals the step-by-step fold. (100,000 lanes and a million-line log are
exercised by bench/, not here.)"""

from __future__ import annotations

import json
from functools import reduce
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storm_queue.service import storm as desk
from storm_queue.core import fold
from storm_queue.store.directory.log import reader
from tests.conftest import make_storm, run_cli

DEPTH = 100_000


def chain(depth: int) -> str:
    """queue.txt where lane i depends on lane i-1."""
    return "l0 1\n" + "".join(f"l{i} {i + 1} l{i - 1}\n" for i in range(1, depth))


def test_a_chain_100000_deep_is_pulled_forward_whole_by_the_library(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", chain(DEPTH))
    storm = desk.Storm(str(root), env={})
    out = storm.bump(f"l{DEPTH - 1}", reason="the deepest")
    assert out.outcome == "done", out.message
    assert out.moved == [f"l{i}" for i in range(DEPTH)]  # dependencies first
    listing = storm.listing()
    assert listing.decision == "run l0 1"
    rows = listing.view.rows
    assert len(rows) == DEPTH and all(r.prioritised for r in rows)
    assert rows[1].status == "waits on l0 (not yet run)"
    assert reader.read(str(root / "priority.log")).state.lane == tuple(out.moved)
    # the deepest lane's unbump takes the whole chain with it; a middle one is needed by it
    middle = storm.unbump(f"l{DEPTH // 2}")
    assert middle.code == "needed_by_named"
    gone = storm.unbump(f"l{DEPTH - 1}")
    assert gone.outcome == "done" and len(gone.removed) == DEPTH
    assert storm.listing().view.rows[0].prioritised is False


def test_a_cycle_100000_round_is_refused_by_name(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", f"l0 1 l{DEPTH - 1}\n" + chain(DEPTH).split("\n", 1)[1])
    out = desk.Storm(str(root), env={}).bump("l5")
    assert out.code == "dependency_cycle"
    assert "l0" in out.message and f"l{DEPTH - 1}" in out.message


def test_a_chain_100000_deep_through_the_cli(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", chain(DEPTH))
    done = run_cli(root, "bump", f"l{DEPTH - 1}", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["moved"]) == DEPTH
    nxt = run_cli(root, "next", timeout=300)
    assert (nxt.returncode, nxt.stdout) == (0, "run l0 1\n")
    verified = run_cli(root, "verify", "--json", timeout=300)
    assert verified.returncode == 0 and len(json.loads(verified.stdout)["lane"]) == DEPTH


SLUGS = st.sampled_from("abcdef")
EVENT = st.builds(
    lambda action, slug, moved, removed, noop, seq: {"action": action, "slug": slug, "moved": moved, "removed": removed,
                                                     "seq": seq, "at": "t", "by": "operator:o",
                                                     **({"noop": "done"} if noop else {})},
    st.sampled_from(["push", "bump", "unbump", "refused", "reset"]), SLUGS, st.lists(SLUGS, max_size=4),
    st.lists(SLUGS, max_size=3), st.booleans(), st.integers(1, 99))


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENT, max_size=30), st.integers(0, 30))
def test_the_in_place_fold_equals_the_step_by_step_fold(events: list[dict], cut: int) -> None:
    assert fold.replay(events) == reduce(fold.apply, events, fold.EMPTY)
    middle = fold.replay(events[:cut])
    assert fold.replay(events[cut:], middle) == fold.replay(events)

"""Finished lanes left to a batch review: the UNATTENDED file on a directory
storm, the declared ``[runner] unattended`` on either store (a database
storm's only way to say it), the same answers from both."""

from __future__ import annotations

import json

import pytest

from storm_queue.core import config


@pytest.mark.parametrize("unattended, decision", [(False, "review b"), (True, "run c 3")])
def test_a_declared_unattended_runner_leaves_finished_lanes_to_a_batch_review(store, unattended, decision) -> None:
    store.make("a 1 b\nb 2\nc 3\n", finished=["b"], toml="[runner]\nslots = 2\n", unattended=unattended)
    assert store.cli("next").stdout == decision + "\n"
    listing = json.loads(store.cli("list", "--json").stdout)
    assert listing["decision"] == decision
    claim = store.cli("claim", "--holder", "h", "--json")
    assert claim.returncode == 0 and json.loads(claim.stdout)["decision"] == (
        "run c 3 1" if unattended else "review b"), claim.stdout


def test_the_file_and_the_key_say_the_same_on_a_directory(storm, tmp_path) -> None:
    from tests.conftest import run_cli

    root = storm("a 1\nb 2\n", finished=["a"], unattended=True)
    assert run_cli(root, "next").stdout == "run b 2\n"
    (root / "UNATTENDED").unlink()
    assert run_cli(root, "next").stdout == "review a\n"
    (root / "storm.toml").write_text("[runner]\nunattended = true\n")
    assert run_cli(root, "next").stdout == "run b 2\n"


def test_unattended_must_be_true_or_false() -> None:
    assert config.parse("[runner]\nunattended = true\n").runner.unattended is True
    assert config.parse("").runner.unattended is False
    bad = config.parse("[runner]\nunattended = 1\n")
    assert bad.error and "unattended must be true or false" in bad.error

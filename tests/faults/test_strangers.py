"""Strangers and permissions (issue 5 item 5), with a real second uid
(65534, dropped to in a forked child; see tests/cli/test_authority.py):
every writing command is refused and, where the stranger can write nothing,
reported as unrecorded with exit 1; a storm the caller can read but not
write is a refusal, not a crash; and a ``storm.toml`` that another account
owns or that its group or others can write is an untrusted declaration,
which refuses every request that names a source."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest

import storm_queue.cli.app
from tests.cli.test_authority import NOBODY, chown_tree, json_of, run_forked, storm_dir  # noqa: F401 -- a fixture
from tests.conftest import log_events, run_cli, tree


def writing_commands() -> list[list[str]]:
    """Every command that records a request (it takes --reason), with
    arguments that make it a well-formed request."""
    out = []
    for name, command in sorted(storm_queue.cli.app.main.commands.items()):
        params = {p.name: p for p in command.params}
        if "reason" not in params or name in ("declare", "upgrade", "grant", "revoke"):  # they record into a database storm only
            continue
        args = [name] + ["a" if p.name == "slug" else p.type.choices[0] if isinstance(p.type, click.Choice) else "7"
                         for p in command.params if isinstance(p, click.Argument)]
        for p in command.params:  # required options, with a well-formed value
            if isinstance(p, click.Option) and p.required:
                args += [p.opts[0], p.type.choices[0] if isinstance(p.type, click.Choice) else "now" if p.name == "not_before" else "1"]
        out.append(args + ["--reason", "r"])
    assert {a[0] for a in out} >= {"bump", "push", "unbump", "reset"}
    return out


@pytest.mark.parametrize("with_log", [False, True], ids=["fresh", "with-log"])
def test_every_writing_command_of_a_stranger_is_refused_unrecorded_with_1(storm_dir, with_log):
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\nb 2\n", toml='[priority]\nsources = ["bot"]\n')
    if with_log:
        assert run_cli(root, "bump", "b").returncode == 0
    before = tree(root, times=True)
    for args in writing_commands():
        for extra in ([], ["--source", "bot"]):
            ran = run_forked(root, *args, *extra, "--json")
            assert ran.returncode == 1, (args, ran.stdout, ran.stderr)
            doc = json_of(ran)
            assert (doc["outcome"], doc["code"], doc["recorded"]) == ("refused", "not_operator", False), args
            assert "not recorded" in doc["message"]
            assert "Traceback" not in ran.stderr
    assert tree(root, times=True) == before


def _read_only(root: Path, what: str) -> None:
    """Make part of nobody's storm unwritable, even by its owner."""
    if what == "directory":
        os.chmod(root, 0o555)
    else:
        os.chmod(root / what, 0o444)


@pytest.mark.parametrize("what", ["directory", "priority.log", ".priority.log.witness", "priority.log.lock",
                                  "directory-fresh"])
def test_a_storm_its_owner_cannot_write_is_a_refusal_not_a_crash(storm_dir, what):
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\nb 2\n")
    if what != "directory-fresh":
        assert run_cli(root, "bump", "a").returncode == 0
    chown_tree(root, NOBODY)
    _read_only(root, "directory" if what == "directory-fresh" else what)
    before = tree(root)  # without times: taking the lock truncates the (empty) lock file
    for args in (["bump", "b"], ["push", "z", "5"], ["unbump", "a"] if what != "directory-fresh" else ["bump", "a"]):
        ran = run_forked(root, *args)
        expect_witness_case = what == ".priority.log.witness"
        if expect_witness_case:
            # a read-only witness is replaced by rename, which the directory allows: the request is done
            assert ran.returncode == 0, (args, ran.stderr)
            continue
        assert ran.returncode == 2, (args, ran.stdout, ran.stderr)
        assert "storm_unwritable" in ran.stderr and "Permission denied" in ran.stderr, ran.stderr
        assert "nothing was recorded" in ran.stderr
        assert "Traceback" not in ran.stderr and "crashed" not in ran.stderr
        doc = json_of(run_forked(root, *args, "--json"))
        assert (doc["outcome"], doc["code"], doc["recorded"]) == ("refused", "storm_unwritable", False)
        assert tree(root) == before, args
    # a refusal the owner could not record keeps its own code and says so; one
    # that needs the lock first (the lookups do) cannot be reached without it
    ran = run_forked(root, "bump", "nosuch")
    if what in ("priority.log.lock", "directory-fresh"):  # no lock to open, or none to create
        assert ran.returncode == 2 and "storm_unwritable" in ran.stderr, ran.stderr
    elif what != ".priority.log.witness":
        assert ran.returncode == 2 and "not recorded" in ran.stderr and "unknown_slug" in ran.stderr, ran.stderr
    # readers go on
    assert run_forked(root, "list").returncode == 0
    assert run_forked(root, "next").returncode == 0


@pytest.mark.parametrize("how", ["group-writable", "other-writable", "owned-by-another"])
def test_an_untrusted_declaration_refuses_every_request_that_names_a_source(storm_dir, how):
    root = storm_dir("a 1\nb 2\nc 3\n", toml='[priority]\nsources = ["bot"]\n')
    assert run_cli(root, "bump", "a", "--source", "bot").returncode == 0  # trusted: admitted
    toml = root / "storm.toml"
    if how == "group-writable":
        os.chmod(toml, 0o664)
    elif how == "other-writable":
        os.chmod(toml, 0o646)
    else:
        os.chown(toml, NOBODY, NOBODY)
    for args in (["bump", "b"], ["push", "z", "5"], ["unbump", "a"], ["reset", "--reason", "r"]):
        done = run_cli(root, *args, "--source", "bot", "--json")
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        assert (doc["code"], doc["recorded"], doc["by"]) == ("declaration_untrusted", True, "source:bot")
        assert "storm.toml" in doc["message"]
        event = log_events(root)[-1]
        assert (event["action"], event["code"], event["authorised"]) == ("refused", "declaration_untrusted", False)
    # an undeclared source is refused as untrusted too: the file it would be checked against is not trusted
    assert json.loads(run_cli(root, "bump", "b", "--source", "other", "--json").stdout)["code"] == "declaration_untrusted"
    # the operator, naming no source, is not refused
    done = run_cli(root, "bump", "b", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["moved"] == ["b"]
    assert "z" not in (root / "queue.txt").read_text()


def test_a_storm_toml_owned_by_root_is_untrusted_in_nobodys_storm(storm_dir):
    """A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n", toml='[priority]\nsources = ["bot"]\n')
    chown_tree(root, NOBODY)
    os.chown(root / "storm.toml", 0, 0)
    ran = run_forked(root, "bump", "a", "--source", "bot", "--json")
    assert ran.returncode == 1, ran.stderr
    doc = json_of(ran)
    assert (doc["code"], doc["recorded"]) == ("declaration_untrusted", True)
    assert "owned by root" in doc["message"]
    ran = run_forked(root, "bump", "a", "--json")
    assert ran.returncode == 0 and json_of(ran)["by"] == "operator:nobody"


def test_a_storm_a_stranger_cannot_enter_is_refused_not_crashed(storm_dir):
    """A root of mode 0700: the stranger cannot even see who owns queue.txt.
    Requests are refused (not_operator, unrecorded, exit 1), doctor says the
    storm cannot be read (exit 2), and the readers answer 2 or 3 (a storm.toml
    they cannot read leaves the log unknown); nothing crashes.
    A real process: a forked child becomes another account (uid 65534)."""
    root = storm_dir("a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    before = tree(root, times=True)
    os.chmod(root, 0o700)
    for args in writing_commands():
        ran = run_forked(root, *args, "--json", cwd=root.parent)
        assert ran.returncode == 1, (args, ran.stderr)
        out = json_of(ran)
        assert out["code"] == "not_operator" and out["recorded"] is False, args
    for args in (["doctor"], ["next"], ["list", "--json"], ["why", "a"], ["log"], ["verify"]):
        ran = run_forked(root, *args, cwd=root.parent)
        assert ran.returncode == 2 if args == ["doctor"] else ran.returncode in (2, 3), (args, ran.returncode, ran.stderr)
        assert "crashed" not in ran.stderr and "Traceback" not in ran.stderr, args
    os.chmod(root, 0o755)
    assert tree(root, times=True) == before

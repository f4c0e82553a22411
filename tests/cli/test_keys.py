"""Idempotent requests (issue 6 item 7): every writing command takes
``--key KEY``. Asked again with the same key and the same arguments, it
answers with the first outcome and appends nothing; the same key with other
arguments is refused (``idempotency_conflict``) without rebinding the key.
Keys are per principal, survive the checkpoint, and a cron job that retries
a claim concurrently records exactly one claim."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

import storm_queue.cli.app
from storm_queue.service.storm import Storm
from storm_queue.store.directory.log import reader
from storm_queue.store.directory.log.checkpoint import EVERY, checkpoint_path
from tests.conftest import clean_env, log_events, make_storm, run_cli, tree

QUEUE = "a 1\nb 2\n"
KEY = "retry-2026-11-30T02:00:00Z"


def writing_commands() -> set[str]:
    """Every command that records a request: those that take --reason."""
    return {name for name, command in storm_queue.cli.app.main.commands.items()
            if "reason" in {p.name for p in command.params} and name not in ("declare", "upgrade", "grant", "revoke")}  # database storms only


def ok(root: Path, *args: str) -> str:
    done = run_cli(root, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _damage(root: Path) -> None:
    """An unknown order, which only reset repairs: the log lost its witness."""
    ok(root, "bump", "a")
    (root / ".priority.log.witness").unlink()
    assert run_cli(root, "list").returncode == 3


def _old_log(root: Path) -> None:
    """A log the earlier priority tool wrote, which only adopt takes over."""
    from tests import oldlog

    oldlog.write(root, [oldlog.bump("b", "2", [], ["b"])])
    assert run_cli(root, "list").returncode == 3


def _claimed(root: Path) -> None:
    assert ok(root, "claim", "--holder", "r1").strip() == "run a 1 1"


def _quarantined(root: Path) -> None:
    _claimed(root)
    ok(root, "finish", "a", "--token", "1", "--result", "failed")
    assert log_events(root)[-1]["action"] == "quarantine"


#: command -> (storm.toml, running markers, setup, a well-formed request it admits there)
REQUESTS: dict[str, tuple[str | None, tuple[str, ...], Callable[[Path], None] | None, list[str]]] = {
    "push": (None, (), None, ["push", "z", "5", "--deps", "a", "--reason", "why"]),
    "bump": (None, (), None, ["bump", "b", "--reason", "why"]),
    "unbump": (None, (), lambda root: ok(root, "bump", "a"), ["unbump", "a", "--reason", "why"]),
    "reset": (None, (), _damage, ["reset", "--reason", "the witness was lost"]),
    "adopt": (None, (), _old_log, ["adopt", "--reason", "moving the storm"]),
    "claim": (None, (), None, ["claim", "--holder", "r1", "--ttl", "60", "--reason", "why"]),
    "renew": (None, (), _claimed, ["renew", "a", "--token", "1", "--ttl", "120", "--reason", "why"]),
    "finish": (None, (), _claimed, ["finish", "a", "--token", "1", "--result", "ok", "--note", "n", "--reason", "why"]),
    "recover": (None, ("a",), None, ["recover", "a", "--force", "--reason", "a marker with no lease"]),
    "unpark": ("[runner]\nattempts = 1\n", (), _quarantined, ["unpark", "a", "--reason", "fixed"]),
    "schedule": (None, (), None, ["schedule", "a", "--not-before", "2030-01-01", "--reason", "why"]),
    "add": (None, (), None, ["add", "z", "5", "--deps", "a", "--reason", "why"]),
    "settle": (None, (), None, ["settle", "a", "integrated", "--reason", "why"]),
    "waive": (None, (), lambda root: (root / "queue.txt").write_text("a 1\nb 2 a\n"), ["waive", "b", "a", "--reason", "why"]),
    "halt": (None, (), None, ["halt", "--reason", "why"]),
    "resume": (None, (), lambda root: ok(root, "halt", "--reason", "a freeze"), ["resume", "--reason", "why"]),
    "release": (None, (), _claimed, ["release", "a", "--token", "1", "--reason", "why"]),
    "cancel": (None, (), _claimed, ["cancel", "a", "--reason", "why"]),
    "hold": (None, (), None, ["hold", "b", "--reason", "why"]),
    "unhold": (None, (), lambda root: ok(root, "hold", "b", "--reason", "a freeze"), ["unhold", "b", "--reason", "why"]),
}

#: more requests whose repeats must answer as the first did
VARIANTS = {
    # a failure that spends the last attempt: the finish and the quarantine are one write
    "finish-failed-quarantines": ("[runner]\nattempts = 1\n", (), _claimed,
                                  ["finish", "a", "--token", "1", "--result", "failed", "--reason", "why"]),
    # a forced recover of a live lease
    "recover-force": (None, (), _claimed, ["recover", "a", "--force", "--reason", "its host is gone"]),
}

#: what a repeat must answer as the first request did (its message says it is a repeat)
SAME = ("outcome", "code", "action", "slug", "by", "moved", "removed", "appended", "decision", "token", "expires")


def prepared(tmp_path: Path, name: str, command: str) -> tuple[Path, list[str]]:
    toml, running, setup, args = {**REQUESTS, **VARIANTS}[command]
    root = make_storm(tmp_path / name, QUEUE, running=running, toml=toml)
    if setup is not None:
        setup(root)
    return root, args


def without_message(stdout: str) -> str:
    """A request's text answer without its message (the first part of its
    first line): what moved and what was removed."""
    first, _, rest = stdout.partition("\n")
    found = re.search(r"; (moved|removed): .*$", first)
    return (found.group(0) if found else "") + "\n" + rest


def test_every_writing_command_has_a_request_here() -> None:
    assert set(REQUESTS) == writing_commands()
    for name, command in storm_queue.cli.app.main.commands.items():
        if name in REQUESTS:
            assert "key" in {p.name for p in command.params}, name


@pytest.mark.parametrize("command", sorted(REQUESTS) + sorted(VARIANTS))
def test_a_repeated_request_answers_as_the_first_and_appends_nothing(tmp_path: Path, command: str) -> None:
    # as text: the same exit code and the same answer
    root, args = prepared(tmp_path, "text", command)
    first = run_cli(root, *args, "--key", KEY)
    assert first.returncode == 0, (first.stdout, first.stderr)
    # the request's own line carries the key (a quarantine it caused may follow it)
    keyed = [e for e in log_events(root) if e.get("key") == KEY]
    assert len(keyed) == 1 and keyed[0]["by"] == "operator:root", keyed
    seq = keyed[0]["seq"]
    before = tree(root)
    again = run_cli(root, *args, "--key", KEY)
    assert again.returncode == first.returncode, again.stderr
    if args[0] == "claim":
        assert again.stdout == first.stdout == "run a 1 1\n"
    else:
        said = first.stdout
        if args[0] == "reset":  # the lines a reset kept and lost are named once (issue 33 item 5): the log lists none
            assert "\nkept: " in said and "\nlost: " in said, said
            said = said.split("\nkept: ")[0] + "\n"
        assert without_message(again.stdout) == without_message(said), (first.stdout, again.stdout)
        assert f"a repeat of line {seq}" in again.stdout and "nothing new recorded" in again.stdout, again.stdout
    assert tree(root) == before  # not a byte appended, not a file touched

    # as JSON: the first outcome again, marked as the repeat of its line
    root, args = prepared(tmp_path, "json", command)
    done = run_cli(root, *args, "--key", KEY, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["recorded"] is True and "repeat" not in doc, doc
    seq = next(e["seq"] for e in log_events(root) if e.get("key") == KEY)
    before = tree(root)
    done = run_cli(root, *args, "--key", KEY, "--json")
    assert done.returncode == 0, done.stderr
    repeat = json.loads(done.stdout)
    assert (repeat["repeat"], repeat["recorded"]) == (seq, False), repeat
    assert {f: repeat.get(f) for f in SAME} == {f: doc.get(f) for f in SAME}
    assert tree(root) == before


def test_the_same_key_with_other_arguments_is_a_conflict_that_does_not_rebind_it(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE + "c 3\n")
    ok(root, "bump", "a", "--reason", "outage", "--key", "k")
    for other in (["bump", "b", "--reason", "outage"],  # another lane
                  ["bump", "a", "--reason", "other words"],  # the reason is part of the request
                  ["unbump", "a", "--reason", "outage"],  # another verb
                  ["bump", "b", "--reason", "outage"]):  # asked again: refused again, never a repeat of a refusal
        lines = len(log_events(root))
        done = run_cli(root, *other, "--key", "k", "--json")
        assert done.returncode == 2, done.stderr
        doc = json.loads(done.stdout)
        assert (doc["outcome"], doc["code"], doc["recorded"]) == ("refused", "idempotency_conflict", True), doc
        assert "repeat" not in doc and "line 1" in doc["message"]
        events = log_events(root)
        assert len(events) == lines + 1
        assert (events[-1]["action"], events[-1]["code"], events[-1]["requested"]) == ("refused", "idempotency_conflict", other[0])
    # the key still names the first request: asked again, its first outcome
    before = tree(root)
    done = run_cli(root, "bump", "a", "--reason", "outage", "--key", "k", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["outcome"], doc["moved"], doc["repeat"], doc["recorded"]) == ("done", ["a"], 1, False), doc
    assert tree(root) == before
    # nothing the conflicts asked for happened
    rows = json.loads(run_cli(root, "list", "--json").stdout)["rows"]
    assert [r["slug"] for r in rows if r["prioritised"]] == ["a"]
    assert [e["slug"] for e in log_events(root) if e["action"] in ("bump", "unbump")] == ["a"]


def test_a_refused_first_request_is_refused_again_without_a_new_line(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    done = run_cli(root, "bump", "nosuch", "--key", "k", "--json")
    assert done.returncode == 2
    first = json.loads(done.stdout)
    assert (first["code"], first["recorded"]) == ("unknown_slug", True)
    seq = log_events(root)[-1]["seq"]
    # even once queue.txt carries the lane, the key answers with the first outcome
    with open(root / "queue.txt", "a") as f:
        f.write("nosuch 3\n")
    before = tree(root)
    for as_json in (True, False):
        done = run_cli(root, "bump", "nosuch", "--key", "k", *(["--json"] if as_json else []))
        assert done.returncode == 2, done.stderr
        if as_json:
            doc = json.loads(done.stdout)
            assert (doc["outcome"], doc["code"], doc["repeat"], doc["recorded"]) == ("refused", "unknown_slug", seq, False)
        else:
            assert done.stdout == "" and "refused (unknown_slug)" in done.stderr and f"a repeat of line {seq}" in done.stderr
    assert tree(root) == before
    # without the key it is a new request, and admitted
    assert json.loads(run_cli(root, "bump", "nosuch", "--json").stdout)["moved"] == ["nosuch"]


def test_keys_are_per_principal(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE, toml='[priority]\nsources = ["bot"]\n')
    ok(root, "bump", "a", "--key", "k")
    done = run_cli(root, "bump", "b", "--source", "bot", "--key", "k", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["by"], doc["moved"], doc["recorded"]) == ("source:bot", ["b"], True)
    assert "repeat" not in doc
    before = tree(root)
    for args, by, seq in ((["bump", "a"], "operator:root", 1), (["bump", "b", "--source", "bot"], "source:bot", 2)):
        doc = json.loads(run_cli(root, *args, "--key", "k", "--json").stdout)
        assert (doc["by"], doc["repeat"], doc["recorded"]) == (by, seq, False), doc
    assert tree(root) == before
    # within one principal the key is bound: the bot's key names its own request
    doc = json.loads(run_cli(root, "bump", "a", "--source", "bot", "--key", "k", "--json").stdout)
    assert (doc["code"], doc["by"]) == ("idempotency_conflict", "source:bot")


def test_keys_survive_the_checkpoint(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    done = json.loads(run_cli(root, "claim", "--holder", "r1", "--key", "nightly", "--json").stdout)
    assert done["decision"] == "run a 1 1"
    storm = Storm(str(root), env=clean_env())
    log = str(root / "priority.log")
    for i in range(4 * EVERY):  # filler, through the API for speed
        (storm.bump if i % 2 == 0 else storm.unbump)("b").check()
        if reader.read(log).checkpoint_seq > 1 + EVERY:
            break
    assert Path(checkpoint_path(log)).exists()
    assert reader.read(log).checkpoint_seq > 1  # a read now starts after the keyed line
    before = tree(root)
    again = run_cli(root, "claim", "--holder", "r1", "--key", "nightly", "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert (doc["decision"], doc["token"], doc["repeat"], doc["recorded"]) == ("run a 1 1", 1, 1, False), doc
    assert tree(root) == before
    doc = json.loads(run_cli(root, "claim", "--holder", "r2", "--key", "nightly", "--json").stdout)
    assert doc["code"] == "idempotency_conflict"


@pytest.mark.parametrize("key", ["two words", "k" * 201, "\u043a\u043b\u044e\u0447", "", "a\tb", "k;rm"],
                         ids=["space", "201-chars", "non-ascii", "empty", "tab", "semicolon"])
def test_an_invalid_key_is_refused(tmp_path: Path, key: str) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    done = run_cli(root, "bump", "a", "--key", key, "--json")
    assert done.returncode == 2, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["outcome"], doc["code"], doc["moved"]) == ("refused", "invalid_key", []), doc
    event = log_events(root)[-1]
    assert (event["action"], event["code"]) == ("refused", "invalid_key")
    assert "key" not in event  # an invalid key binds nothing
    assert run_cli(root, "bump", "a", "--key", key, "--json").returncode == 2  # nor does it on the second try


@pytest.mark.parametrize("key", ["k" * 200, "A-z_0.9:@/+=", "x"])
def test_a_valid_key_is_admitted(tmp_path: Path, key: str) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    doc = json.loads(run_cli(root, "bump", "a", "--key", key, "--json").stdout)
    assert (doc["outcome"], doc["moved"]) == ("done", ["a"]), doc
    assert log_events(root)[-1]["key"] == key


def test_a_cron_retry_loop_records_exactly_one_claim(tmp_path: Path) -> None:
    """Five copies of one cron job's claim at once (as a retry after a
    timeout would): one claim is recorded and all five print its line,
    although five slots and two lanes would have let unkeyed claims take both.
    Real processes, at once."""
    root = make_storm(tmp_path / "storm", QUEUE, toml="[runner]\nslots = 5\n")
    argv = [sys.executable, "-m", "storm_queue", "claim", "--key", "nightly-1", "--wait", "120", "--root", str(root)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
             for _ in range(5)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        answers.append((proc.returncode, out, err))
    assert all(code == 0 for code, _, _ in answers), answers
    assert {out for _, out, _ in answers} == {"run a 1 1\n"}, answers
    events = log_events(root)
    assert [e["action"] for e in events] == ["claim"], events
    assert events[0]["key"] == "nightly-1"

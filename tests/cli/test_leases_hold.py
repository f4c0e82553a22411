"""What a review of the runners' change found, each pinned by a test: a
lease is never handed out twice and never outlived by its own repeat; a
lane that lost its lease never finishes the lane; a key that is not one is
never recorded; a [runner] table cannot make an expiry the tool cannot
compare; a reset never lets a token repeat; a finish whose line could not
be written leaves result.json as it was."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

from storm_queue.service.storm import Storm
from storm_queue.store.directory.log import writer
from tests.conftest import clean_env, log_events, make_storm, run_cli

FAST = "[runner]\nttl_min = 1\nttl = 1\n"


def cli(root: Path, *args: str, code: int = 0):
    done = run_cli(root, *args)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return done


def doc(root: Path, *args: str, code: int = 0) -> dict:
    return json.loads(cli(root, *args, "--json", code=code).stdout)


def result(root: Path, slug: str) -> Path:
    return root / "lanes" / slug / ".qwenstorm" / "result.json"


def state(root: Path, slug: str) -> str:
    return next(r["state"] for r in doc(root, "list")["rows"] if r["slug"] == slug)


def test_a_keyed_claim_is_repeated_only_while_its_lease_lives(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml=FAST + "slots = 2\n")
    assert cli(root, "claim", "--key", "k1").stdout == "run a 1 1\n"
    assert cli(root, "claim", "--key", "k1").stdout == "run a 1 1\n"  # live: the same answer, nothing new
    lines = len(log_events(root))
    time.sleep(2.5)  # the lease expires
    again = doc(root, "claim", "--key", "k1", code=2)
    assert (again["outcome"], again["code"], again["slug"], again["repeat"], again["recorded"]) == (
        "refused", "stale_fence", "a", 1, False)
    assert "has ended" in again["message"]
    assert len(log_events(root)) == lines  # a repeat never records
    assert cli(root, "claim", "--key", "k2").stdout == "run a 1 2\n"  # a new key: the expiry, then a new lease


def test_a_result_written_without_the_leases_token_does_not_finish_the_lane(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml="[runner]\nttl_min = 1\nttl = 600\n")
    assert cli(root, "claim", "--holder", "new").stdout == "run a 1 1\n"
    result(root, "a").write_text('{"status": "failed", "by": "a lane whose runner lost its lease"}\n')
    assert state(root, "a") == "running"
    assert cli(root, "claim").stdout == "wait\n"  # not `review a`: the lane's holder is still at work
    cli(root, "finish", "a", "--token", "1", "--result", "ok")
    body = json.loads(result(root, "a").read_text())
    assert (body["completed"], body["status"], body["token"], body["holder"]) == (True, "ok", 1, "new")
    assert state(root, "a") == "finished"
    # a lane run without a lease keeps the old meaning: its result.json finishes it
    result(root, "b").parent.mkdir(parents=True)
    result(root, "b").write_text('{"status": "ok"}\n')
    assert state(root, "b") == "finished"


def test_a_finish_whose_line_cannot_be_written_puts_result_json_back(tmp_path: Path, monkeypatch) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n", toml="[runner]\nttl_min = 1\n")
    storm = Storm(str(root), env=clean_env())
    assert storm.claim("r1").decision == "run a 1 1"
    foreign = b'{"status": "failed"}\n'
    result(root, "a").write_bytes(foreign)

    def full(*args, **kwargs):
        raise writer.AppendFailed.of(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))

    monkeypatch.setattr(writer, "append", full)
    with pytest.raises(Exception, match="could not be recorded"):
        storm.finish("a", 1, "ok")
    assert result(root, "a").read_bytes() == foreign
    result(root, "a").unlink()
    with pytest.raises(Exception, match="could not be recorded"):
        storm.finish("a", 1, "ok")
    assert not result(root, "a").exists()
    monkeypatch.undo()
    assert storm.finish("a", 1, "ok").recorded and json.loads(result(root, "a").read_text())["token"] == 1


def test_an_invalid_key_is_never_recorded_whatever_else_is_wrong(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    out = doc(root, "bump", "a*", "--key", "bad key\nx", code=2)
    assert out["code"] == "invalid_slug"
    event = log_events(root)[-1]
    assert event["action"] == "refused" and "key" not in event and "fingerprint" not in event
    assert "repeat" not in doc(root, "bump", "a*", "--key", "bad key\nx", code=2)


@pytest.mark.parametrize("runner", ["ttl_max = 10000000000\nmax_lease_age = 10000000000\n",
                                    "ttl = 600\nmax_lease_age = 60\n", "ttl_min = 100\nttl = 50\n"])
def test_a_runner_table_that_cannot_work_refuses_every_request(tmp_path: Path, runner: str) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n", toml="[runner]\n" + runner)
    out = doc(root, "claim", "--ttl", "5", code=1)
    assert out["code"] == "declaration_unreadable" and "[runner]" in out["message"]
    assert doc(root, "bump", "a", code=1)["code"] == "declaration_unreadable"


def test_no_token_repeats_across_a_reset(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n", toml="[runner]\nttl_min = 1\nslots = 2\n")
    assert cli(root, "claim", "--holder", "old").stdout == "run a 1 1\n"
    (root / ".priority.log.witness").unlink()  # the order is lost
    cli(root, "reset", "--reason", "witness lost")
    abandons = log_events(root)[0]["abandons"]
    assert state(root, "a") == "running"  # the old claim's marker keeps it from running twice
    cli(root, "recover", "a", "--force", "--reason", "the old runner is gone")
    decision = cli(root, "claim").stdout.split()
    assert decision[:2] == ["run", "a"] and int(decision[3]) > abandons
    # the old runner's token is fenced off
    assert doc(root, "finish", "a", "--token", "1", "--result", "ok", code=2)["code"] == "stale_fence"
    assert cli(root, "claim").stdout.split()[3] == str(abandons + 1)  # b: never claimed before, above the floor too

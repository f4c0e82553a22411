"""End to end (issue 2 item 9): ``examples/runner.sh`` runs lanes in exactly
the order ``list`` predicted, including a push made while a lane runs. Since
issue 6 the runner claims, renews and finishes leases; several runners at
once are in ``test_runner_claim.py``.

Each test that takes ``store`` runs the same body on a directory storm and
on a database storm (tests/stores.py): on a database the runner keeps the
lanes' work directories in ``$RUNNER_LANES`` and settles with
``storm-queue settle``; results are rows, not result.json files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.children import end, start
from tests.conftest import REPO, clean_env, run_cli
from tests.stores import DatabaseStorm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tests.stores import DirectoryStorm

RUNNER = REPO / "examples" / "runner.sh"
STORM_QUEUE = f"{sys.executable} -m storm_queue"
#: the holder a test's runner claims under, unless it says otherwise: each of its lines starts "runner r1: "
HOLDER = "r1"


def runner_env(log: Path, store: DirectoryStorm | DatabaseStorm | None = None, **extra: str) -> dict[str, str]:
    """The runner's environment, its holder ``HOLDER`` unless EXTRA names
    another; on a database STORE, RUNNER_LANES names
    where this host keeps the lanes' work (on a directory storm the runner's
    default, the storm's own lanes/, is what is tested)."""
    lanes = {"RUNNER_LANES": str(store.lanes_dir)} if isinstance(store, DatabaseStorm) else {}
    return clean_env(**{"STORM_QUEUE": STORM_QUEUE, "RUNNER_LOG": str(log), "RUNNER_POLL": "0.05",
                        "RUNNER_HOLDER": HOLDER, **lanes, **extra})


def start_runner(root: Path | str, env: dict[str, str], *flags: str) -> subprocess.Popen:
    """The runner on ROOT, in a session of its own with its signals at their
    defaults (tests/children.py: the test's end kills what is left of it,
    its lanes' process groups too)."""
    return start(["bash", str(RUNNER), *flags, str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True)


def run_sh(store, slug: str, body: str) -> Path:
    """An executable run.sh of BODY for SLUG, where STORE's runner looks for it."""
    path = store.lanes_dir / slug / "run.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


def root_word(root: str) -> str:
    """STORM_ROOT as the runner shows it in the commands it tells the
    operator: as it is when the shell takes it so, else in single quotes
    (a URL's hidden password reads ***), or ``printf %q``'s form when it
    holds what is not printable."""
    quoted = subprocess.run(["bash", "-c", 'printf %q "$1"', "_", str(root)], capture_output=True, text=True,
                            check=True, timeout=30).stdout
    if quoted == str(root) or not str(root).isprintable():
        return quoted
    return "'" + str(root).replace("'", "'\\''") + "'"


def said(proc: subprocess.Popen) -> tuple:
    """What an ended (or ending) runner printed, for a failing assertion: read within 10 s, its session killed past it."""
    return end(proc, 10)[:2]


def finish(proc: subprocess.Popen, timeout: float = 90) -> tuple[int, str, str]:
    """The runner's exit status and what it printed, once it ends; past
    ``timeout`` seconds its whole session (the lane's process group too)
    is killed and the test fails."""
    out, err, in_time = end(proc, timeout)
    if not in_time:
        pytest.fail(f"runner.sh did not finish in {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60, whole: bool = False) -> None:
    """Until PATH exists (``whole``: and holds a line ending in a newline,
    as ``echo $? > PATH`` leaves it once written, not only created)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and (not whole or path.read_text().endswith("\n"))):
        if proc.poll() is not None:
            out, err = said(proc)
            pytest.fail(f"runner.sh exited {proc.returncode} before {path} appeared\n{out}\n{err}")
        if time.monotonic() > deadline:
            out, err = said(proc)
            pytest.fail(f"{path} never appeared{' whole' if whole else ''}\n{out}\n{err}")
        time.sleep(0.02)


def listed(root: Path | str) -> dict:
    done = run_cli(root, "list", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_runner_script_is_executable_bash_with_strict_mode() -> None:
    """A real process: bash checks the script's syntax."""
    assert os.access(RUNNER, os.X_OK)
    text = RUNNER.read_text()
    assert text.startswith("#!/usr/bin/env bash") or text.startswith("#!/bin/bash")
    assert "set -euo pipefail" in text
    assert subprocess.run(["bash", "-n", str(RUNNER)], capture_output=True, timeout=30).returncode == 0


def test_runner_runs_lanes_in_the_order_list_predicted(store, tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    queue = "a 1\nb 2 a\nc 3\nd 4 b\ne 5\nf 6 c,e\ng 7\nh 8 lost\ni 9 done\n"
    store.make(queue, integrated=["done"], abandoned=["lost"])
    root = store.root
    for slug in ("f", "d"):
        assert run_cli(root, "bump", slug).returncode == 0
    predicted = listed(root)
    order = [r["slug"] for r in predicted["rows"]]
    assert order == ["c", "e", "f", "a", "b", "d", "g", "h", "i"]  # the bumps took effect
    blocked = [r["slug"] for r in predicted["rows"] if r["state"] == "blocked"]
    assert blocked == ["h"]
    expected = [s for s in order if s not in blocked]
    before = len(store.events())
    log = tmp_path / "ran.txt"
    code, out, err = finish(start_runner(root, runner_env(log, store, LANE_COMMAND='printf "%s\\n" "$STORM_QUEUE_LANE" > seen')))
    assert code == 0, err
    assert lines(log) == expected, err
    # every lane ran with STORM_QUEUE_LANE set to its slug, in its own directory
    for slug in expected:
        assert (store.lanes_dir / slug / "seen").read_text() == slug + "\n"
        # storm-queue's `finish --result ok` records the result now (issue 6;
        # result.json, or the result row), under the lane's one claim's token
        result = store.result(slug)
        assert (result["status"], result["token"]) == ("ok", 1)
        if store.kind == "directory":
            assert not (store.lanes_dir / slug / ".qwenstorm" / "running").exists()
    # one claim per lane, in the predicted order, each finished ok with its token
    events = store.events()[before:]
    assert [(e["slug"], e["token"]) for e in events if e["action"] == "claim"] == [(s, 1) for s in expected]
    assert [(e["slug"], e["result"]) for e in events if e["action"] == "finish"] == [(s, "ok") for s in expected]
    if store.kind == "database":  # settled by request, so on the record
        settles = [(e["slug"], e["ledger"]) for e in events if e["action"] == "settle"]
        assert sorted(settles) == sorted([(s, "integrated") for s in expected] + [("h", "abandoned")])
        assert [s for s, ledger in settles if ledger == "integrated"] == expected
    # the blocked lane never ran: next marked it, the runner reviewed it as abandoned
    assert store.result("h")["blocked_on"] == "lost"
    assert store.settled("integrated") == ["done", *expected]
    assert store.settled("abandoned") == ["lost", "h"]
    assert run_cli(root, "next").stdout == "empty\n"
    assert out == ""


def test_failed_lane_is_retried_then_quarantined_and_what_needs_it_never_runs(store, tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    # Changed by issue 6: the runner no longer abandons a failed lane. It
    # reports `finish --result failed`, `claim` hands the lane out again until
    # its `[runner] attempts` are spent, and then quarantines it: the lane
    # holds what depends on it (the storm is not empty, the runner waits)
    # until the operator unparks it or, as here, abandons it (storm-queue
    # settle). Since issue 13 a failed lane waits a growing delay before its
    # next attempt, and c runs meanwhile; since issue 33 that delay is the
    # storm's own backoff ([runner] retry_delay: the finish line's
    # not_before), never a runner's schedule (test_runner_waits.py has more).
    store.make("a 1\nb 2 a\nc 3\n", toml="[runner]\nattempts = 3\nretry_delay = 1\n")
    root = store.root
    run_sh(store, "a", "#!/usr/bin/env bash\nexit 7\n")
    log = tmp_path / "ran.txt"
    proc = start_runner(root, runner_env(log, store))
    try:
        deadline = time.monotonic() + 120
        # c runs while a waits out its delay; on a loaded machine a's delay may end first, so only the count is fixed
        while sorted(lines(log)) != ["a", "a", "a", "c"] or not any(e["action"] == "quarantine" for e in store.events()):
            assert proc.poll() is None, said(proc)
            assert time.monotonic() < deadline, lines(log)
            time.sleep(0.05)
        rows = {r["slug"]: r for r in listed(root)["rows"]}
        assert rows["a"]["state"] == "quarantined"
        assert rows["b"]["state"] == "waiting"
        assert listed(root)["decision"] == "wait"
        assert proc.poll() is None  # a quarantined lane keeps the storm from being empty
        events = store.events()
        assert [(e["slug"], e["token"], e["attempt"]) for e in events if e["action"] == "claim" and e["slug"] == "a"] == [
            ("a", 1, 1), ("a", 2, 2), ("a", 3, 3)]
        ran = lines(log)
        assert [(e["slug"], e["token"], e["result"]) for e in events if e["action"] == "finish"] == [
            (slug, ran[:n + 1].count(slug), "ok" if slug == "c" else "failed") for n, slug in enumerate(ran)]
        assert [e["slug"] for e in events if e["action"] == "finish" and "not_before" in e] == ["a", "a"]
        assert not [e for e in events if e["action"] == "schedule"]
        assert [(e["slug"], e["attempts"]) for e in events if e["action"] == "quarantine"] == [("a", 3)]
        assert store.result("a") is None
    finally:
        # the reviewer gives up on a: b is blocked, the runner settles it, the storm empties
        gave_up = run_cli(root, "settle", "a", "abandoned", "--reason", "gave up on it")
    assert gave_up.returncode == 0, gave_up.stderr
    code, _, err = finish(proc)
    assert code == 0, err
    assert sorted(lines(log)) == ["a", "a", "a", "c"]
    assert store.settled("abandoned") == ["a", "b"]
    assert store.settled("integrated") == ["c"]
    assert store.result("b")["blocked_on"] == "a"


def test_runner_stops_on_an_unknown_order(store, request, tmp_path: Path) -> None:
    """The log's last line damaged: on a directory in priority.log; on a
    database by a superuser who turned the event table's append-only
    trigger off (nothing less can change a line there).
    A real process: examples/runner.sh, a shell script calling the installed command."""
    store.make("a 1\n")
    root = store.root
    assert run_cli(root, "bump", "a").returncode == 0
    if store.kind == "directory":
        (store.path / "priority.log").write_bytes(b"damaged\n")
    else:
        from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

        with request.getfixturevalue("pg_server").admin(conninfo_to_dict(root)["dbname"]) as conn:
            conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only")
            conn.execute("UPDATE storm_queue.event SET line = 'damaged\n'::bytea "
                         "WHERE seq = (SELECT max(seq) FROM storm_queue.event)")
    log = tmp_path / "ran.txt"
    code, _, err = finish(start_runner(root, runner_env(log, store)))
    assert code == 3
    if store.kind == "directory":
        assert "storm-queue reset" in err
    else:  # a database storm is never reset (issue 33 item 5): its backup restores it
        assert "storm-queue reset" not in err and "restores the database from its backup" in err, err
    assert lines(log) == []


def test_push_while_a_lane_runs_runs_right_after_it(store, tmp_path: Path) -> None:
    """A real process: examples/runner.sh, a shell script calling the installed command."""
    queue = "a 1\nb 2\nc 3\nd 4 b\n"
    store.make(queue, integrated=["base"])
    root = store.root
    assert run_cli(root, "bump", "c").returncode == 0
    before = [r["slug"] for r in listed(root)["rows"]]
    assert before == ["c", "a", "b", "d"]
    flags = tmp_path / "flags"
    flags.mkdir()
    # Lane c, the first to run, tries to push from inside (refused: it carries
    # STORM_QUEUE_LANE), then waits for the test's go-ahead.
    run_sh(store, "c",
           "#!/usr/bin/env bash\n"
           "set -u\n"
           f'touch "{flags}/started"\n'
           f'$STORM_QUEUE push sneaky 99 --reason "from inside a lane" --root "{root}"; echo $? > "{flags}/push-exit"\n'
           f'while [ ! -e "{flags}/go" ]; do sleep 0.02; done\n')
    log = tmp_path / "ran.txt"
    proc = start_runner(root, runner_env(log, store))
    try:
        wait_for(flags / "started", proc)
        if store.kind == "directory":
            assert (store.lanes_dir / "c" / ".qwenstorm" / "running").exists()
        wait_for(flags / "push-exit", proc, whole=True)  # created by the shell before echo writes it
        # the lane's own push was refused and recorded, and appended nothing
        assert (flags / "push-exit").read_text().strip() == "1"
        refused = store.events()[-1]
        assert (refused["action"], refused["code"], refused["by"]) == ("refused", "lane_process", 'lane:"c"')
        assert "sneaky" not in store.lanes()
        # the operator pushes while c runs
        pushed = run_cli(root, "push", "z", "26", "--deps", "base", "--json")
        assert pushed.returncode == 0, pushed.stderr
        assert json.loads(pushed.stdout)["moved"] == ["z"]
        predicted = listed(root)
        rows = predicted["rows"]
        assert (rows[0]["slug"], rows[0]["state"]) == ("c", "running")
        assert rows[1]["slug"] == "z"
        assert predicted["decision"] == "run z 26"  # next after whatever is running
        expected = [r["slug"] for r in rows]
        assert expected == ["c", "z", "a", "b", "d"]
        assert lines(log) == ["c"]
    finally:
        (flags / "go").touch()
    code, _, err = finish(proc)
    assert code == 0, err
    assert lines(log) == expected, err
    assert lines(log)[1] == "z", "the pushed lane runs right after the running lane"
    assert store.lanes() == ["a", "b", "c", "d", "z"]  # appended, with its deps
    assert json.loads(run_cli(root, "why", "z", "--json").stdout)["deps"][0]["slug"] == "base"
    assert run_cli(root, "next").stdout == "empty\n"

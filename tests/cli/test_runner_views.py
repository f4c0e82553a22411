"""The operator's views of runner state (issue 6 items 4 and 5), through the
real command line: a live lease, an orphaned lease, a running marker with no
lease, a quarantined lane with its attempt history, and a scheduled lane, as
``list`` (plain, JSON and the terminal table), ``why`` (words and JSON) and
``doctor`` show them; and hostile runner text (a ``finish --note``, an
``unpark --reason``) shown escaped everywhere, never raw.

The tests that take ``store`` run the same body on a directory storm and on
a database storm (tests/stores.py). Those about running markers with no
lease, progress.log, the files a view must not touch, or a hand edit of
queue.txt are about a directory's files, and stay there (each says so)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from storm_queue.core.names import quote
from tests.cli.test_list_view import SGR, run_in_pty
from tests.conftest import clean_env, log_events, make_storm, run_cli, tree

QUEUE = "a 1\nb 2\nc 3\nd 4\ne 5\n"
TOML = '[priority]\nsources = ["bot"]\n\n[runner]\nslots = 4\nattempts = 2\nttl = 600\nttl_min = 1\n'
RUNNER_CODES = {"orphaned_lease", "marker_without_lease", "quarantined"}
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"
#: the fields why --json carried before issue 6: they must stay as they were
WHY_FIELDS = {"slug", "known", "state", "status", "issue", "position", "of", "next", "ahead", "running", "deps",
              "waits_on", "prioritised", "named", "mark", "needed_by", "in_queue", "skipped", "decision", "stale"}
HOSTILE_NOTE = "disk full\nFORGED note [red]x[/red] \x1b[31mred\x1b[0m\u2028tail"
HOSTILE_REASON = "replaced the disk\rFORGED reason [bold]y[/bold] \x1b[2K\u2028end"
BAD = ("\x1b", "\r", "\u2028")


def storm_at(tmp_path: Path, **kwargs) -> Path:
    """A directory storm of QUEUE and TOML (with running markers, say)."""
    root = make_storm(tmp_path / "storm", QUEUE, toml=TOML, **kwargs)
    for name in ("integrated.txt", "abandoned.txt"):
        (root / name).touch()
    return root


def made(store) -> str:
    """STORE made of QUEUE and TOML (on a directory, its ledgers too); its root."""
    store.make(QUEUE, toml=TOML)
    if store.kind == "directory":
        for name in ("integrated.txt", "abandoned.txt"):
            (store.path / name).touch()
    return store.root


def ok(root: Path | str, *args: str) -> str:
    ran = run_cli(root, *args)
    assert ran.returncode == 0, (args, ran.stdout, ran.stderr)
    return ran.stdout


def plain(root: Path | str) -> dict[str, str]:
    """The plain list's lane lines by slug."""
    out = ok(root, "list", "--plain")
    return {line.split()[2]: line for line in out.splitlines() if re.match(r"\s*[0-9]+ ", line)}


def rows(root: Path | str) -> dict[str, dict]:
    return {r["slug"]: r for r in json.loads(ok(root, "list", "--json"))["rows"]}


def why_lines(root: Path | str, slug: str) -> list[str]:
    return ok(root, "why", slug).splitlines()


def why_doc(root: Path | str, slug: str) -> dict:
    doc = json.loads(ok(root, "why", slug, "--json"))
    assert WHY_FIELDS <= set(doc)
    return doc


def doctor(root: Path | str) -> tuple[list[dict], str]:
    """The runner findings of doctor --json, and doctor's text."""
    ran = run_cli(root, "doctor", "--json")
    assert ran.returncode in (0, 1), ran.stderr
    doc = json.loads(ran.stdout)
    text = run_cli(root, "doctor")
    assert text.returncode == ran.returncode
    return [f for f in doc["findings"] if f["code"] in RUNNER_CODES], text.stdout


def line_with(lines: list[str], start: str) -> str:
    found = [line for line in lines if line.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


def wait_until_orphaned(root: Path | str, slug: str, clock=None, timeout: float = 60) -> dict:
    """``why --json`` once the lease on ``slug`` (of 1 s) is past its
    expiry: at once with the injected ``clock`` moved on two seconds, else
    (for a real process that reads the storm next) polled on the real
    clock; asserts nothing about how long it took."""
    if clock is not None:
        clock.advance(2.0)
        doc = why_doc(root, slug)
        assert doc["running_kind"] == "orphan", doc
        return doc
    deadline = time.monotonic() + timeout
    while True:
        doc = why_doc(root, slug)
        if doc["running_kind"] == "orphan":
            return doc
        assert doc["running_kind"] == "lease", doc
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.5)


def quarantine_a(root: Path | str, note: str = "first try") -> None:
    """Spend both of a's attempts (the budget is 2): it is quarantined."""
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    ok(root, "finish", "a", "--token", "1", "--result", "failed", "--note", note)
    assert ok(root, "claim", "--holder", "r2") == "run a 1 2\n"
    ok(root, "finish", "a", "--token", "2", "--result", "failed")


# -- a live lease ----------------------------------------------------------------------


def test_a_live_lease_is_shown_with_its_holder_token_and_expiry(store) -> None:
    root = made(store)
    assert ok(root, "claim", "--holder", "runner-1", "--ttl", "600") == "run a 1 1\n"
    claim = store.events()[-1]
    line = plain(root)["a"]
    assert line.split()[4] == "running"
    assert f"running now: held by runner-1, token 1, lease until {claim['expires']}" in line
    lines = why_lines(root, "a")
    assert lines[0] == f"a: running: running now: held by runner-1, token 1, lease until {claim['expires']}"
    lease = line_with(lines, "lease: ")
    assert lease == (f"lease: held by runner-1 under token 1, claimed at {claim['at']} by {claim['by']}, "
                     f"until {claim['expires']}; only that token may renew or finish it")
    assert "attempts: 1 of 2 spent" in lines
    assert line_with(lines, "attempt 1: ") == f"attempt 1: token 1, runner-1, claimed at {claim['at']}: held now"
    doc = why_doc(root, "a")
    assert (doc["state"], doc["running_kind"], doc["marker_token"], doc["last_token"]) == ("running", "lease", None, 1)
    assert doc["lease"] == {"holder": "runner-1", "token": 1, "by": claim["by"], "claimed": claim["at"],
                            "expires": claim["expires"], "ttl": claim["ttl"]}
    assert (doc["attempts"], doc["budget"], doc["quarantined"], doc["not_before"]) == (1, 2, None, None)
    assert doc["history"] == [{"token": 1, "holder": "runner-1", "at": claim["at"], "end": None, "ended": None, "note": None}]
    assert rows(root)["a"]["running"] == "lease"
    findings, _ = doctor(root)
    assert findings == [], "a live lease is no finding"
    # a lane never claimed says nothing about runners
    assert not any(line.startswith(("lease:", "attempts:", "attempt ", "marker:", "quarantined:", "scheduled:"))
                   for line in why_lines(root, "b"))
    assert why_doc(root, "b")["history"] == [] and why_doc(root, "b")["running_kind"] is None


# -- an orphaned lease -----------------------------------------------------------------


def test_an_orphaned_lease_is_reported_until_recover_takes_it_back(store, clock) -> None:
    root = made(store)
    assert ok(root, "claim", "--holder", "gone-runner", "--ttl", "1") == "run a 1 1\n"
    claim = store.events()[-1]
    doc = wait_until_orphaned(root, "a", clock)
    assert doc["state"] == "running" and doc["lease"]["expires"] == claim["expires"]
    line = plain(root)["a"]
    assert line.split()[4] == "running"
    assert (f"orphaned: the lease of gone-runner (token 1) expired at {claim['expires']}; the next claim or "
            "recover takes it back") in line
    assert rows(root)["a"]["running"] == "orphan"
    lines = why_lines(root, "a")
    assert line_with(lines, "lease: ") == (
        f"lease: orphaned: the lease of gone-runner under token 1 (claimed at {claim['at']}) expired at "
        f"{claim['expires']}; the next claim or storm-queue recover takes it back")
    assert line_with(lines, "attempt 1: ").endswith(": its lease expired, not yet taken back")
    findings, text = doctor(root)
    assert [(f["severity"], f["code"], f["subject"]) for f in findings] == [("warning", "orphaned_lease", "a")]
    assert claim["expires"] in findings[0]["message"] and "gone-runner" in findings[0]["message"]
    assert findings[0]["fix"].startswith("storm-queue recover")
    assert any(line.startswith("warning orphaned_lease a: ") for line in text.splitlines())
    # recover (any principal that may write: here the operator) takes it back
    assert "took back a" in ok(root, "recover")
    expire = store.events()[-1]
    assert (expire["action"], expire["slug"], expire["token"]) == ("expire", "a", 1)
    assert plain(root)["a"].split()[4] == "ready"
    lines = why_lines(root, "a")
    assert lines[0] == "a: ready"
    assert line_with(lines, "attempt 1: ") == (f"attempt 1: token 1, gone-runner, claimed at {claim['at']}: its lease "
                                               f"expired and was taken back at {expire['at']}")
    doc = why_doc(root, "a")
    assert doc["running_kind"] is None and doc["lease"] is None and doc["history"][0]["end"] == "expired"
    assert doctor(root)[0] == []


# -- a running marker with no lease ----------------------------------------------------


def test_a_marker_with_no_lease_is_reported_and_only_the_operators_recover_slug_force_ends_it(tmp_path: Path) -> None:
    """A runner that takes no leases (the storm's own, which runs what
    next decides) marks every lane it runs so: list and why say so without
    inviting recover as a routine step, and recover SLUG needs --force
    (issue 33, item 10). Directory only: a running marker with no lease is
    a file a database storm cannot hold (its leases live in the log and
    the state row alone)."""
    root = storm_at(tmp_path, running=["c"])  # an empty marker, as an older runner leaves it
    (root / "lanes" / "d" / ".qwenstorm").mkdir(parents=True)
    (root / "lanes" / "d" / ".qwenstorm" / "running").write_text('{"holder": "old-runner", "token": 5}\n')
    lines = plain(root)
    for slug in ("c", "d"):
        assert lines[slug].split()[4] == "running"
        assert "running by a marker with no lease (a runner that takes no leases runs it)" in lines[slug]
        assert "recover" not in lines[slug]
        assert rows(root)[slug]["running"] == "marker"
    assert line_with(why_lines(root, "c"), "marker: ") == (
        "marker: a running marker with no lease behind it (carrying no token): a runner that takes no leases (one that "
        "runs what storm-queue next decides) marks every lane it runs so; claim and next leave it alone, and it runs "
        "until that runner finishes it (should that runner be gone, the operator's storm-queue recover c --force "
        "--reason TEXT takes it back)")
    assert "(carrying token 5)" in line_with(why_lines(root, "d"), "marker: ")
    doc = why_doc(root, "d")
    assert (doc["state"], doc["running_kind"], doc["marker_token"], doc["lease"]) == ("running", "marker", 5, None)
    assert why_doc(root, "c")["marker_token"] is None
    findings, text = doctor(root)
    assert [(f["severity"], f["code"], f["subject"]) for f in findings] == [
        ("warning", "marker_without_lease", "c"), ("warning", "marker_without_lease", "d")]
    assert findings[0]["fix"].endswith("as the operator: storm-queue recover c --force --reason TEXT")
    assert "carrying token 5" in findings[1]["message"]
    assert any(line.startswith("warning marker_without_lease d: ") for line in text.splitlines())
    # neither a claim nor recover without a slug takes it back; a source may not name it
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    assert ok(root, "recover").startswith("no orphaned lease")
    assert plain(root)["c"].split()[4] == "running"
    refused = run_cli(root, "recover", "c", "--source", "bot")
    assert refused.returncode == 1 and "operator_only" in refused.stderr
    assert why_doc(root, "c")["running_kind"] == "marker"
    # the operator's recover c ends it, with --force only
    refused = run_cli(root, "recover", "c", "--reason", "that runner is gone")
    assert refused.returncode == 2 and "refused (marker_running)" in refused.stderr and "--force" in refused.stderr
    assert plain(root)["c"].split()[4] == "running"
    assert "took back c" in ok(root, "recover", "c", "--force", "--reason", "that runner is gone")
    assert log_events(root)[-1]["action"] == "recover"
    assert plain(root)["c"].split()[4] == "ready"
    assert why_doc(root, "c")["running_kind"] is None
    assert [f["subject"] for f in doctor(root)[0]] == ["d"]


# -- quarantine and its attempt history ------------------------------------------------


def test_a_quarantined_lane_is_shown_with_its_attempt_history_until_unparked(store) -> None:
    root = made(store)
    quarantine_a(root)
    events = store.events()
    claims = [e for e in events if e["action"] == "claim"]
    fails = [e for e in events if e["action"] == "finish"]
    parked = [e for e in events if e["action"] == "quarantine"]
    assert len(claims) == 2 and len(fails) == 2 and len(parked) == 1
    line = plain(root)["a"]
    assert line.split()[4] == "quarantined"
    assert "quarantined after 2 attempts (the operator's unpark a --reason TEXT returns it)" in line
    row = rows(root)["a"]
    assert (row["state"], row["attempts"], row["quarantined"]) == ("quarantined", 2, parked[0]["at"])
    lines = why_lines(root, "a")
    assert lines[0] == "a: quarantined: quarantined after 2 attempts (the operator's unpark a --reason TEXT returns it)"
    assert "attempts: 2 of 2 spent" in lines
    assert line_with(lines, "attempt 1: ") == (f"attempt 1: token 1, r1, claimed at {claims[0]['at']}: failed at "
                                               f"{fails[0]['at']}; note \"first try\"")
    assert line_with(lines, "attempt 2: ") == (f"attempt 2: token 2, r2, claimed at {claims[1]['at']}: failed at "
                                               f"{fails[1]['at']}")
    assert line_with(lines, "quarantined: ") == (
        f"quarantined: since {parked[0]['at']}, after 2 attempts; it is never claimed until the operator, having "
        "looked at its attempts, runs: storm-queue unpark a --reason TEXT")
    doc = why_doc(root, "a")
    assert (doc["state"], doc["attempts"], doc["budget"], doc["quarantined"], doc["last_token"]) == (
        "quarantined", 2, 2, parked[0]["at"], 2)
    assert [(h["token"], h["holder"], h["end"], h["note"]) for h in doc["history"]] == [
        (1, "r1", "failed", "first try"), (2, "r2", "failed", None)]
    findings, text = doctor(root)
    assert [(f["severity"], f["code"], f["subject"]) for f in findings] == [("warning", "quarantined", "a")]
    assert f"since {parked[0]['at']} after 2 attempts (budget 2)" in findings[0]["message"]
    assert findings[0]["fix"] == "look at its history (storm-queue why a), then: storm-queue unpark a --reason TEXT"
    assert any(line.startswith("warning quarantined a: ") for line in text.splitlines())
    # a quarantined lane is not among those that start before the others
    assert why_doc(root, "c")["ahead"] == ["b"]
    # never claimed while quarantined: the next lane is
    assert ok(root, "claim", "--holder", "r3") == "run b 2 1\n"
    # unpark (operator only) returns it with a fresh budget; its history stays
    refused = run_cli(root, "unpark", "a", "--reason", "try again", "--source", "bot")
    assert refused.returncode == 1 and "operator_only" in refused.stderr
    ok(root, "unpark", "a", "--reason", "flaky disk replaced")
    assert plain(root)["a"].split()[4] == "ready"
    lines = why_lines(root, "a")
    assert lines[0] == "a: ready"
    assert "attempts: 0 of 2 spent since it was last unparked (2 before that)" in lines
    assert line_with(lines, "attempt 2: ").startswith("attempt 2: token 2, r2,")
    assert not any(line.startswith("quarantined:") for line in lines)
    doc = why_doc(root, "a")
    assert (doc["attempts"], doc["quarantined"], len(doc["history"])) == (0, None, 2)
    assert doctor(root)[0] == []
    # the next claim of it carries the next token
    assert ok(root, "claim", "--holder", "r4") == "run a 1 3\n"
    assert "attempts: 1 of 2 spent since it was last unparked (2 before that)" in why_lines(root, "a")


def test_the_quarantine_line_shows_the_failures_note_not_the_bumps_reason(store) -> None:
    """Issue 20 item 11: the plain line of a quarantined lane said the bump's
    reason where the failure's note belonged; now it says how the last
    attempt ended, with its note, and the reason as the prioritising one."""
    root = made(store)
    ok(root, "bump", "a", "--reason", "customer outage")
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    ok(root, "finish", "a", "--token", "1", "--result", "failed", "--note", "flaky test")
    assert ok(root, "claim", "--holder", "r2") == "run a 1 2\n"
    ok(root, "finish", "a", "--token", "2", "--result", "failed", "--note", "disk full")
    line = plain(root)["a"]
    assert line.split()[4] == "quarantined"
    detail = line.split("quarantined after 2 attempts", 1)[1]
    assert detail == (" (the operator's unpark a --reason TEXT returns it); last attempt: token 2 failed, "
                      'note "disk full"; prioritised with reason "customer outage"'), line
    assert "flaky test" not in line  # the last attempt's note, not an earlier one's
    ok(root, "unpark", "a", "--reason", "disk replaced")  # no longer quarantined: the line is as before
    assert plain(root)["a"].endswith('ready; reason "customer outage"')


# -- a schedule ------------------------------------------------------------------------


def test_a_scheduled_lane_keeps_its_place_and_says_when_it_may_start(store) -> None:
    root = made(store)
    ok(root, "schedule", "a", "--not-before", "+2h")
    when = store.events()[-1]["not_before"]
    assert re.fullmatch(STAMP, when)
    lines = plain(root)
    assert lines["a"].split()[:5] == ["1", "-", "a", "1", "scheduled"]
    assert f"scheduled: not before {when}" in lines["a"]
    assert rows(root)["a"]["not_before"] == when
    why = why_lines(root, "a")
    assert why[0] == f"a: scheduled: scheduled: not before {when}"
    assert "position 1 of 5 in run order" in why
    assert line_with(why, "scheduled: ") == f"scheduled: not before {when}; until then it keeps its place and is passed over"
    doc = why_doc(root, "a")
    assert (doc["state"], doc["not_before"], doc["position"]) == ("scheduled", when, 1)
    assert ok(root, "claim", "--holder", "r1") == "run b 2 1\n"  # passed over
    assert doctor(root)[0] == [], "a schedule is no finding"
    ok(root, "schedule", "a", "--not-before", "now")
    now = store.events()[-1]["not_before"]
    assert line_with(why_lines(root, "a"), "scheduled: ") == f"scheduled: not before {now}; that time has come"
    assert why_doc(root, "a")["state"] == "ready"


# -- the terminal table ----------------------------------------------------------------


def test_the_terminal_table_colours_quarantined_scheduled_orphan_and_marker(store) -> None:
    """The running marker with no lease (c) is a directory's file: on a
    database storm c is ready, so the short lease that becomes an orphan
    is c's there (d's on a directory); the rest is the same.
    A real process: its stdout is a pseudo-terminal (list's table)."""
    root = made(store)
    if store.kind == "directory":
        (store.lanes_dir / "c" / ".qwenstorm").mkdir(parents=True)
        (store.lanes_dir / "c" / ".qwenstorm" / "running").write_text("")
    quarantine_a(root, note=HOSTILE_NOTE)  # a: quarantined
    assert ok(root, "claim", "--holder", "live", "--ttl", "600") == "run b 2 1\n"  # b: a live lease
    orphan, issue = ("d", "4") if store.kind == "directory" else ("c", "3")
    assert ok(root, "claim", "--holder", "gone", "--ttl", "1") == f"run {orphan} {issue} 1\n"  # soon an orphan
    ok(root, "schedule", "e", "--not-before", "+2h")  # e: scheduled
    wait_until_orphaned(root, orphan)
    code, out = run_in_pty(root, "list")
    assert code == 0
    text = SGR.sub("", out)
    table = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    lanes = [cells for cells in table if len(cells) == 7]
    assert all(cells[2] for cells in lanes), text  # one line a lane (issue 20 item 10)
    state = {cells[2]: cells[4] for cells in lanes}  # each lane's state cell, one line
    c_d = {"directory": ("running no lease", "running orphan"), "database": ("running orphan", "ready")}[store.kind]
    assert state == {"a": "quarantined", "b": "running", "c": c_d[0], "d": c_d[1], "e": "scheduled"}
    assert re.search(r"\x1b\[[0-9;]*41m ?quarantined", out), out
    assert re.search(r"\x1b\[[0-9;]*34m ?scheduled", out), out
    assert re.search(r"\x1b\[[0-9;]*33m ?orphan", out), out
    if store.kind == "directory":
        assert re.search(r"\x1b\[[0-9;]*31m ?no lease", out), out
    # the hostile note of a's first attempt is not the last attempt's: the table shows the last one
    assert "last attempt: token 2 failed" in text
    assert "FORGED" not in text
    for ch in ("\r", "\u2028"):
        assert ch not in out


# -- hostile runner text ---------------------------------------------------------------


def _clean(where: str, text: str) -> None:
    for ch in BAD:
        assert ch not in text, (where, ch, text)
    assert not any(line.startswith("FORGED") for line in text.split("\n")), (where, text)
    assert HOSTILE_NOTE not in text and HOSTILE_REASON not in text, where


def test_a_hostile_note_and_reason_are_shown_escaped_never_raw(store) -> None:
    """(progress.log is a directory's file: a database storm has none, its log is the record.)
    A real process: its stdout is a pseudo-terminal (list's table)."""
    root = made(store)
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    ok(root, "finish", "a", "--token", "1", "--result", "failed", "--note", "fine")
    assert ok(root, "claim", "--holder", "r2") == "run a 1 2\n"
    ok(root, "finish", "a", "--token", "2", "--result", "failed", "--note", HOSTILE_NOTE)  # quarantined
    note, reason = quote(HOSTILE_NOTE), quote(HOSTILE_REASON)
    assert "\\x1b[31m" in note and "\\u2028" in note and "[red]x[/red]" in note
    # the quarantined lane, at the terminal: its last attempt's note, escaped, markup shown as text
    code, out = run_in_pty(root, "list", columns=400)
    assert code == 0
    table = SGR.sub("", out)
    assert note in table
    assert "[red]x[/red]" in table and "\x1b[31mred" not in out and "\u2028" not in out
    # why: the note in the history, escaped
    lines = why_lines(root, "a")
    assert line_with(lines, "attempt 2: ").endswith(f"; note {note}")
    ok(root, "unpark", "a", "--reason", HOSTILE_REASON)
    unpark = store.events()[-1]
    assert (unpark["action"], unpark["reason"]) == ("unpark", HOSTILE_REASON)
    assert [e["note"] for e in store.events() if e["action"] == "finish"] == ["fine", HOSTILE_NOTE]
    # log: both escaped, on one line each
    log = ok(root, "log")
    finish_line = next(line for line in log.splitlines() if " finish a: token 2 failed" in line)
    assert finish_line.endswith(f"; note {note}")
    unpark_line = next(line for line in log.splitlines() if " unpark a" in line)
    assert unpark_line.endswith(f"; reason {reason}")
    # every view, in words: never a raw byte of either
    views = {"log": log, "why": "\n".join(why_lines(root, "a")), "list": ok(root, "list", "--plain"),
             "doctor": doctor(root)[1]}
    if store.kind == "directory":
        # progress.log: the reason escaped on the unpark's line; every line stamped
        progress = (store.path / "progress.log").read_text()
        assert progress.endswith("\n")
        for line in progress.splitlines():
            assert re.match(STAMP + " storm-queue: ", line), line
        assert any(line.endswith(f"; reason {reason}") and "unpark" in line for line in progress.splitlines())
        views["progress.log"] = progress
    for where, text in views.items():
        _clean(where, text)
    assert note in views["why"]
    # the JSON views keep the text as data, exactly
    assert [h["note"] for h in why_doc(root, "a")["history"]] == ["fine", HOSTILE_NOTE]
    assert rows(root)["a"]["history"][1]["note"] == HOSTILE_NOTE


@pytest.mark.parametrize("view", [("list", "--plain"), ("why", "a"), ("log",), ("doctor",)])
def test_views_write_nothing(tmp_path: Path, view: tuple[str, ...]) -> None:
    """The views only read, whatever runner state they show. Directory:
    every file, its bytes, mode and mtime (the database's rows are the
    test below)."""
    root = storm_at(tmp_path, running=["c"])
    quarantine_a(root)
    ok(root, "schedule", "e", "--not-before", "+1d")
    before = tree(root, times=True)
    ran = run_cli(root, *view, env=clean_env())
    assert ran.returncode in (0, 1), ran.stderr
    assert ran.stdout
    assert tree(root, times=True) == before


@pytest.mark.postgresql
@pytest.mark.parametrize("view", [("list", "--plain"), ("why", "a"), ("log",), ("doctor",), ("verify",)])
def test_views_write_nothing_on_a_database_storm(pg_url: str, tmp_path: Path, view: tuple[str, ...], clock) -> None:
    """A database storm's views only read: every row of every table of its
    schema is as it was, the log not one line longer."""
    from storm_queue.store.postgres import driver
    from tests.stores import DatabaseStorm

    store = DatabaseStorm(pg_url, tmp_path / "lanes")
    root = made(store)
    quarantine_a(root)
    ok(root, "claim", "--holder", "gone", "--ttl", "1")
    ok(root, "schedule", "e", "--not-before", "+1d")

    def rows_now() -> dict[str, list]:
        with driver.connect(pg_url) as conn:
            tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'storm_queue' "
                                                 "AND tablename <> 'clock' ORDER BY tablename")]  # (the test's to move)
            return {t: conn.execute(f"SELECT * FROM storm_queue.{t} ORDER BY 1").fetchall() for t in tables}

    before = rows_now()
    assert {"event", "lane", "state", "storm"} <= set(before)
    wait_until_orphaned(root, "b", clock)  # past the lease's expiry: a view must not take it back
    ran = run_cli(root, *view, env=clean_env())
    assert ran.returncode in (0, 1), ran.stderr
    assert ran.stdout
    assert rows_now() == before


# -- more of doctor and why ------------------------------------------------------------


def test_an_old_marker_with_no_lease_is_both_long_running_and_without_a_lease(tmp_path: Path) -> None:
    """Directory only: a running marker's age is its file's mtime."""
    import os

    root = storm_at(tmp_path, running=["c"])
    then = time.time() - 30 * 3600
    os.utime(root / "lanes" / "c" / ".qwenstorm" / "running", (then, then))
    ran = run_cli(root, "doctor", "--json")
    assert ran.returncode == 1
    found = [(f["code"], f["subject"]) for f in json.loads(ran.stdout)["findings"]]
    assert found == [("long_running", "c"), ("marker_without_lease", "c")]
    ran = run_cli(root, "doctor", "--json", "--running-hours", "48")
    assert [(f["code"], f["subject"]) for f in json.loads(ran.stdout)["findings"]] == [("marker_without_lease", "c")]


def test_diagnose_of_runner_state_is_pure() -> None:
    """doctor.diagnose finds orphans, markers and quarantine in the facts it is
    given (a snapshot at a stamped time), reading nothing."""
    from storm_queue.core import config
    from storm_queue.store.directory.accounts import Owner
    from storm_queue.store.directory.checkup import Facts, diagnose
    from storm_queue.core.fold import replay
    from storm_queue.core.lane import Snapshot
    from storm_queue.core.ledgers import Ledgers
    from storm_queue.core.queuetext import QueueFile, parse

    queue = parse("a 1\nb 2\nc 3\nd 4\n")
    t = "2026-01-01T00:00:00.000000Z"
    events = [
        {"action": "claim", "slug": "a", "issue": "1", "holder": "h", "token": 1, "ttl": 1, "expires": t, "attempt": 1},
        {"action": "claim", "slug": "b", "issue": "2", "holder": "h", "token": 1, "ttl": 1, "expires": "9999", "attempt": 1},
        {"action": "claim", "slug": "d", "issue": "4", "holder": "h", "token": 1, "ttl": 1, "expires": t, "attempt": 1},
        {"action": "expire", "slug": "d", "token": 1, "expired": t},
        {"action": "quarantine", "slug": "d", "attempts": 1, "budget": 1},
    ]
    state = replay([{"at": t, "by": "operator:o", **e} for e in events])
    led = Ledgers(frozenset(), frozenset(), frozenset(), {"c": None, "b": 1}, False)
    snap = Snapshot({lane.slug: lane for lane in queue.lanes}, led, state, "2026-06-01T00:00:00.000000Z")
    decl = config.Declaration(False)
    facts = Facts("/s", Owner(1, 1, "o", "/s/queue.txt"), (), decl, "priority.log", None, None, QueueFile(queue.lanes, ()),
                  (), (), (), 0.0, snap)
    found = [(f.severity, f.code, f.subject) for f in diagnose(facts, 24.0)]
    assert found == [("warning", "orphaned_lease", "a"), ("warning", "marker_without_lease", "c"),
                     ("warning", "quarantined", "d")]
    assert diagnose(facts, 24.0) == diagnose(facts, 24.0)
    settled = Ledgers(frozenset({"a", "c"}), frozenset({"d"}), frozenset(), {"c": None}, False)
    from dataclasses import replace as dc_replace

    assert diagnose(dc_replace(facts, snapshot=Snapshot(snap.lanes, settled, state, snap.now)), 24.0) == []


def test_why_a_leased_lane_queue_txt_no_longer_carries(store) -> None:
    """The lane taken out by hand while leased: a line of queue.txt on a
    directory, its row on a database (as its operator could in psql)."""
    root = made(store)
    assert ok(root, "claim", "--holder", "r1") == "run a 1 1\n"
    if store.kind == "directory":
        (store.path / "queue.txt").write_text(QUEUE.replace("a 1\n", ""))
    else:
        from storm_queue.store.postgres import driver

        with driver.connect(root) as conn:
            conn.execute("DELETE FROM storm_queue.lane WHERE slug = 'a'")
    assert "a" not in store.lanes()
    lines = why_lines(root, "a")
    assert lines[0].startswith("a: running: running now: held by r1, token 1, lease until ")
    assert lines[0].endswith("; queue.txt does not carry it")
    assert line_with(lines, "lease: ").startswith("lease: held by r1 under token 1")
    doc = why_doc(root, "a")
    assert (doc["state"], doc["in_queue"], doc["running_kind"], doc["attempts"]) == ("running", False, "lease", 1)

"""A moved storm says so everywhere (issue 33, item 6): on a directory that
``migrate`` carried away, every ``--json`` read document carries
``"moved": "<URL, password masked>"``, ``list --plain``'s first line is
``next: moved to URL`` (no ``run`` line, the lines after it unchanged),
``list`` at a terminal shows a banner, ``doctor`` reports a ``moved``
finding and exits 1, ``watch`` shows it; the password is never shown."""

from __future__ import annotations

import json

import pytest

from storm_queue.roots import shown
from tests.conftest import log_events, make_storm, run_cli, run_main

pytestmark = pytest.mark.postgresql

SECRET = "hunter2"


@pytest.fixture
def moved(pg_server, pg_database, tmp_path):
    """A directory storm (a prioritised lane, a finished one) and what
    ``list --plain`` said before ``migrate`` carried it to a database whose
    URL names a password (trust auth: never asked for, never shown)."""
    url = pg_database()
    secret = url + ("&" if "?" in url else "?") + f"password={SECRET}"
    root = make_storm(tmp_path / "storm", "schema 12\nui 14\napi 13 schema\n", finished=["schema"],
                      unattended=True)
    assert run_cli(root, "bump", "ui", "--reason", "demo day").returncode == 0
    before = run_cli(root, "list", "--plain").stdout.splitlines()
    assert before[1] == "next: run ui 14"
    done = run_cli(None, "migrate", str(root), secret)
    assert done.returncode == 0, done.stderr
    last = log_events(root)[-1]
    assert last["action"] == "migrate"
    where = shown(last["to"])  # as recorded (migrate keeps no password), masked were there one
    assert SECRET not in where and where.startswith(url.split("?")[0])
    return root, where, before


def never_the_password(done) -> None:
    assert SECRET not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("ask", [("list", "--json"), ("why", "ui", "--json"), ("next", "--json"),
                                 ("doctor", "--json"), ("verify", "--json"), ("list", "--json", "--state", "ready")])
def test_every_json_read_document_carries_moved(moved, ask) -> None:
    root, where, _ = moved
    done = run_cli(root, *ask)
    never_the_password(done)
    doc = json.loads(done.stdout)
    assert doc["moved"] == where, doc


def test_log_json_ends_with_where_it_moved(moved) -> None:
    root, where, _ = moved
    for ask in (("log", "--json"), ("log", "--json", "--slug", "ui"), ("log", "--json", "--last", "1")):
        done = run_cli(root, *ask)
        never_the_password(done)
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert lines[-1] == {"moved": where}, ask
        assert all("seq" in line for line in lines[:-1]) and len(lines) >= 2, ask


def test_list_plain_says_moved_first_and_no_run_line(moved) -> None:
    root, where, before = moved
    done = run_cli(root, "list", "--plain")
    never_the_password(done)
    lines = done.stdout.splitlines()
    assert lines[0] == f"next: moved to {where}"
    assert not any(line.startswith("next: run") for line in lines)
    assert lines[1:] == [line for line in before if not line.startswith("next:")]  # the rest as it was
    assert done.stderr.startswith(f"storm-queue: this storm moved to {where}")


def test_list_at_a_terminal_shows_a_banner(moved) -> None:
    from tests.cli.test_list_view import SGR, run_in_pty

    root, where, _ = moved
    code, text = run_in_pty(root, "list")
    plain = SGR.sub("", text)
    assert code == 0 and SECRET not in text
    assert plain.lstrip().startswith("moved: this storm moved to postgresql://"), plain
    assert f"next: moved to {where}" in plain and "next: run" not in plain


def test_doctor_reports_moved_and_exits_1(moved) -> None:
    root, where, _ = moved
    done = run_cli(root, "doctor")
    never_the_password(done)
    assert done.returncode == 1
    (line,) = [line for line in done.stdout.splitlines() if line.split()[:2] == ["error", "moved"]]
    assert f"this storm moved to {where}" in line and f"--root {where}" in line
    doc = json.loads(run_cli(root, "doctor", "--json").stdout)
    assert doc["clean"] is False and [f["code"] for f in doc["findings"]].count("moved") == 1


def test_why_and_watch_show_it(moved) -> None:
    root, where, _ = moved
    why = run_cli(root, "why", "ui")
    never_the_password(why)
    assert why.returncode == 0 and why.stdout.splitlines()[-1] == f"next: moved to {where}"
    watch = run_main(["watch", "--once", "--root", str(root)])
    never_the_password(watch)
    lines = watch.stdout.splitlines()
    assert lines[1] == f"next: moved to {where}"
    assert f"note: moved: this storm moved to {where}" in "\n".join(lines)
    assert not any(line.startswith("next: run") for line in lines)


def test_a_storm_that_did_not_move_says_moved_null(tmp_path) -> None:
    root = make_storm(tmp_path / "here", "a 1\n")
    for ask in (("list", "--json"), ("why", "a", "--json"), ("doctor", "--json"), ("verify", "--json")):
        assert json.loads(run_cli(root, *ask).stdout)["moved"] is None, ask
    assert all("moved" not in json.loads(line) for line in run_cli(root, "log", "--json").stdout.splitlines())

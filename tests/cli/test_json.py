"""``--json`` (issue 2 item 7), root discovery, and what ``next`` and
``list`` write (contract sections 1, 2 and 5), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import clean_env, log_events, make_storm, run_cli, tree

REQUEST_FIELDS = {"outcome", "code", "action", "slug", "by", "moved", "already", "removed", "recorded", "message"}
ROW_FIELDS = {"position", "slug", "issue", "deps", "prioritised", "state", "status"}


def one_document(stdout: str):
    """stdout is exactly one JSON document (json.loads refuses extra data)."""
    assert stdout.strip(), "stdout is empty"
    return json.loads(stdout)


def check_request_doc(doc: dict) -> None:
    assert REQUEST_FIELDS <= set(doc), REQUEST_FIELDS - set(doc)
    assert doc["outcome"] in ("done", "noop", "refused")
    assert (doc["code"] is None) == (doc["outcome"] != "refused")
    if doc["code"] is not None:
        assert isinstance(doc["code"], str) and doc["code"].replace("_", "").isalpha() and doc["code"].islower()
    for key in ("moved", "already", "removed"):
        assert isinstance(doc[key], list) and all(isinstance(s, str) for s in doc[key])
    assert isinstance(doc["recorded"], bool)
    assert isinstance(doc["message"], str) and doc["message"]
    assert isinstance(doc["by"], str) and doc["by"].split(":", 1)[0] in ("operator", "source", "account", "lane")


def check_listing_doc(doc: dict) -> None:
    assert {"decision", "rows", "stray", "skipped", "warnings"} <= set(doc)
    assert isinstance(doc["decision"], str)
    for i, row in enumerate(doc["rows"], start=1):
        assert ROW_FIELDS <= set(row)
        assert row["position"] == i
        assert isinstance(row["prioritised"], bool)
        assert isinstance(row["deps"], list)
        assert row["state"] in ("finished", "running", "blocked", "waiting", "ready")
        assert isinstance(row["status"], str) and row["status"]
    assert all(isinstance(s, str) for s in doc["stray"])
    for s in doc["skipped"]:
        assert set(s) >= {"line", "text", "why"}
        assert isinstance(s["line"], int) and isinstance(s["text"], str) and s["why"]
    assert all(isinstance(w, str) for w in doc["warnings"])


# -- one document, whatever the outcome -------------------------------

QUEUE = "a 1\nb 2 a\nc 3\nfin 4\n"


def _damage(root: Path) -> None:
    assert run_cli(root, "bump", "c").returncode == 0
    (root / "priority.log").write_bytes(b"{}\n")


def _prime(root: Path) -> None:
    assert run_cli(root, "bump", "b").returncode == 0


SCENARIOS = [
    # (name, setup, args, exit, outcome)
    ("bump done", None, ("bump", "b"), 0, "done"),
    ("bump noop", None, ("bump", "fin"), 0, "noop"),
    ("bump already", _prime, ("bump", "a"), 0, "done"),
    ("bump refused 2", None, ("bump", "zz"), 2, "refused"),
    ("bump refused shape", None, ("bump", "../x"), 2, "refused"),
    ("bump refused 1", None, ("bump", "a", "--source", "bot"), 1, "refused"),
    ("bump unknown order", _damage, ("bump", "a"), 3, "unknown"),
    ("push appended", None, ("push", "z", "9", "--deps", "c"), 0, "done"),
    ("push queued", None, ("push", "c", "3"), 0, "done"),
    ("push noop", None, ("push", "fin", "4"), 0, "noop"),
    ("push refused", None, ("push", "a", "7"), 2, "refused"),
    ("push unknown order", _damage, ("push", "z", "9"), 3, "unknown"),
    ("unbump done", _prime, ("unbump", "b"), 0, "done"),
    ("unbump refused", _prime, ("unbump", "a"), 2, "refused"),
    ("unbump unknown order", _damage, ("unbump", "b"), 3, "unknown"),
    ("reset refused readable", None, ("reset", "--reason", "r"), 2, "refused"),
    ("reset refused blank", None, ("reset", "--reason", ""), 2, "refused"),
    ("reset done", _damage, ("reset", "--reason", "disk move"), 0, "done"),
    ("list", None, ("list",), 0, None),
    ("list unknown order", _damage, ("list",), 3, "unknown"),
    ("next", None, ("next",), 0, None),
    ("next unknown order", _damage, ("next",), 3, "unknown"),
]


@pytest.mark.parametrize("name,setup,args,exit,outcome", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_json_is_one_document_whatever_the_outcome(tmp_path: Path, name, setup, args, exit, outcome) -> None:
    root = make_storm(tmp_path / "storm", QUEUE, finished=["fin"])
    (root / "lanes" / "fin" / ".qwenstorm" / "result.json").write_text('{"status": "ok"}\n')
    if setup is not None:
        setup(root)
    done = run_cli(root, *args, "--json")
    assert done.returncode == exit, (done.stdout, done.stderr)
    doc = one_document(done.stdout)
    assert isinstance(doc, dict)
    if outcome == "unknown":
        assert doc["outcome"] == "unknown"
        assert "unknown" in doc["message"] and "storm-queue reset" in doc["message"]
    elif args[0] == "list":
        check_listing_doc(doc)
    elif args[0] == "next":
        assert {"decision", "warnings"} <= set(doc)
        assert doc["decision"] == "review fin"
        assert doc["warnings"] == []
    else:
        check_request_doc(doc)
        assert doc["outcome"] == outcome
        assert doc["action"] == args[0]
        assert doc["recorded"] is True
        assert doc["by"] == ("source:bot" if "--source" in args else "operator:root")
        if args[0] != "reset":
            assert doc["slug"] == args[1]
        event = log_events(root)[-1]
        if outcome == "refused":
            assert event["action"] == "refused" and event["code"] == doc["code"]
        else:
            assert event["action"] == args[0]
            if args[0] != "reset":
                assert event["moved"] == doc["moved"] and event["removed"] == doc["removed"]


def test_request_json_fields_say_what_moved(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "x 1\nd 2\na 3 d\nb 4 d\n")
    bump_a = one_document(run_cli(root, "bump", "a", "--json", "--reason", "why").stdout)
    assert (bump_a["outcome"], bump_a["moved"], bump_a["already"], bump_a["removed"]) == ("done", ["d", "a"], [], [])
    bump_b = one_document(run_cli(root, "bump", "b", "--json").stdout)
    assert (bump_b["moved"], bump_b["already"]) == (["b"], ["d"])
    unbump_a = one_document(run_cli(root, "unbump", "a", "--json").stdout)
    assert (unbump_a["outcome"], unbump_a["removed"], unbump_a["moved"]) == ("done", ["a"], [])
    unbump_b = one_document(run_cli(root, "unbump", "b", "--json").stdout)
    assert sorted(unbump_b["removed"]) == ["b", "d"]  # d leaves with the last lane that needed it
    push = one_document(run_cli(root, "push", "z", "9", "--deps", "x", "--json").stdout)
    assert push["moved"] == ["x", "z"] and push.get("appended") is True
    listing = one_document(run_cli(root, "list", "--json").stdout)
    assert [r["slug"] for r in listing["rows"]] == ["x", "z", "d", "a", "b"]
    assert [r["prioritised"] for r in listing["rows"]] == [True, True, False, False, False]
    assert listing["rows"][1] == {**listing["rows"][1], "issue": "9", "deps": ["x"], "state": "waiting"}


def test_no_storm_with_json_is_still_one_document(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (("list",), ("next",), ("bump", "a"), ("push", "a", "1"), ("unbump", "a"), ("reset", "--reason", "r")):
        done = run_cli(None, *args, "--json", cwd=empty, env=clean_env())
        assert done.returncode == 2, (args, done.stderr)
        doc = one_document(done.stdout)
        assert "--root" in doc["message"]


# -- list --json: rows, stray, skipped, warnings ---------------------


def test_list_json_reports_rows_stray_skipped_and_warnings(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\ngone 3\nc 4 gone\nr 5\nold 6\n",
                      abandoned=["gone"], running=["r"])
    assert run_cli(root, "bump", "b").returncode == 0
    assert run_cli(root, "bump", "old").returncode == 0
    # hand edits: drop old (it becomes stray), give b a new dependency (the
    # replayed lane goes stale), add malformed lines and a duplicate
    (root / "queue.txt").write_text("a 1\nb 2 a,e\ngone 3\nc 4 gone\nr 5\ne 10\n# a comment\n\nbad! 7\nq x\na 8\nw 9 a,../up\n")
    with open(root / "priority.log", "ab") as f:
        f.write(b'{"v":1,"torn')
    doc = one_document(run_cli(root, "list", "--json").stdout)
    check_listing_doc(doc)
    assert doc["decision"] == "run a 1"
    rows = {r["slug"]: r for r in doc["rows"]}
    assert [r["slug"] for r in doc["rows"]] == ["a", "b", "c", "r", "e"]
    assert rows["a"]["prioritised"] and rows["b"]["prioritised"] and not rows["c"]["prioritised"]
    assert (rows["a"]["state"], rows["b"]["state"], rows["c"]["state"], rows["r"]["state"]) == ("ready", "waiting", "blocked", "running")
    assert rows["b"]["deps"] == ["a", "e"] and rows["b"]["issue"] == "2"
    assert not rows["e"]["prioritised"]
    assert "gone" in rows["c"]["status"]
    assert doc["stray"] == ["old"]
    assert [(s["line"], s["text"]) for s in doc["skipped"]] == [(9, "bad! 7"), (10, "q x"), (11, "a 8"), (12, "w 9 a,../up")]
    assert "duplicate" in doc["skipped"][2]["why"]
    assert any("torn" in w for w in doc["warnings"])
    assert any("stale" in w for w in doc["warnings"])
    nxt = one_document(run_cli(root, "next", "--json").stdout)
    assert set(nxt) >= {"decision", "warnings"}
    assert nxt["decision"] == "run a 1"
    assert any("torn" in w for w in nxt["warnings"])


# -- root discovery ---------------------------------------------------


def _two_storms(tmp_path: Path) -> tuple[Path, Path]:
    one = make_storm(tmp_path / "one", "first 1\n")
    two = make_storm(tmp_path / "two", "second 2\n")
    return one, two


def test_root_from_flag_then_env_then_cwd(tmp_path: Path) -> None:
    one, two = _two_storms(tmp_path)
    deep = one / "lanes" / "x" / "deeper"
    deep.mkdir(parents=True)
    # the nearest parent holding queue.txt
    assert run_cli(None, "next", cwd=deep).stdout == "run first 1\n"
    # $STORM_QUEUE_ROOT beats the working directory
    assert run_cli(None, "next", cwd=deep, env=clean_env(STORM_QUEUE_ROOT=str(two))).stdout == "run second 2\n"
    # --root beats both
    assert run_cli(one, "next", cwd=two, env=clean_env(STORM_QUEUE_ROOT=str(two))).stdout == "run first 1\n"
    # a request from a subdirectory lands in the storm found above it
    done = run_cli(None, "bump", "first", "--json", cwd=deep)
    assert done.returncode == 0, done.stderr
    assert log_events(one)[0]["slug"] == "first"
    assert not (deep / "priority.log").exists() and not (two / "priority.log").exists()


def test_root_found_by_storm_toml_alone(tmp_path: Path) -> None:
    root = tmp_path / "storm"
    (root / "sub").mkdir(parents=True)
    (root / "storm.toml").write_text("[priority]\nsources = []\n")
    done = run_cli(None, "list", "--json", cwd=root / "sub")  # found; with no queue.txt its lanes are unknown
    assert done.returncode == 3, done.stderr
    assert one_document(done.stdout)["message"].startswith(f"{root / 'queue.txt'} does not exist")
    (root / "queue.txt").write_text("")
    done = run_cli(None, "list", "--json", cwd=root / "sub")
    assert done.returncode == 0, done.stderr
    assert one_document(done.stdout)["root"] == str(root)
    nxt = run_cli(None, "next", cwd=root / "sub")
    assert (nxt.returncode, nxt.stdout) == (0, "empty\n")


def test_nearest_storm_wins(tmp_path: Path) -> None:
    outer = make_storm(tmp_path / "outer", "outer 1\n")
    inner = make_storm(outer / "nested", "inner 2\n")
    (inner / "sub").mkdir()
    assert run_cli(None, "next", cwd=inner / "sub").stdout == "run inner 2\n"


def test_no_storm_says_what_to_do(tmp_path: Path) -> None:
    empty = tmp_path / "nowhere"
    empty.mkdir()
    for parent in [empty, *empty.parents]:
        assert not (parent / "queue.txt").exists() and not (parent / "storm.toml").exists()
    done = run_cli(None, "list", cwd=empty)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "--root" in done.stderr and "STORM_QUEUE_ROOT" in done.stderr and "queue.txt" in done.stderr
    bad_env = run_cli(None, "list", cwd=empty, env=clean_env(STORM_QUEUE_ROOT=str(empty / "missing")))
    assert bad_env.returncode == 2 and "--root" in bad_env.stderr


# -- next's side effects, and list's lack of them --------------------


def _progress(root: Path) -> list[str]:
    path = root / "progress.log"
    return path.read_text().splitlines() if path.exists() else []


def test_next_says_skipped_lines_and_stray_slugs_once(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nold 2\n")
    assert run_cli(root, "bump", "old").returncode == 0
    (root / "queue.txt").write_text("a 1\nbad! 3\nb x\n")
    start = len(_progress(root))
    for _ in range(2):
        done = run_cli(root, "next")
        assert (done.returncode, done.stdout) == (0, "run a 1\n"), done.stderr
    said = _progress(root)[start:]
    assert len([l for l in said if "line 2" in l and "bad!" in l]) == 1, said
    assert len([l for l in said if "line 3" in l and "b x" in l]) == 1, said
    assert len([l for l in said if "old" in l and "stray" in l]) == 1, said
    assert len(said) == 3, said
    # a new malformed line is said once too, and the old ones are not said again
    with open(root / "queue.txt", "a") as f:
        f.write("c ٣\n")
    for _ in range(2):
        assert run_cli(root, "next").returncode == 0
    later = _progress(root)[start + 3:]
    assert len(later) == 1 and "line 4" in later[0], later


def test_next_marks_blocked_lanes_met_before_the_chosen_one(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "gone 0\nx 1 gone\ny 2\nz 3 gone\n", abandoned=["gone"])
    first = run_cli(root, "list", "--json")
    rows = {r["slug"]: r["state"] for r in one_document(first.stdout)["rows"]}
    assert rows == {"x": "blocked", "y": "ready", "z": "blocked"}
    done = run_cli(root, "next")
    assert (done.returncode, done.stdout) == (0, "run y 2\n"), done.stderr  # decides first
    result = json.loads((root / "lanes" / "x" / ".qwenstorm" / "result.json").read_text())
    assert (result["completed"], result["blocked_on"], result["blocked_on_all"]) == (False, "gone", ["gone"])
    assert not (root / "lanes" / "z").exists(), "a blocked lane after the chosen one is not marked"
    after = one_document(run_cli(root, "list", "--json").stdout)
    states = {r["slug"]: r["state"] for r in after["rows"]}
    assert states == {"x": "finished", "y": "ready", "z": "blocked"}
    assert any("x" in l and "blocked" in l for l in _progress(root))


def test_list_writes_nothing(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "gone 0\nx 1 gone\ny 2\nold 3\n", abandoned=["gone"])
    assert run_cli(root, "bump", "old").returncode == 0
    (root / "queue.txt").write_text("gone 0\nx 1 gone\ny 2\nbad! 4\n")  # old is stray now
    with open(root / "priority.log", "ab") as f:
        f.write(b'{"torn')  # a torn tail that only a writer repairs
    before = tree(root, times=True)
    for args in (("list",), ("list", "--json")):
        done = run_cli(root, *args)
        assert done.returncode == 0, done.stderr
    assert tree(root, times=True) == before
    # the same storm does give next something to write, so the check above means something
    assert run_cli(root, "next").returncode == 0
    assert tree(root, times=True) != before

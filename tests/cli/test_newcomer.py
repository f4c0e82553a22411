"""What a new operator tripped on (issue 13, items 5 to 9 and 13), each
through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storm_queue.core import config
from tests.conftest import clean_env, log_events, make_storm, run_cli

QUEUE = "setup 1\nschema 2 setup\nhotfix 3\ndocs 4\napi 5 schema\n"


# item 5: a sweep of settled lanes is said in its own sentence


def _bump_all(root: Path, *slugs: str) -> None:
    for slug in slugs:
        assert run_cli(root, "bump", slug).returncode == 0


def test_a_noop_bump_says_the_lanes_it_swept_in_their_own_sentence(tmp_path):
    root = make_storm(tmp_path / "s", QUEUE)
    _bump_all(root, "api", "hotfix", "docs")
    (root / "integrated.txt").write_text("setup\nschema\nhotfix\ndocs\napi\n")
    r = run_cli(root, "bump", "api")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first == "nothing to do: api is already integrated"
    assert second == "also took out of the lane, now settled: setup schema api hotfix docs"
    assert "removed" not in r.stdout
    assert log_events(root)[-1]["removed"] == ["setup", "schema", "api", "hotfix", "docs"]


def test_an_unbump_tells_its_own_removal_from_the_sweep_by_why_each_left(tmp_path):
    root = make_storm(tmp_path / "s", QUEUE + "x 6\n")
    _bump_all(root, "api", "hotfix", "docs", "x")
    make_storm(root, QUEUE + "x 6\n", integrated=("setup", "schema", "hotfix"), finished=("docs",))
    for args in (("--dry-run",), ()):
        r = run_cli(root, "unbump", "x", *args)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].startswith("x is no longer prioritised") and lines[0].endswith("; removed: x")
        assert lines[1] == "also took out of the lane, now settled: setup schema hotfix"
        assert lines[2] == "also took out of the lane, now finished, awaiting review: docs"
    assert log_events(root)[-1]["removed"] == ["setup", "schema", "hotfix", "docs", "x"]


def test_a_lane_gone_from_queue_txt_is_said_as_gone(tmp_path):
    root = make_storm(tmp_path / "s", "a 1\nb 2\nc 3\n")
    _bump_all(root, "a", "b")
    (root / "queue.txt").write_text("b 2\nc 3\n")
    r = run_cli(root, "bump", "c")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["c is prioritised; moved: c",
                                     "also took out of the lane, no longer in queue.txt: a"]


def test_a_dependency_no_longer_needed_is_said_as_unneeded(tmp_path):
    root = make_storm(tmp_path / "s", "a 1\nb 2 a\nc 3\n")
    _bump_all(root, "b")
    (root / "queue.txt").write_text("a 1\nb 2\nc 3\n")
    r = run_cli(root, "push", "c", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["c is prioritised; moved: c",
                                     "also took out of the lane, no longer needed by a prioritised lane: a"]


# item 6: `log` labels a refusal by what it is


def test_log_labels_a_shape_refusal_as_such_and_an_authority_refusal_as_not_authorised(tmp_path):
    root = make_storm(tmp_path / "s", QUEUE)
    assert run_cli(root, "schedule", "docs", "--not-before", "tomorrow").returncode == 2
    assert run_cli(root, "bump", "docs", env=clean_env(STORM_QUEUE_LANE="api")).returncode == 1
    assert run_cli(root, "bump", "nosuch").returncode == 2
    events = log_events(root)
    assert [(e["code"], e["authorised"]) for e in events] == [
        ("invalid_time", False), ("lane_process", False), ("unknown_slug", True)]
    r = run_cli(root, "log")
    assert r.returncode == 0, r.stderr
    shape, authority, lookup = r.stdout.splitlines()
    assert "schedule docs refused (invalid_time)" in shape.replace('"', "")
    assert shape.endswith("[cannot be done as asked]") and "not authorised" not in shape
    assert "refused (lane_process)" in authority and authority.endswith("[not authorised]")
    assert "refused (unknown_slug)" in lookup and lookup.endswith("[cannot be done as asked]")


def test_log_gives_a_shape_refusal_no_authority_label_whoever_asked(tmp_path):
    """Shape is judged before authority, so a lane process's malformed
    request is recorded unauthorised; it is still a shape refusal."""
    root = make_storm(tmp_path / "s", QUEUE)
    r = run_cli(root, "bump", "x;y", env=clean_env(STORM_QUEUE_LANE="api"))
    assert r.returncode == 2
    assert log_events(root)[0]["authorised"] is False
    line = run_cli(root, "log").stdout.strip()
    assert "refused (invalid_slug)" in line and line.endswith("[cannot be done as asked]")


# item 7: `list` warns when storm.toml's sources has the wrong type


@pytest.mark.parametrize("toml,words", [
    ('[priority]\nsources = "bot"\n', "storm.toml: [priority] sources must be a list of names"),
    ('[priority]\nsources = ["operator"]\n', "storm.toml: [priority] sources lists 'operator'"),
    ("[runner]\nslots = 0\n", "storm.toml: [runner] slots must be a whole number"),
])
def test_list_warns_when_the_declaration_refuses_every_request(tmp_path, toml, words):
    root = make_storm(tmp_path / "s", QUEUE, toml=toml)
    assert run_cli(root, "bump", "api").returncode == 1, "every request is refused"
    for args in (("--plain",), ()):
        r = run_cli(root, "list", *args)
        assert r.returncode == 0, r.stderr
        warning, = [line for line in r.stderr.splitlines() if "storm.toml" in line]
        assert warning.startswith(f"storm-queue: warning: {words}")
        assert warning.endswith("every request is refused until storm.toml is fixed (see storm.toml.example)")
    doc = json.loads(run_cli(root, "list", "--json").stdout)
    assert len(doc["warnings"]) == 1 and doc["warnings"][0].startswith(words)
    assert "every request is refused" in doc["warnings"][0]


def test_list_says_nothing_of_a_sound_declaration(tmp_path):
    root = make_storm(tmp_path / "s", QUEUE, toml='[priority]\nsources = ["bot"]\n')
    r = run_cli(root, "list", "--json")
    assert r.returncode == 0 and r.stderr == "" and json.loads(r.stdout)["warnings"] == []


# item 8: `-` is "no dependencies" as it is "no issue"


def test_a_queue_line_with_dash_for_its_dependencies_is_a_lane_without_any(tmp_path):
    root = make_storm(tmp_path / "s", "docs 107 -\nnotes - -\napi 1 docs\nodd 2 -,docs\n")
    doc = json.loads(run_cli(root, "list", "--json").stdout)
    assert [(r["slug"], r["issue"], r["deps"]) for r in doc["rows"]] == [
        ("docs", "107", []), ("notes", "-", []), ("api", "1", ["docs"])]
    assert doc["skipped"] == [{"line": 4, "text": "odd 2 -,docs",
                               "why": "'-' means no dependencies, so it cannot stand among them"}]
    assert run_cli(root, "next").stdout == "run docs 107\n"
    r = run_cli(root, "bump", "docs")
    assert r.returncode == 0 and r.stdout == "docs is prioritised; moved: docs\n"


def test_push_deps_dash_is_no_dependencies(tmp_path):
    root = make_storm(tmp_path / "s", "docs 107\n")
    r = run_cli(root, "push", "z", "3", "--deps", "-")
    assert r.returncode == 0, r.stderr
    assert (root / "queue.txt").read_text() == "docs 107\nz 3\n"
    assert log_events(root)[-1]["deps"] == []
    assert run_cli(root, "push", "docs", "107", "--deps", "-").returncode == 0, "the same (no) dependencies"
    r = run_cli(root, "push", "y", "4", "--deps", "-,docs")
    assert r.returncode == 2 and "refused (invalid_dependency)" in r.stderr


# item 9: a storm.toml syntax error is reported at the line the file has it

HEAD = "# the storm's declaration\n\n[priority]\n"  # lines 1 to 3


@pytest.mark.parametrize("name,body,words", [
    ("unterminated string", 'sources = ["bot]\nlog = "priority.log"\n',
     'line 4, column 17: Illegal character \'\\n\' (a string not closed on its line?): "sources = [\\"bot]"'),
    ("bad key", 'sour ces = ["bot"]\n',
     'line 4, column 6: Expected \'=\' after a key in a key/value pair: "sour ces = [\\"bot\\"]"'),
    ("duplicate key", 'sources = ["bot"]\nlog = "priority.log"\n\nsources = ["cron"]\n',
     'line 7, column 19: Cannot overwrite a value (a key given twice?): "sources = [\\"cron\\"]"'),
    ("duplicate table", 'sources = ["bot"]\n\n[priority]\n',
     "line 6, column 10: Cannot declare ('priority',) twice: \"[priority]\""),
    ("missing =", 'sources ["bot"]\n',
     'line 4, column 9: Expected \'=\' after a key in a key/value pair: "sources [\\"bot\\"]"'),
    ("crlf line ends", 'sources = ["bot]\r\n',
     'line 4, column 17: Illegal character \'\\n\' (a string not closed on its line?): "sources = [\\"bot]"'),
])
def test_a_syntax_error_on_one_line_is_named_at_that_line_with_its_text(tmp_path, name, body, words):
    root = make_storm(tmp_path / "s", QUEUE, toml=HEAD.replace("\n", "\r\n") + body if "crlf" in name else HEAD + body)
    r = run_cli(root, "list")
    assert r.returncode == 3
    assert r.stderr == f"storm-queue: the priority order is unknown: storm.toml is not valid TOML: {words}; " \
                       "fix storm.toml so the log can be found\n"
    doc = json.loads(run_cli(root, "doctor", "--json").stdout)
    assert doc["findings"][0]["code"] == "declaration_unreadable" and words in doc["findings"][0]["message"]


@pytest.mark.parametrize("name,body,words", [
    # the parser stops at "cron", on line 7; the comma is missing at the end of line 6
    ("a multi-line array missing a comma", 'sources = [\n  "bot",\n  "nightly"\n  "cron",\n]\n',
     'Unclosed array at line 7, column 3, inside the statement that starts at line 4 ("sources = ["): '
     "the mistake is on one of lines 4 to 7"),
    # the parser stops at [runner], on line 8; the array opened on line 4 is never closed
    ("a multi-line array never closed", 'sources = [\n  "bot",\n  "cron",\n\n[runner]\nslots = 2\n',
     'Invalid value at line 8, column 2, inside the statement that starts at line 4 ("sources = ["): '
     "the mistake is on one of lines 4 to 8"),
    # the parser says only "at end of document"
    ("a multi-line string never closed", 'sources = ["bot"]\nlog = """priority.log\n\n',
     'Unterminated string at the end of the file: the statement at line 5 ("log = \\"\\"\\"priority.log") '
     "is not finished"),
    ("an array never closed, at the end", 'sources = [\n  "bot",\n  "cron",\n',
     'Invalid value at the end of the file, inside the statement that starts at line 4 ("sources = ["): '
     "the mistake is on one of lines 4 to 6"),
])
def test_where_the_parsers_line_is_not_the_mistakes_both_lines_are_named(tmp_path, name, body, words):
    root = make_storm(tmp_path / "s", QUEUE, toml=HEAD + body)
    r = run_cli(root, "list")
    assert r.returncode == 3
    assert f"storm.toml is not valid TOML: {words}" in r.stderr
    assert "not necessarily where the parser stopped" in r.stderr or "is not finished" in r.stderr
    refused = run_cli(root, "bump", "api")
    assert refused.returncode == 1 and words in refused.stderr


@pytest.mark.parametrize("name,body,words", [
    ("nested too deeply", "x = " + "[" * 5000 + "]" * 5000 + "\n", "arrays or tables are nested too deeply to be read"),
    ("an integer too long to read", "[runner]\nslots = " + "9" * 5000 + "\n",
     "a value cannot be read (Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits)"),
])
def test_a_storm_toml_the_reader_cannot_take_is_not_valid_toml_not_a_crash(tmp_path, name, body, words):
    """tomllib raises RecursionError and ValueError for these, not its
    TOMLDecodeError: every command crashed (exit 4). The contract's answer
    to a storm.toml that is not TOML: next and list 3, a request 1 and not
    recorded, doctor an error, declare and migrate refused."""
    root = make_storm(tmp_path / "s", QUEUE, toml=HEAD + body)
    for args, code in ((("list",), 3), (("next",), 3), (("bump", "api"), 1), (("doctor",), 1)):
        r = run_cli(root, *args)
        assert r.returncode == code, (args, r.stderr)
        assert f"storm.toml is not valid TOML: {words}" in r.stderr + r.stdout, (args, r.stderr)
    assert not (root / "priority.log").exists()
    assert config.parse(HEAD + body).log_error == f"storm.toml is not valid TOML: {words}"

"""A URL with a password typed where another argument goes: a usage
error, a file argument, a refused slug or a free-text reason never shows
or records the password (``***`` stands in its place, as for a root), and
outside text in a usage error reaches the terminal escaped, one line."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make_storm, run_main

URL = "postgresql://u:S3cret@db.example/storm"
SHOWN = "postgresql://u:***@db.example/storm"

USAGE = [
    ("verify", URL),  # Got unexpected extra argument (...)
    (URL, "list"),  # No such command '...'
    ("grant", URL, "x"),  # Invalid value for '{runner|reader}': '...' is not one of ...
    ("why", "a", URL),
    ("log", "--since", URL),  # the tool's own time type
    ("log", f"--since={URL}"),
    ("claim", "--ttl", URL),
    ("list", f"--{URL}"),  # No such option '...'
]


@pytest.mark.parametrize("click", [False, True], ids=["console script", "click"])
@pytest.mark.parametrize("args", USAGE, ids=lambda a: " ".join(a)[:40])
def test_a_usage_error_shows_an_arguments_password_masked(tmp_path, args, click):
    for as_json in ((), ("--json",)):
        done = run_main([*as_json, *args], cwd=tmp_path, click=click)
        assert done.returncode == 2, done.stderr
        assert "S3cret" not in done.stderr + done.stdout
        assert SHOWN in done.stderr, done.stderr
        if as_json:
            doc = json.loads(done.stdout)
            assert doc["exit"] == 2 and SHOWN in doc["message"], doc


@pytest.mark.parametrize("hostile, escaped", [("x\nstorm-queue: forged line", "x\\x0astorm-queue: forged line"),
                                              ("\x1b[2J", "\\x1b[2J")])
def test_a_usage_error_prints_outside_text_escaped_on_one_line(tmp_path, hostile, escaped):
    for as_json in ((), ("--json",)):
        done = run_main([*as_json, "why", "a", hostile], cwd=tmp_path, text=False)
        assert done.returncode == 2
        err = done.stderr.decode()
        assert all(line.isprintable() for line in err.split("\n")), err
        assert f"Error: Got unexpected extra argument ({escaped})\n" in err
        assert "\nstorm-queue: forged line" not in err
        if as_json:
            assert json.loads(done.stdout)["message"] == f"Got unexpected extra argument ({escaped})"


@pytest.mark.parametrize("args", [("add", "--from", URL), ("settle", "--from", URL, "integrated"),
                                  ("bump", "a", "--reason-file", URL), ("serve", "--token-file", URL)])
def test_a_file_argument_that_is_a_url_is_named_masked(tmp_path, args):
    root = make_storm(tmp_path / "storm", "a 1\n")
    for as_json in ((),) if args[0] == "serve" else ((), ("--json",)):  # serve takes no --json
        done = run_main([*as_json, *args, "--root", str(root)], cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "S3cret" not in done.stderr + done.stdout
        assert f"{SHOWN}: cannot read it" in done.stderr, done.stderr


#: (arguments, the field of the recorded line that quotes the URL): requests that refuse it as a name, an issue or
#: a time, one that records it as free text, and the runner requests a database's server decides itself
RECORDED = [
    (("bump", URL), "slug"),
    (("add", "d2", URL), "message"),  # an issue
    (("add", "d3", "5", "--deps", URL), "message"),  # a dependency
    (("schedule", "d", "--not-before", URL), "message"),
    (("bump", "a", "--reason", f"see {URL} today"), "reason"),
    (("bump", "a", "--reason", "rotate password=S3cret now"), "reason"),
    (("release", URL, "--token", "1"), "slug"),
    (("claim", "--holder", URL), "message"),
]


def test_a_url_typed_where_another_argument_goes_is_recorded_and_said_masked(store) -> None:
    """Secrets win over "refused text is recorded as data": the text is
    recorded and printed with the password masked, on either store."""
    store.make("a 1\nd 2\n")
    for args, field in RECORDED:
        before = len(store.lines())
        done = store.cli(*args, "--json")
        assert "S3cret" not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        lines = store.lines()[before:]
        assert lines, (args, done.stderr)
        assert all(b"S3cret" not in line for line in lines), (args, lines)
        own = json.loads(lines[-1])
        assert "***" in own[field], (args, own)
        assert field == "reason" or "***" in json.loads(done.stdout)["message"], (args, done.stdout)
    if store.kind == "directory":
        assert "S3cret" not in (store.path / "progress.log").read_text()

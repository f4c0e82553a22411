"""Outside text is data (contract section 4, issue 2 item 8): a hostile
``--reason``, slug or ``queue.txt`` line reaches the log only through the
JSON encoder, and ``progress.log`` and the terminal only escaped, so no
input can forge a line or drive the terminal.

Output is captured as bytes: decoding with universal newlines would turn a
raw carriage return into a newline and hide it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from storm_queue.core.names import quote
from tests.conftest import clean_env, make_storm, run_main

HOSTILE = {
    "newline": "two\nlines",
    "carriage return": "over\rwrite",
    "escape sequence": "\x1b[31mred\x1b[0m",
    "line separator": "one\u2028two",
    "paragraph separator and NEL": "p\u2029q\x85r",
    "bell and backspace": "ding\x07\x08",
    "rich markup": "[red]x[/red]",
    "rich link": "[link=http://x]y[/link]",
    "forged progress line": "ok\n2026-01-01T00:00:00.000000Z storm-queue: bump \"a\" by \"operator:root\": done",
}


def cli(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``storm-queue ARGS --root ROOT`` (in this process), its output as bytes."""
    return run_main([*args, "--root", str(root)], env=env, text=False)


def assert_clean_terminal(data: bytes, what: str) -> str:
    """Every line of ``data`` prints only what it says: no control
    characters, no line or paragraph separators, no NEL."""
    text = data.decode("utf-8")
    for line in text.split("\n"):
        assert line.isprintable(), f"{what}: raw control character in {line!r}"
    return text


def progress_bytes(root: Path) -> bytes:
    path = root / "progress.log"
    return path.read_bytes() if path.exists() else b""


def assert_log_is_json_lines(root: Path, expected: int) -> list[dict]:
    raw = (root / "priority.log").read_bytes()
    for bad in (b"\r", b"\x1b", b"\xe2\x80\xa8", b"\xe2\x80\xa9", b"\xc2\x85", b"\x07"):
        assert bad not in raw, f"raw {bad!r} in the log"
    lines = raw.split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == expected
    # the text-level view agrees: str.splitlines also breaks on U+2028 and friends
    assert len(raw.decode("utf-8").splitlines()) == expected
    return [json.loads(line) for line in lines[:-1]]


def new_progress_line(before: bytes, after: bytes) -> str:
    assert after.startswith(before)
    added = after[len(before):]
    assert added.count(b"\n") == 1 and added.endswith(b"\n"), f"not exactly one line: {added!r}"
    line = added[:-1].decode("utf-8")
    assert line.isprintable(), f"raw control character in progress.log: {line!r}"
    assert len(added.decode("utf-8").splitlines()) == 1
    return line


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_reason_stays_one_escaped_line(tmp_path: Path, text: str) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    steps = [("bump", "a"), ("bump", "zz"), ("unbump", "a"), ("push", "c", "3"), ("bump", "b", "--source", "bot")]
    for n, step in enumerate(steps, start=1):
        before = progress_bytes(root)
        done = cli(root, *step, "--reason", text)
        assert done.returncode in (0, 1, 2), done.stderr
        assert_clean_terminal(done.stdout + done.stderr, f"{step} terminal")
        events = assert_log_is_json_lines(root, n)
        assert events[-1]["reason"] == text, "reason is always the caller's words, exactly"
        line = new_progress_line(before, progress_bytes(root))
        if text.isprintable():
            assert text in line  # markup shows as itself, not interpreted
        else:
            assert text not in line
    listed = cli(root, "list")
    assert listed.returncode == 0
    assert_clean_terminal(listed.stdout + listed.stderr, "list")


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_refused_slug_is_data(tmp_path: Path, text: str) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    before = progress_bytes(root)
    done = cli(root, "bump", text, "--reason", text)
    assert done.returncode == 2, done.stderr
    terminal = assert_clean_terminal(done.stdout + done.stderr, "refusal")
    assert "invalid_slug" in terminal
    if text.isprintable():
        assert text in terminal
    else:
        assert text not in terminal
    events = assert_log_is_json_lines(root, 1)
    assert events[0]["action"] == "refused" and events[0]["code"] == "invalid_slug"
    assert events[0]["slug"] == text and events[0]["reason"] == text
    line = new_progress_line(before, progress_bytes(root))
    assert "invalid_slug" in line
    # JSON on stdout: one document, no raw control characters, the slug exact
    before = progress_bytes(root)
    as_json = cli(root, "unbump", text, "--json")
    assert as_json.returncode == 2
    assert_clean_terminal(as_json.stdout + as_json.stderr, "refusal --json")
    assert json.loads(as_json.stdout)["slug"] == text
    assert_log_is_json_lines(root, 2)
    new_progress_line(before, progress_bytes(root))
    # push: the slug and the issue both hostile
    before = progress_bytes(root)
    pushed = cli(root, "push", "z", text)
    assert pushed.returncode == 2
    assert_clean_terminal(pushed.stdout + pushed.stderr, "push refusal")
    assert assert_log_is_json_lines(root, 3)[-1]["code"] == "invalid_issue"
    new_progress_line(before, progress_bytes(root))
    listed = cli(root, "list")
    assert listed.returncode == 0
    assert_clean_terminal(listed.stdout + listed.stderr, "list")


def test_terminal_escapes_outside_text_once(tmp_path: Path) -> None:
    """None of these inputs has a backslash, so a doubled backslash on the
    terminal is an escape escaped again: the reader would no longer see the
    text as it was given. Checks a refused slug, a refused source and a
    skipped queue.txt line shown by list."""
    doubled = []
    for n, text in enumerate(t for t in HOSTILE.values() if not t.isprintable()):
        root = make_storm(tmp_path / f"storm{n}", "a 1\n" + text.replace("\n", " ") + " 2\n")
        for args in (("bump", text), ("bump", "a", "--source", text), ("list",)):
            done = cli(root, *args)
            out = assert_clean_terminal(done.stdout + done.stderr, " ".join(args))
            doubled += [line for line in out.split("\n") if "\\\\" in line]
    assert doubled == [], "escaped more than once:\n" + "\n".join(doubled)


def test_escapes_are_visible_not_dropped(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    done = cli(root, "bump", "x\x1b[31my\rz\u2028w")
    assert done.returncode == 2
    err = done.stderr.decode()
    # escaped once: a reader sees the slug as it was typed
    assert any(f'slug "x\\x1b[31my{cr}z\\u2028w"' in err for cr in ("\\r", "\\x0d")), err
    line = (root / "progress.log").read_text().splitlines()[-1]
    assert any(f'bump "x\\x1b[31my{cr}z\\u2028w" by' in line for cr in ("\\r", "\\x0d")), line


def test_hostile_queue_line_shows_escaped_in_list(tmp_path: Path) -> None:
    hostile = "ev\x1b[2Jil 5 \rX\u2028"
    title = "t 6 \x1b]0;pwned\x07"
    root = make_storm(tmp_path / "storm", "a 1\n" + hostile + "\n" + title + "\n")
    listed = cli(root, "list")
    assert listed.returncode == 0, listed.stderr
    out = assert_clean_terminal(listed.stdout + listed.stderr, "list")
    skipped = [l for l in out.split("\n") if "skipped" in l]
    assert len(skipped) == 2, out
    assert any(f'line 2: "ev\\x1b[2Jil 5 {cr}X\\u2028"' in skipped[0] for cr in ("\\r", "\\x0d")), skipped[0]
    assert 'line 3: "t 6 \\x1b]0;pwned\\x07"' in skipped[1], skipped[1]
    doc = json.loads(cli(root, "list", "--json").stdout)
    assert [s["line"] for s in doc["skipped"]] == [2, 3]
    assert doc["skipped"][0]["text"] == hostile and doc["skipped"][1]["text"] == title
    assert [r["slug"] for r in doc["rows"]] == ["a"]
    # next says each skipped line once in progress.log, escaped, one line each
    nxt = cli(root, "next")
    assert nxt.stdout == b"run a 1\n"
    assert_clean_terminal(nxt.stdout + nxt.stderr, "next")
    raw = progress_bytes(root)
    lines = raw.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 2, raw
    assert all(l.isprintable() for l in lines)
    assert b"\x1b" not in raw and b"\r" not in raw and b"\x07" not in raw
    assert cli(root, "next").returncode == 0
    assert progress_bytes(root) == raw, "said once"


def test_hostile_lane_env_value_is_data(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\n")
    value = "x\ny\x1b[0m\u2028"
    done = cli(root, "bump", "a", env=clean_env(STORM_QUEUE_LANE=value))
    assert done.returncode == 1
    assert_clean_terminal(done.stdout + done.stderr, "lane refusal")
    events = assert_log_is_json_lines(root, 1)
    assert events[0]["by"] == "lane:" + json.dumps(value)
    line = new_progress_line(b"", progress_bytes(root))
    assert "lane_process" in line


# -- every view of issue 3 (item 10): list (terminal and plain), log, why,
# -- dry-run refusals; markup shows as itself, never interpreted

SGR = __import__("re").compile(r"\x1b\[[0-9;]*m")


def hostile_storm(tmp_path: Path, text: str) -> Path:
    """A storm whose log carries ``text`` as a reason and as a refused slug."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2 a\n")
    assert cli(root, "bump", "b", "--reason", text).returncode == 0
    assert cli(root, "bump", text, "--reason", text).returncode == 2
    return root


def assert_shown_literally(out: str, text: str, what: str) -> None:
    """``text`` appears escaped (once) and quoted, never raw when it is not
    printable; printable markup appears exactly as typed."""
    if text.isprintable():
        assert text in out, f"{what}: {text!r} not shown as itself"
    else:
        assert text not in out
        assert quote(text) in out, f"{what}: {quote(text)} not in {out!r}"


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_text_in_plain_list_log_and_why(tmp_path: Path, text: str) -> None:
    root = hostile_storm(tmp_path, text)
    for args in (("list",), ("list", "--plain", "--all"), ("log",), ("log", "--refused"), ("why", "b"), ("why", "a")):
        done = cli(root, *args)
        assert done.returncode == 0, (args, done.stderr)
        out = assert_clean_terminal(done.stdout + done.stderr, " ".join(args))
        assert_shown_literally(out, text, " ".join(args))
    log = assert_clean_terminal(cli(root, "log").stdout, "log")
    assert len(log.splitlines()) == 2, "one line per event"
    refused = log.splitlines()[1]
    assert refused.count(quote(text)) == 3, "the refused slug, the message naming it, and the reason, each quoted"
    # why of the hostile text itself: invalid, answered escaped on stderr
    bad = cli(root, "why", text)
    assert bad.returncode == 2
    assert_shown_literally(assert_clean_terminal(bad.stdout + bad.stderr, "why hostile"), text, "why hostile")
    # a dry run's refusal and a dry run's reason
    for args in (("bump", text, "--dry-run"), ("bump", "a", "--dry-run", "--reason", text), ("push", "z", text, "--dry-run")):
        done = cli(root, *args)
        assert_clean_terminal(done.stdout + done.stderr, " ".join(args))
    assert len(log_lines(root)) == 2, "dry runs record nothing"
    # the JSON views carry the text exactly
    doc = json.loads(cli(root, "why", "b", "--json").stdout)
    assert doc["mark"]["reason"] == text
    rows = json.loads(cli(root, "list", "--json").stdout)["rows"]
    assert rows[1]["mark"]["reason"] == text


def log_lines(root: Path) -> list[bytes]:
    return (root / "priority.log").read_bytes().splitlines()


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_text_in_the_terminal_table(tmp_path: Path, text: str) -> None:
    """The rich table, forced onto a terminal in-process: every escape
    sequence in its output is rich's own colour (SGR), and outside text,
    markup included, is shown literally."""
    import io

    from rich.console import Console

    from storm_queue.service.storm import Storm
    from storm_queue.cli.table import print_listing

    root = hostile_storm(tmp_path, text)
    queue = root / "queue.txt"
    queue.write_text(queue.read_text() + text.replace("\n", " ") + " 3\n")
    buf = io.StringIO()
    print_listing(Storm.find(str(root)).listing(), Console(file=buf, force_terminal=True, width=400, color_system="truecolor"))
    out = buf.getvalue()
    assert "\x1b]" not in out, "no hyperlink or title sequence"
    plain = SGR.sub("", out)
    for line in plain.split("\n"):
        assert line.isprintable(), f"raw control character in {line!r}"
    assert_shown_literally(plain, text, "table reason")
    skipped = next(line for line in plain.split("\n") if " 3 " in line and "│" in line and '"' in line)
    assert quote(text.replace("\n", " ") + " 3") in skipped

"""``list`` for people and for scripts (issue 3 item 1): a rich table at a
terminal, documented plain columns otherwise, ``--all``, and ``--json``
extended only additively."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from tests.conftest import clean_env, drain, make_storm, run_cli

SGR = re.compile(r"\x1b\[[0-9;]*m")
BOX = set("┏━┳┓┃┡╇┩│└┴┘─┼╭╮╰╯")

QUEUE = "a 1\nb 2 a\nc 3\nd 4 c\ne 5\nold 6\nbad line here x\n"


def run_in_pty(root: Path, *args: str, env: dict[str, str] | None = None, columns: int = 200) -> tuple[int, str]:
    """Run the CLI with stdout on a pseudo-terminal ``columns`` wide;
    return the exit code and what the terminal received."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = dict(env or clean_env())
    env.pop("COLUMNS", None)
    env.pop("TERM", None)
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([sys.executable, "-m", "storm_queue", *args, "--root", str(root)],
                            stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    out = drain(master)
    proc.stderr.read()
    code = proc.wait(timeout=60)
    return code, out.decode("utf-8").replace("\r\n", "\n")


def prepared(storm) -> Path:
    """A storm with a named lane, a pulled-forward dependency, a settled
    lane, a stray slug and a skipped line."""
    root = storm(QUEUE, integrated=["old"], running=["e"])
    assert run_cli(root, "bump", "d", "--reason", "customer outage").returncode == 0
    assert run_cli(root, "push", "gone", "7", "--source", "bot").returncode == 1
    assert run_cli(root, "push", "gone", "7").returncode == 0
    text = (root / "queue.txt").read_text().replace("gone 7\n", "")
    (root / "queue.txt").write_text(text)
    return root


def lane_lines(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split() and re.fullmatch(r"[0-9]+|-", line.split()[0])]


def test_plain_columns_are_the_documented_ones(storm) -> None:
    root = prepared(storm)
    done = run_cli(root, "list")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not SGR.search(out) and not (set(out) & BOX)
    rows = lane_lines(out)
    # POSITION PRIORITY SLUG ISSUE STATE BY AT DETAIL...
    assert [r[:5] for r in rows] == [
        ["1", "*", "c", "3", "ready"],
        ["2", "*", "d", "4", "waiting"],
        ["3", "-", "a", "1", "ready"],
        ["4", "-", "b", "2", "waiting"],
        ["5", "-", "e", "5", "running"],
    ]
    bumped = json.loads((root / "priority.log").read_text().splitlines()[0])
    assert rows[0][5:7] == ["operator:" + bumped["by"].split(":", 1)[1], bumped["at"]]
    assert rows[1][5:7] == rows[0][5:7]
    assert rows[2][5:7] == ["-", "-"]
    c_line = next(line for line in out.splitlines() if line.split()[:3] == ["1", "*", "c"])
    assert c_line.endswith('ready; pulled forward for d; reason "customer outage"')
    d_line = next(line for line in out.splitlines() if line.split()[:3] == ["2", "*", "d"])
    assert "waits on c (not yet run)" in d_line
    others = [line for line in out.splitlines() if line.split() not in rows]
    assert all(re.match(r"[a-z]+: ", line) for line in others), others
    assert "next: run c 3" in others
    assert "settled: 1 lane(s), not listed (--all lists them)" in others
    pushed = json.loads((root / "priority.log").read_text().splitlines()[-1])
    assert f"stray: gone (prioritised by {pushed['by']} at {pushed['at']}, but queue.txt no longer carries it; never run)" in others
    assert 'skipped: queue.txt line 7: "bad line here x": ' in out
    # awk-style use, as docs/commands.md shows
    assert [r[2] for r in rows if r[1] == "*"] == ["c", "d"]


def test_all_lists_settled_lanes(storm) -> None:
    root = prepared(storm)
    out = run_cli(root, "list", "--all").stdout
    rows = lane_lines(out)
    assert rows[-1][:5] == ["-", "-", "old", "6", "settled"]
    assert rows[-1][-1] == "integrated"
    assert "settled:" not in out
    plain = run_cli(root, "list", "--plain").stdout
    assert "old" not in [r[2] for r in lane_lines(plain)]


def test_json_is_extended_additively(storm) -> None:
    root = prepared(storm)
    doc = json.loads(run_cli(root, "list", "--json").stdout)
    rows = {r["slug"]: r for r in doc["rows"]}
    assert set(doc["rows"][0]) == {"position", "slug", "issue", "deps", "prioritised", "state", "status", "waits_on", "mark",
                                   "running", "lease", "attempts", "quarantined", "not_before", "history", "unparked",
                                   "ready_since", "passed_over", "starving",  # issue 12: the starving lane
                                   "cancelled",  # issue 20 item 7: who cancelled the lane
                                   "held"}  # issue 33 item 3: who held the lane, when and why
    assert rows["c"]["mark"]["slug"] == "d" and rows["c"]["mark"]["reason"] == "customer outage"
    assert rows["d"]["mark"]["action"] == "bump" and rows["d"]["mark"]["seq"] == 1
    assert rows["a"]["mark"] is None
    assert rows["b"]["waits_on"] == ["a"]
    assert [s["slug"] for s in doc["settled"]] == ["old"]
    assert doc["stray"] == ["gone"]


def test_terminal_gets_a_table(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    root = prepared(storm)
    code, out = run_in_pty(root, "list")
    assert code == 0
    assert set(out) & BOX, out
    assert "\x1b[" in out
    text = SGR.sub("", out)
    assert "next: run c 3" in text
    for heading in ("lane", "issue", "state", "prioritised by", "waits on"):
        assert heading in text
    table_rows = [line for line in text.splitlines() if line.startswith("│")]
    lane_rows = [cells for cells in (row.split("│") for row in table_rows) if len(cells) == 9]  # 7 columns
    slugs = [cells[3].strip() for cells in lane_rows if cells[3].strip()]
    assert slugs == ["c", "d", "a", "b", "e"]
    cells = {c[3].strip(): c for c in lane_rows}
    assert cells["c"][6].strip().startswith("operator:") and " for d, " in cells["c"][6]  # for whom, once
    assert "customer outage" not in cells["c"][6]  # not d's reason again
    assert 'reason "customer outage"' in cells["d"][6]
    assert len(lane_rows) == 5 and all(cells[3].strip() for cells in lane_rows)  # one line a lane
    stray = text.split("Stray", 1)[1]
    assert "gone" in stray and "operator:" in stray
    assert "Skipped queue.txt lines" in text and '"bad line here x"' in text
    assert "1 settled lane(s) not shown" in text
    # the state is coloured: "ready" in green, "waiting" in yellow
    assert re.search(r"\x1b\[[0-9;]*32m ?ready", out) and re.search(r"\x1b\[[0-9;]*33m ?waiting", out)


def test_terminal_all_shows_settled_rows(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    root = prepared(storm)
    code, out = run_in_pty(root, "list", "--all")
    assert code == 0
    text = SGR.sub("", out)
    assert "old" in text and "integrated" in text and "not shown" not in text


def test_no_color_and_plain_win_over_a_terminal(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    root = prepared(storm)
    pipe = run_cli(root, "list").stdout
    for args, env in ((("list",), clean_env(NO_COLOR="1")), (("list", "--plain"), clean_env())):
        code, out = run_in_pty(root, *args, env=env)
        assert code == 0
        assert "\x1b" not in out and not (set(out) & BOX), out
        assert out == pipe


def test_in_process_table_content() -> None:
    """The table's renderable, on a forced terminal: content, not only 'no crash'."""
    from rich.console import Console

    from storm_queue.service.storm import Storm
    from storm_queue.cli.table import print_listing

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = make_storm(Path(tmp) / "storm", "a 1\nb 2 a\n", abandoned=["x"])
        assert run_cli(root, "bump", "b", "--reason", "why not").returncode == 0
        buf = io.StringIO()
        print_listing(Storm.find(str(root)).listing(), Console(file=buf, force_terminal=True, width=160, color_system="standard"))
    out = buf.getvalue()
    text = SGR.sub("", out)
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    first = [r for r in rows if r[0]]
    assert [r[:5] for r in first] == [["1", "*", "a", "1", "ready"], ["2", "*", "b", "2", "waiting"]]
    assert first[0][5].startswith("operator:") and first[1][6] == "waits on a (not yet run)"
    assert 'reason "why not"' in text
    assert "* in the priority lane" in text


def test_plain_paths_never_import_rich(storm) -> None:
    """A real process: which modules it imports is tested (this one has the test runner's)."""
    root = prepared(storm)
    probe = (
        "import sys\n"
        "from storm_queue.cli.app import main\n"
        "for args in (['list'], ['list', '--json'], ['list', '--plain'], ['log'], ['why', 'c']):\n"
        "    try:\n"
        "        main.main(args=args + ['--root', sys.argv[1]], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('RICH' if 'rich' in sys.modules else 'NO-RICH', file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(root)], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "NO-RICH", done.stderr


# issue 13 item 12: a narrow terminal keeps every column readable; issue 20
# item 10: each lane one line, a cell that does not fit cut with an ellipsis

NARROW_QUEUE = "setup 1\nschema 2 setup\nhotfix 3\ndocs 4\napi 5 schema\n"


def table_cells(text: str) -> list[list[str]]:
    """The body rows of the lane table, as cells (each lane one row)."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


def narrow_storm(storm) -> tuple[Path, str]:
    root = storm(NARROW_QUEUE)
    assert run_cli(root, "bump", "api", "--reason", "customer outage on the payments page").returncode == 0
    by = json.loads(run_cli(root, "list", "--json").stdout)["rows"][0]["mark"]["by"]
    return root, by


def test_at_60_columns_each_lane_is_one_line_who_and_for_whom_whole(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    root, by = narrow_storm(storm)
    code, out = run_in_pty(root, "list", columns=60)
    assert code == 0
    text = SGR.sub("", out)
    assert max(len(line) for line in text.splitlines()) <= 60
    header = [line for line in text.splitlines() if line.startswith("┃")]
    assert "prioritised" in "".join(header) and "waits on" in "".join(header)
    rows = table_cells(text)  # "#" and "issue" are dropped first: *, lane, state, prioritised by, waits on
    assert len(rows) == 5, text  # one line a lane
    assert [(r[1], r[2]) for r in rows] == [("setup", "ready"), ("schema", "waiting"), ("api", "waiting"),
                                            ("hotfix", "ready"), ("docs", "ready")]
    assert rows[0][3].startswith(f"{by} for api") and rows[0][3].endswith("…"), "who and for whom are whole"
    assert "customer outage" not in rows[0][3] and "customer outage" not in rows[1][3]
    assert rows[2][3].startswith(by) and rows[2][3].endswith("…")  # api's own reason, cut
    assert rows[2][4].startswith("waits") and rows[2][4].endswith("…")  # the detail, cut
    assert 'narrow terminal: not shown: "#", "issue"' in text


def test_a_narrower_terminal_drops_the_least_useful_columns_never_the_lane_or_state(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    root, _ = narrow_storm(storm)
    for columns, dropped in ((50, '"#", "issue", "prioritised by"'), (30, '"#", "issue", "prioritised by", "waits on"')):
        code, out = run_in_pty(root, "list", columns=columns)
        assert code == 0
        text = SGR.sub("", out)
        lanes = table_cells(text)
        assert [(r[1], r[2]) for r in lanes] == [("setup", "ready"), ("schema", "waiting"), ("api", "waiting"),
                                                 ("hotfix", "ready"), ("docs", "ready")], text
        assert f"narrow terminal: not shown: {dropped}" in " ".join(text.split()), text


def test_a_slug_wider_than_the_terminal_is_folded_never_cut(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    slug = "a-very-long-lane-name-for-a-migration-of-the-billing-service"
    root = storm(f"{slug} 1\n")
    code, out = run_in_pty(root, "list", columns=40)
    assert code == 0
    text = SGR.sub("", out)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 40, text
    pieces = [r[1] for r in table_cells(text) if len(r) > 1]
    assert "".join(pieces) == slug, text


def test_a_wide_terminal_shows_all_seven_columns_whole(storm) -> None:
    """A real process: its stdout is a pseudo-terminal."""
    root, by = narrow_storm(storm)
    code, out = run_in_pty(root, "list", columns=200)
    text = SGR.sub("", out)
    assert code == 0 and "not shown" not in text and "…" not in text
    rows = table_cells(text)
    assert [len(r) for r in rows] == [7] * 5
    at = json.loads(run_cli(root, "list", "--json").stdout)["rows"][0]["mark"]["at"]
    when = at[:16].replace("T", " ") + "Z"
    assert rows[0][5] == f"{by} for api, {when}"
    assert rows[2][5] == f'{by}, {when}, reason "customer outage on the payments page"'


def test_at_80_columns_eight_pulled_forward_lanes_take_eight_lines(storm) -> None:
    """Issue 20 item 10: 8 lanes pulled forward for mobile, with a long
    reason, took 64 lines of table at 80 columns; each lane is one line, and
    a pulled-forward lane says for whom, once. A real process: its stdout
    is a pseudo-terminal."""
    deps = ["auth", "schema", "billing", "api", "search", "notify", "web", "sdk"]
    root = storm("".join(f"{d} {n}\n" for n, d in enumerate(deps, 11)) + f"mobile 19 {','.join(deps)}\nother 20\n")
    reason = "app store deadline on friday for the release of the new payments screen"
    assert run_cli(root, "bump", "mobile", "--reason", reason).returncode == 0
    by = json.loads(run_cli(root, "list", "--json").stdout)["rows"][0]["mark"]["by"]
    code, out = run_in_pty(root, "list", columns=80)
    assert code == 0
    text = SGR.sub("", out)
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = table_cells(text)
    assert len(rows) == 10, text  # 10 lanes, 10 lines
    assert [r[2] for r in rows] == deps + ["mobile", "other"]
    assert "not shown" not in text  # every column kept
    for r in rows[:8]:
        assert r[5].startswith(f"{by} for mobile"), r
    assert "app store" not in text.split("mobile  ", 1)[0]  # no pulled-forward lane repeats the reason
    assert text.count("for mobile") == 8


def test_a_state_with_no_lane_says_so_in_its_own_words(tmp_path: Path) -> None:
    """Issue 33, item 11: ``list --state quarantined`` with none quarantined
    says none is quarantined, not that no lane is to run (three lanes are)."""
    root = make_storm(tmp_path / "storm", "a 1\nb 2\nc 3\nz 4\n", integrated=["z"])
    one = run_cli(root, "list", "--state", "quarantined")
    assert one.returncode == 0 and "lanes: none quarantined" in one.stdout.splitlines(), one.stdout
    assert "none to run" not in one.stdout
    two = run_cli(root, "list", "--plain", "--state", "scheduled,quarantined")
    assert two.stdout.splitlines()[2:] == ["lanes: none scheduled or quarantined"]
    settled = run_cli(root, "list", "--plain", "--state", "settled").stdout.splitlines()
    assert settled[2].split()[2:5] == ["z", "4", "settled"] and len(settled) == 3  # z is shown: no "none" line
    assert "lanes: none to run" not in run_cli(root, "list", "--plain").stdout
    code, text = run_in_pty(root, "list", "--state", "quarantined")
    assert code == 0 and "lanes: none quarantined" in SGR.sub("", text)


def test_a_terminal_too_narrow_for_the_table_gets_the_plain_listing(storm) -> None:
    """``COLUMNS=0`` (or a pty a few columns wide) drew the table 0 wide:
    list printed nothing and exited 0. Narrower than the table can be
    drawn (``table.NARROWEST``), it prints the plain listing."""
    from storm_queue.cli.table import NARROWEST

    root = prepared(storm)
    plain = run_cli(root, "list", "--plain").stdout
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "storm_queue", "list", "--root", str(root)], stdout=slave,
                            stderr=subprocess.DEVNULL, env=clean_env(COLUMNS="0", TERM="xterm-256color"))
    os.close(slave)
    zero = drain(master).decode("utf-8").replace("\r\n", "\n")
    assert proc.wait(timeout=60) == 0 and zero == plain
    code, narrow = run_in_pty(root, "list", columns=NARROWEST - 1)
    assert code == 0 and narrow == plain
    code, table = run_in_pty(root, "list", columns=NARROWEST)
    assert code == 0 and BOX & set(table)

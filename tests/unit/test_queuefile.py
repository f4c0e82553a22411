"""Unit tests of storm_queue.store.directory.queuefile: the queue.txt grammar and the append."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given, strategies as st

from storm_queue.store.directory import queuefile
from storm_queue.core import queuetext
from storm_queue.core.queuetext import Lane


def slugs(q):
    return [lane.slug for lane in q.lanes]


def test_lanes_in_file_order_with_line_numbers():
    q = queuetext.parse("a 1\nb 2\nc - a\n")
    assert q.lanes == (Lane("a", "1", (), 1), Lane("b", "2", (), 2), Lane("c", "-", ("a",), 3))
    assert q.skipped == ()
    assert q.ends_with_newline


def test_blank_and_comment_lines_are_ignored_not_skipped():
    q = queuetext.parse("\n   \n# a comment\n   # indented comment\n\t\na 1\n#b 2\n")
    assert slugs(q) == ["a"]
    assert q.lanes[0].line == 6
    assert q.skipped == ()


def test_fields_split_on_any_whitespace():
    q = queuetext.parse("  a\t 1   \n")
    assert q.lanes == (Lane("a", "1", (), 1),)


def test_crlf_line_endings():
    q = queuetext.parse("a 1\r\nb 2 a\r\n")
    assert [(l.slug, l.issue, l.deps) for l in q.lanes] == [("a", "1", ()), ("b", "2", ("a",))]


def test_duplicate_slug_keeps_first_line_and_reports_later():
    q = queuetext.parse("a 1\nb 2\na 3 b\n")
    assert q.lanes == (Lane("a", "1", (), 1), Lane("b", "2", (), 2))
    assert len(q.skipped) == 1
    s = q.skipped[0]
    assert s.line == 3 and s.text == "a 3 b"
    assert "duplicate" in s.why and "1" in s.why


@pytest.mark.parametrize(
    "line, word",
    [
        ("../x 1", "slug"),
        ("a* 1", "slug"),
        ("x;y 1", "slug"),
        ("-a 1", "slug"),
        (".hidden 1", "slug"),
        ("a..b 1", "slug"),
        ("lonely", "issue"),
        ("a ٣", "issue"),
        ("a ²", "issue"),
        ("a 1x", "issue"),
        ("a 1 ../etc", "dependency"),
        ("a 1 b,c*", "dependency"),
        ("a 1 ok .dot", "dependency"),
    ],
)
def test_malformed_line_is_skipped_with_reason(line, word):
    q = queuetext.parse(f"first 1\n{line}\nlast 2\n")
    assert slugs(q) == ["first", "last"]
    assert len(q.skipped) == 1
    s = q.skipped[0]
    assert s.line == 2
    assert s.text == line
    assert word in s.why
    assert s.why.isprintable()


def test_reason_quotes_control_characters():
    q = queuetext.parse("a\x1b[2J 1\n")
    assert q.lanes == ()
    (s,) = q.skipped
    assert "\x1b" not in s.why and s.why.isprintable()


def test_skipped_line_does_not_reserve_the_slug_silently():
    # Both lines for 'a' are accounted for: one skipped, one kept (or reported as a duplicate).
    q = queuetext.parse("a x\na 1\n")
    assert len(q.lanes) + len(q.skipped) == 2
    assert q.skipped[0].line == 1


@pytest.mark.parametrize(
    "deps_text",
    ["b,c,d", "b c d", "b, c, d", "b ,c  d", "b,,c,d,", "b\tc,d"],
)
def test_deps_split_on_commas_and_or_whitespace(deps_text):
    q = queuetext.parse(f"b 1\nc 2\nd 3\na 4 {deps_text}\n")
    assert q.lanes[-1].deps == ("b", "c", "d")
    assert q.skipped == ()


def test_repeated_dependency_listed_once():
    q = queuetext.parse("a 1 b,b c b\n")
    assert q.lanes[0].deps == ("b", "c")


def test_split_deps():
    assert queuetext.split_deps(" x, y  z,") == ("x", "y", "z")
    assert queuetext.split_deps("") == ()
    assert queuetext.split_deps(" - ") == () and queuetext.split_deps("-,") == ()
    assert queuetext.split_deps("-,x") == ("-", "x")


@given(st.text(st.sampled_from(list("ab-, \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000\u200b")) | st.characters(), max_size=12))
def test_split_deps_splits_as_its_pattern_does(text):
    """String methods, not the pattern ``[,\\s]+`` (whose compiling costs every start-up): the same split."""
    deps = tuple(d for d in re.split(r"[,\s]+", text.strip()) if d)
    assert queuetext.split_deps(text) == (() if deps == ("-",) else deps)


@pytest.mark.parametrize("line", ["docs 107 -", "docs 107  - ", "docs - -", "docs 107 -,"])
def test_a_dash_alone_is_no_dependencies(line):
    q = queuetext.parse(line + "\n")
    assert q.skipped == () and q.lanes == (Lane("docs", line.split()[1], (), 1),)


@pytest.mark.parametrize("line", ["a 1 -,b", "a 1 b -", "a 1 - -"])
def test_a_dash_among_dependencies_is_skipped_saying_what_it_means(line):
    q = queuetext.parse(line + "\n")
    (s,) = q.skipped
    assert q.lanes == () and s.why == "'-' means no dependencies, so it cannot stand among them"


def test_ends_with_newline_flag():
    assert not queuetext.parse("a 1").ends_with_newline
    assert queuetext.parse("").ends_with_newline


def test_read_missing_file_is_empty_queue(tmp_path):
    q = queuefile.read(str(tmp_path / "queue.txt"))
    assert q.exists is False and q.lanes == () and q.skipped == ()


def test_read_invalid_utf8_is_reported_not_fatal(tmp_path):
    p = tmp_path / "queue.txt"
    p.write_bytes(b"a 1\nb\xff 2\nc 3\n")
    q = queuefile.read(str(p))
    assert slugs(q) == ["a", "c"]
    assert [s.line for s in q.skipped] == [2]


def test_format_line():
    assert queuetext.format_line("z", "26", ("c", "e")) == "z 26 c,e\n"
    assert queuetext.format_line("z", "-", ()) == "z -\n"


def test_append_line_onto_file_without_final_newline(tmp_path):
    p = tmp_path / "queue.txt"
    p.write_bytes(b"a 1\nb 2")
    queuefile.append_line(str(p), queuetext.format_line("z", "26", ("b",)))
    assert p.read_bytes() == b"a 1\nb 2\nz 26 b\n"
    assert slugs(queuefile.read(str(p))) == ["a", "b", "z"]


def test_append_line_onto_file_with_final_newline(tmp_path):
    p = tmp_path / "queue.txt"
    p.write_bytes(b"a 1\n")
    queuefile.append_line(str(p), "z 26\n")
    assert p.read_bytes() == b"a 1\nz 26\n"


def test_append_line_onto_empty_file(tmp_path):
    p = tmp_path / "queue.txt"
    p.write_bytes(b"")
    queuefile.append_line(str(p), "z 26\n")
    assert p.read_bytes() == b"z 26\n"


def test_append_line_onto_missing_file_creates_it(tmp_path):
    p = tmp_path / "queue.txt"
    queuefile.append_line(str(p), "z 26\n")
    assert p.read_bytes() == b"z 26\n"
    assert oct(os.stat(p).st_mode & 0o777) == oct(0o644)


def test_append_line_refuses_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("secret\n")
    link = tmp_path / "queue.txt"
    link.symlink_to(target)
    with pytest.raises(OSError):
        queuefile.append_line(str(link), "z 26\n")
    assert target.read_text() == "secret\n"


def test_a_queue_txt_an_editor_saves_while_a_lane_is_appended_is_not_written_behind_its_back(tmp_path, monkeypatch):
    """An editor saves queue.txt by renaming a new file over it. A push
    whose append went to the file it replaced reported the lane queued
    and recorded it, while queue.txt no longer carried it (a stray, the
    log naming a lane the storm never runs). The append now sees the
    file replaced: nothing recorded, exit 4 in words, the lines cut back
    off the old file (the editor's backup keeps what it held), and the
    request asked again queues the lane once."""
    from storm_queue import RecordFailed, Storm
    from tests.conftest import log_events, make_storm

    root = make_storm(tmp_path / "s", "a 1\nb 2\n")
    queue, backup = root / "queue.txt", root / "queue.txt~"
    real = queuefile.write_all
    saves = []

    def editor_saves_first(fd, data):
        if not saves:
            (root / "queue.txt.new").write_text("a 1\nb 2\nc 3\n")
            os.link(queue, backup)
            os.replace(root / "queue.txt.new", queue)
            saves.append(True)
        return real(fd, data)

    monkeypatch.setattr(queuefile, "write_all", editor_saves_first)
    storm = Storm(str(root))
    with pytest.raises(RecordFailed) as failed:
        storm.push("z", "9", reason="now")
    assert failed.value.exit_code == 4 and failed.value.recorded is False
    assert "replaced by another file while this request appended" in str(failed.value)
    assert queue.read_text() == "a 1\nb 2\nc 3\n" and backup.read_text() == "a 1\nb 2\n"
    assert log_events(root) == []
    assert storm.push("z", "9", reason="again").outcome == "done"
    assert queue.read_text() == "a 1\nb 2\nc 3\nz 9\n"
    assert [e["action"] for e in log_events(root)] == ["push"]


def test_taking_an_append_back_never_cuts_a_file_an_editor_saved_since(tmp_path):
    """The undo of an append (the log then refused the line) cut
    queue.txt back by size alone: an editor's save of the same length in
    between lost its last line."""
    path = tmp_path / "queue.txt"
    path.write_text("a 1\n")
    undo = queuefile.append_line(str(path), "b 2")
    (tmp_path / "new").write_text("a 1\nc 3\n")  # as long as what the append left
    os.replace(tmp_path / "new", path)
    undo()
    assert path.read_text() == "a 1\nc 3\n"
    undo = queuefile.append_line(str(path), "d 4")
    undo()
    assert path.read_text() == "a 1\nc 3\n"


def test_a_huge_malformed_line_is_reported_by_its_start_and_length_never_copied_whole():
    """A line of a megabyte (a binary pasted in) was copied whole into the
    report, twice (the line, then the slug in its reason): 2 MB in every
    listing and in progress.log. The report quotes its first 256
    characters and says how many more there are."""
    huge = "x" * 1_000_000
    parsed = queuetext.parse(f"a 1\n{huge} 2\nb 1{'0' * 300}\n")
    assert [lane.slug for lane in parsed.lanes] == ["a"]
    line, issue = parsed.skipped
    assert len(line.text) < 400 and line.text.endswith("... (999,746 more characters)")
    assert len(line.why) < 400 and "(999,744 more characters)" in line.why and "longer than 200" in line.why
    assert issue.why.endswith(" is 301 digits, longer than 200")  # not "is not ASCII digits", which it is

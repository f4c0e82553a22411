"""``add --from FILE`` (issue 21, item 5): the lanes of FILE, lines in
queue.txt's grammar, added all or nothing, on both stores. A good batch
leaves the storm and the log as the same adds one by one do; one bad
line refuses the whole batch, naming the line, with one recorded
refusal and nothing added."""

from __future__ import annotations

import json

import pytest

from storm_queue import wall
from storm_queue.core import batch, queuetext
from tests.conftest import run_main
from tests.stores import DatabaseStorm, DirectoryStorm

#: every request of a test is answered at this one time, so two storms' lines and listings compare equal
FIXED = 1_796_000_000.0

BATCH = """\
# the spring storm's lanes
api 13 schema

schema 12
billing 14 api,core
  docs - billing
"""
#: the same lanes as ``add`` arguments, one add each, in the batch's order
ONE_BY_ONE = [("api", "13", "schema"), ("schema", "12", None), ("billing", "14", "api,core"), ("docs", "-", "billing")]


@pytest.fixture
def fixed_clock(monkeypatch) -> None:
    monkeypatch.setattr(wall, "clock", lambda: FIXED)


def twin(store, request, tmp_path):
    """A second storm kept by the same kind of store as ``store``."""
    if store.kind == "directory":
        return DirectoryStorm(tmp_path / "twin")
    return DatabaseStorm(request.getfixturevalue("pg_database")(), tmp_path / "lanes")


def lanes_file(tmp_path, text: str | bytes, name: str = "lanes.txt") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def answer(done) -> dict:
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def listing(store) -> dict:
    """``list --json`` of the storm, its root aside, and the times a lane
    that no line records was ready since (a directory dates them from its
    files' modification times, not from the request's clock)."""
    doc = answer(store.cli("list", "--json"))
    doc.pop("root")
    for row in doc["rows"]:
        row.pop("ready_since")
    return doc


def test_a_batch_leaves_what_the_same_adds_one_by_one_leave(store, request, tmp_path, fixed_clock) -> None:
    """Forward and settled dependencies, comments, blank lines and spaces
    as queue.txt allows them; the reason on every line."""
    store.make("core 11\n", integrated=["base"])
    other = twin(store, request, tmp_path)
    other.make("core 11\n", integrated=["base"])
    done = store.cli("add", "--from", lanes_file(tmp_path, BATCH), "--reason", "spring import", "--json")
    doc = answer(done)
    assert done.returncode == 0, doc
    assert (doc["outcome"], doc["action"], doc["recorded"]) == ("done", "add", True)
    assert doc["added"] == ["api", "schema", "billing", "docs"]
    assert doc["message"] == "queued 4 lanes: api schema billing docs"
    for slug, issue, deps in ONE_BY_ONE:
        assert other.cli("add", slug, issue, *(["--deps", deps] if deps else []), "--reason", "spring import").returncode == 0
    assert store.lanes() == other.lanes() == ["core", "api", "schema", "billing", "docs"]
    assert listing(store) == listing(other)
    ours, theirs = store.events(), other.events()
    assert len(ours) == len(theirs)

    def shape(events):  # the chain and (on a database, whose operator is each database's own role) who
        return [{k: v for k, v in e.items() if k not in ("prev", "by")} for e in events]

    assert shape(ours[-4:]) == shape(theirs[-4:]) and len({e["by"] for e in ours}) == 1
    assert [e["action"] for e in ours[-4:]] == ["add"] * 4 and all(e["reason"] == "spring import" for e in ours[-4:])
    assert store.equals_its_derivation()


BAD = [
    # (the batch, its code, the line it names, words of why)
    ("a 1\n../x 2\n", "invalid_slug", 2, "slug \"../x\" is not a name"),
    ("a 1\nb \u0663\n", "invalid_issue", 2, "issue \"\u0663\" is not ASCII digits"),
    ("a 1\n\nb\n", "invalid_issue", 3, "lane b has no issue"),
    ("a 1\nb 2 a,.hidden\n", "invalid_dependency", 2, "dependency \".hidden\" is not a name"),
    ("a 1\nb 2\n# c\na 3\n", "duplicate_slug", 4, "slug a is listed twice: first on line 1"),
    ("a 1\nq 2\n", "duplicate_slug", 2, "slug q is already queued (issue 9)"),
    ("a 1\nb 2 a,nowhere\n", "dependency_unknown", 2, "b depends on nowhere, which is neither queued, settled, nor"),
]


@pytest.mark.parametrize("text, code, line, why", BAD, ids=[f"{b[1]}-{n}" for n, b in enumerate(BAD)])
def test_one_bad_line_refuses_the_whole_batch_naming_it(store, tmp_path, text, code, line, why) -> None:
    store.make("q 9\n")
    before, lanes = len(store.events()), store.lanes()
    done = store.cli("add", "--from", lanes_file(tmp_path, text), "--json")
    doc = answer(done)
    assert done.returncode == 2, doc
    assert (doc["outcome"], doc["code"], doc["recorded"]) == ("refused", code, True), doc
    assert f"line {line}: {why}" in doc["message"] and "nothing was added" in doc["message"], doc["message"]
    assert store.lanes() == lanes == ["q"]
    events = store.events()
    assert len(events) == before + 1
    assert (events[-1]["action"], events[-1]["requested"], events[-1]["code"]) == ("refused", "add", code)
    assert events[-1]["message"] == doc["message"]
    words = store.cli("add", "--from", lanes_file(tmp_path, text))
    assert words.returncode == 2 and f"refused ({code})" in words.stderr and f"line {line}" in words.stderr


def test_a_refusal_names_the_first_bad_line_and_the_next_few(store, tmp_path) -> None:
    store.make("")
    text = "".join(f"l{n} x{n}\n" for n in range(8))
    doc = answer(store.cli("add", "--from", lanes_file(tmp_path, text), "--json"))
    assert doc["code"] == "invalid_issue" and doc["message"].startswith('"' + str(tmp_path / "lanes.txt") + '" line 1:')
    assert "also line 2 (invalid_issue), line 3 (invalid_issue), line 4 (invalid_issue), line 5 (invalid_issue) " \
           "and 3 more" in doc["message"]


def test_a_batch_from_standard_input_with_a_bom_and_crlf(store, tmp_path) -> None:
    store.make("")
    done = run_main(["add", "--from", "-", "--json", "--root", store.root],
                    stdin="\ufeffa 1\r\n# b\r\n\r\nb 2 a\r\n".encode())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == ["a", "b"]
    snap = store.snapshot()
    assert [(lane.slug, lane.issue, lane.deps) for lane in snap.lanes.values()] == [("a", "1", ()), ("b", "2", ("a",))]
    bad = run_main(["add", "--from", "-", "--json", "--root", store.root], stdin=b"c 3\r\nd 4\r\nc 5\r\n")
    assert bad.returncode == 2 and "standard input line 3: slug c is listed twice" in json.loads(bad.stdout)["message"]


def test_standard_input_takes_the_quick_path_and_click_answers_the_same(tmp_path) -> None:
    from storm_queue.cli import entry

    command, words = entry.quick_form(["add", "--from", "-", "--reason-file", "-"]) or (None, {})
    assert command is not None and (words["from_file"], words["reason_file"]) == ("-", "-")
    answers = []
    for click in (False, True):
        store = DirectoryStorm(tmp_path / str(click))
        store.make("")
        done = run_main(["add", "--from", "-", "--root", store.root], stdin=b"a 1\nb 2 a\n", click=click)
        answers.append((done.returncode, done.stdout, done.stderr, store.lanes()))
    assert answers[0] == answers[1] == (0, "queued 2 lanes: a b\n", "", ["a", "b"])


@pytest.mark.parametrize("count, words", [
    (1, "queued 1 lane: m01"),
    (10, "queued 10 lanes: " + " ".join(f"m{n:02d}" for n in range(1, 11))),
    (30, "queued 30 lanes: m01 m02 m03 m04 m05, 20 more, m26 m27 m28 m29 m30"),
])
def test_the_answer_counts_and_names_what_it_queued_alike(tmp_path, count, words) -> None:
    """Issue 33, item 11: the count agrees with the words (five first, how
    many between, five last), and a lane or lanes as the count says."""
    store = DirectoryStorm(tmp_path)
    store.make("")
    text = "".join(f"m{n:02d} {n}\n" for n in range(1, count + 1))
    done = store.cli("add", "--from", lanes_file(tmp_path, text))
    assert (done.returncode, done.stdout) == (0, words + "\n"), done.stderr


def test_a_crlf_queue_txt_stays_crlf(tmp_path) -> None:
    store = DirectoryStorm(tmp_path)
    store.make("")
    (store.path / "queue.txt").write_bytes(b"x 1\r\ny 2")  # no final line ending either
    assert store.cli("add", "--from", lanes_file(tmp_path, "a 1\nb 2 a\n")).returncode == 0
    assert (store.path / "queue.txt").read_bytes() == b"x 1\r\ny 2\r\na 1\r\nb 2 a\r\n"


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing to add yet\n   \n", "\ufeff"])
def test_an_empty_batch_is_refused_and_recorded(store, tmp_path, text) -> None:
    store.make("a 1\n")
    before = len(store.events())
    doc = answer(store.cli("add", "--from", lanes_file(tmp_path, text), "--json"))
    assert (doc["code"], doc["recorded"]) == ("empty_batch", True) and "holds no lane" in doc["message"]
    assert len(store.events()) == before + 1 and store.lanes() == ["a"]


def test_a_key_binds_the_whole_batch(store, tmp_path) -> None:
    store.make("")
    path = lanes_file(tmp_path, "a 1\nb 2 a\n")
    first = answer(store.cli("add", "--from", path, "--key", "import-1", "--json"))
    count = len(store.events())
    assert store.events()[-1]["key"] == "import-1" and "key" not in store.events()[-2]
    again = answer(store.cli("add", "--from", path, "--key", "import-1", "--json"))
    assert "repeat" not in first and again["repeat"] == count  # the seq of the last line, which carries the key
    assert again["outcome"] == "done" and again["added"] == ["a", "b"] and "a repeat of line" in again["message"]
    assert len(store.events()) == count and store.lanes() == ["a", "b"]
    other = answer(store.cli("add", "--from", lanes_file(tmp_path, "c 3\n", "other.txt"), "--key", "import-1", "--json"))
    assert other["code"] == "idempotency_conflict" and store.lanes() == ["a", "b"]


def test_the_caller_is_judged_as_for_add(store, tmp_path) -> None:
    from tests.conftest import clean_env

    store.make("")
    done = store.cli("add", "--from", lanes_file(tmp_path, "a 1\n"), "--json", env=clean_env(STORM_QUEUE_LANE="x"))
    doc = answer(done)
    assert done.returncode == 1 and (doc["code"], doc["recorded"]) == ("lane_process", True)
    assert store.events()[-1]["authorised"] is False and store.lanes() == []


@pytest.mark.parametrize("args, words", [
    (("add", "a", "1", "--from", "F"), "not both"),
    (("add", "--deps", "b", "--from", "F"), "not both"),
    (("add", "a"), "add takes SLUG ISSUE"),
    (("add",), "add takes SLUG ISSUE"),
    (("add", "--from", "MISSING"), "cannot read it"),
])
def test_usage_errors_record_nothing(store, tmp_path, args, words) -> None:
    store.make("")
    path = lanes_file(tmp_path, "z 1\n")
    args = tuple(path if a == "F" else str(tmp_path / "missing.txt") if a == "MISSING" else a for a in args)
    before = len(store.events())
    done = store.cli(*args)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(store.events()) == before and store.lanes() == []


def test_a_batch_whose_record_fails_adds_nothing(store, tmp_path, monkeypatch) -> None:
    """Directory: queue.txt is cut back to what it was; database: the
    transaction that inserted the rows is rolled back."""
    from storm_queue.core.errors import AppendFailed, RecordFailed
    from storm_queue.service.storm import Storm
    from tests.conftest import clean_env

    store.make("q 9\n")
    storm = Storm.find(store.root, env=clean_env())
    before = len(store.events())
    queue = (store.path / "queue.txt").read_bytes() if store.kind == "directory" else None

    def fail(*args, **kwargs):
        raise AppendFailed("Input/output error")

    monkeypatch.setattr(type(storm.store), "append", fail)
    with pytest.raises(RecordFailed, match="could not be recorded"):
        storm.add_batch("a 1\nb 2 a\n", "lanes.txt")
    getattr(storm.store, "close", lambda: None)()
    monkeypatch.undo()
    assert store.lanes() == ["q"] and len(store.events()) == before
    if queue is not None:
        assert (store.path / "queue.txt").read_bytes() == queue


# -- the grammar ---------------------------------------------------------------

from hypothesis import given, strategies as st  # noqa: E402

WORDS = st.sampled_from(["a", "b", "c", "1", "2", "-", "a,b", "x*", "#", ".h", "\u0663"])
LINES = st.lists(st.lists(WORDS, min_size=0, max_size=4).map(" ".join), max_size=8).map("\n".join)


@given(LINES)
def test_a_batch_reads_lines_as_queue_txt_does(text) -> None:
    """The batch's lanes are queue.txt's; its bad lines are the lines queue.txt skips."""
    found, parsed = batch.shape(text), queuetext.parse(text)
    assert found.lanes == parsed.lanes
    assert [b.line for b in found.bad] == [s.line for s in parsed.skipped]

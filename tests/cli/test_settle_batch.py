"""Batch review (issue 33, item 2): ``settle --finished LEDGER`` settles
every lane finished now, ``settle --from FILE|- LEDGER`` the slugs of
FILE; each all or nothing, one request, on both stores; ``--dry-run``
lists what it would settle and writes nothing."""

from __future__ import annotations

import json

import pytest

from storm_queue.core import review
from tests.conftest import clean_env, run_main
from tests.stores import DirectoryStorm

#: a storm with three lanes finished (awaiting review), one ready, one waiting on a finished one, one settled
QUEUE = "a 1\nb 2\nc 3 a\nd 4\ne 5\nf 6\n"
FINISHED = ("e", "a", "d")  # not in run order: the storm orders them
SETTLED = ("f",)


def answer(done) -> dict:
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def slugs_file(tmp_path, text: str, name: str = "ok.txt") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def made(store) -> None:
    store.make(QUEUE, finished=FINISHED, integrated=SETTLED)


def ledgers(store) -> tuple[list[str], list[str]]:
    return store.settled("integrated"), store.settled("abandoned")


def state(store) -> tuple:
    """Everything a settle could change, as stored: the log's lines, the
    ledgers (a directory's files byte for byte)."""
    files = ()
    if store.kind == "directory":
        files = tuple((p.name, p.read_bytes()) for p in sorted(store.path.iterdir())
                      if p.is_file() and not p.name.endswith(".lock"))  # the writers' lock holds nothing
    return tuple(store.lines()), ledgers(store), files


def test_finished_settles_every_finished_lane_in_run_order_as_one_request(store) -> None:
    made(store)
    before = len(store.events())
    done = store.cli("settle", "--finished", "integrated", "--reason", "reviewed", "--key", "review-1", "--json")
    doc = answer(done)
    assert done.returncode == 0, doc
    assert (doc["outcome"], doc["action"], doc["recorded"], doc["settled"]) == ("done", "settle", True, ["a", "d", "e"])
    assert doc["message"] == "settled 3 lanes as integrated: a d e"
    assert ledgers(store) == (["f", "a", "d", "e"], [])
    events = store.events()[before:]
    assert [(e["action"], e["slug"], e["ledger"], e["reason"]) for e in events] == [
        ("settle", s, "integrated", "reviewed") for s in ("a", "d", "e")]
    assert events[-1]["key"] == "review-1" and all("key" not in e for e in events[:-1])
    assert len({e["at"] for e in events}) == 1  # one request: one time, one append
    rows = {r["slug"]: r["state"] for r in answer(store.cli("list", "--json", "--all"))["rows"] +
            answer(store.cli("list", "--json", "--all"))["settled"]}
    assert rows == {"a": "settled", "b": "ready", "c": "ready", "d": "settled", "e": "settled", "f": "settled"}
    again = answer(store.cli("settle", "--finished", "integrated", "--reason", "reviewed", "--key", "review-1", "--json"))
    assert again["repeat"] == len(store.events()) and len(store.events()) == before + 3


def test_from_a_file_settles_its_slugs_in_its_order(store, tmp_path) -> None:
    made(store)
    before = len(store.events())
    path = slugs_file(tmp_path, "# reviewed today\ne\n\n  a  \n")
    done = store.cli("settle", "--from", path, "abandoned", "--json")
    doc = answer(done)
    assert done.returncode == 0 and doc["settled"] == ["e", "a"], doc
    assert ledgers(store) == (["f"], ["e", "a"])
    assert [(e["action"], e["slug"]) for e in store.events()[before:]] == [("settle", "e"), ("settle", "a")]
    words = store.cli("settle", "--from", slugs_file(tmp_path, "d\n", "d.txt"), "integrated")
    assert (words.returncode, words.stdout) == (0, "settled 1 lane as integrated: d\n")


def test_from_standard_input_with_a_bom_and_crlf(store) -> None:
    made(store)
    done = run_main(["settle", "--from", "-", "integrated", "--json", "--root", store.root], stdin="\ufeffd\r\na\r\n".encode())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["settled"] == ["d", "a"]
    assert ledgers(store) == (["f", "d", "a"], [])


REFUSED = [
    # (the batch, its code, the line it names, words of why)
    ("a\nzzz\nd\n", "unknown_slug", 2, "no lane zzz is queued"),
    ("a\nb\n", "not_finished", 2, "b is not finished: it is ready"),
    ("a\nc\n", "not_finished", 2, "c is not finished: it is waiting"),
    ("d\nf\n", "lane_settled", 2, "f is already integrated"),
    ("a\n../x\n", "invalid_slug", 2, 'slug "../x" is not a name'),
    ("a\nd e\n", "invalid_slug", 2, '"d e" is not one slug'),
    ("a\nd\na\n", "duplicate_slug", 3, "slug a is listed twice: first on line 1"),
]


@pytest.mark.parametrize("text, code, line, why", REFUSED, ids=[r[1] + f"-{n}" for n, r in enumerate(REFUSED)])
def test_one_bad_slug_refuses_the_whole_batch_naming_it_and_settles_nothing(store, tmp_path, text, code, line, why) -> None:
    made(store)
    before, kept = len(store.events()), ledgers(store)
    path = slugs_file(tmp_path, text)
    done = store.cli("settle", "--from", path, "integrated", "--reason", "reviewed", "--json")
    doc = answer(done)
    assert done.returncode == 2, doc
    assert (doc["outcome"], doc["code"], doc["recorded"], doc.get("settled")) == ("refused", code, True, None), doc
    assert f"line {line}: {why}" in doc["message"] and "nothing was settled" in doc["message"], doc["message"]
    assert ledgers(store) == kept  # nothing settled: a and d are still finished
    events = store.events()
    assert len(events) == before + 1
    last = events[-1]
    assert (last["action"], last["requested"], last["code"], last["slug"]) == ("refused", "settle", code, None)
    assert last["message"] == doc["message"] and last["reason"] == "reviewed"
    words = store.cli("settle", "--from", path, "integrated")
    assert words.returncode == 2 and f"refused ({code})" in words.stderr and f"line {line}" in words.stderr
    assert ledgers(store) == kept


@pytest.mark.parametrize("text", ["", "# nothing reviewed yet\n\n"])
def test_an_empty_file_is_refused_and_recorded(store, tmp_path, text) -> None:
    made(store)
    before = len(store.events())
    doc = answer(store.cli("settle", "--from", slugs_file(tmp_path, text), "integrated", "--json"))
    assert (doc["code"], doc["recorded"]) == ("empty_batch", True) and "holds no slug" in doc["message"]
    assert len(store.events()) == before + 1


def test_nothing_finished_is_an_answer_and_records_nothing(store) -> None:
    store.make("a 1\nb 2\n")
    done = store.cli("settle", "--finished", "integrated", "--json")
    doc = answer(done)
    assert done.returncode == 0 and (doc["outcome"], doc["settled"], doc["recorded"]) == ("noop", [], False)
    assert store.events() == [] or [e["action"] for e in store.events()] == ["init"]


@pytest.mark.parametrize("form", ["finished", "from", "from-stdin"])
def test_a_dry_run_lists_what_it_would_settle_and_writes_nothing(store, tmp_path, form) -> None:
    made(store)
    store.cli("bump", "a")
    before = state(store)
    args = {"finished": ["--finished"], "from": ["--from", slugs_file(tmp_path, "d\na\n")],
            "from-stdin": ["--from", "-"]}[form]
    done = run_main(["settle", *args, "integrated", "--dry-run", "--json", "--root", store.root], stdin=b"d\na\n")
    doc = answer(done)
    assert done.returncode == 0, doc
    assert (doc["dry_run"], doc["recorded"], doc["outcome"]) == (True, False, "done")
    assert doc["settled"] == (["a", "d", "e"] if form == "finished" else ["d", "a"])
    assert "b" in doc["order"] and not set(doc["settled"]) & set(doc["order"])
    assert state(store) == before
    words = run_main(["settle", *args, "integrated", "--dry-run", "--root", store.root], stdin=b"d\na\n")
    assert words.stdout.startswith("would settle 3 lanes as integrated: a d e (dry run: nothing recorded)"
                                   if form == "finished" else "would settle 2 lanes as integrated: d a (dry run")
    assert state(store) == before
    refused = run_main(["settle", "--from", "-", "integrated", "--dry-run", "--json", "--root", store.root], stdin=b"b\n")
    bad = answer(refused)
    assert refused.returncode == 2 and (bad["code"], bad["recorded"], bad["dry_run"]) == ("not_finished", False, True)
    assert state(store) == before


def test_a_finished_lane_still_holding_its_lease_needs_force(store) -> None:
    """A finish cut short: result.json written under the live lease, its
    line not recorded. The batch refuses it as a single settle does."""
    store.make("a 1\nb 2\n", finished=("b",), unattended=True)
    claim = store.cli("claim", "--holder", "r1")
    assert claim.stdout.startswith("run a 1 "), claim.stdout
    token = int(claim.stdout.split()[3])
    if store.kind == "directory":
        store.finish(["a"])
        marks = store.path / "lanes" / "a" / ".qwenstorm" / "result.json"
        marks.write_text(json.dumps({"completed": True, "token": token}))
    else:
        from storm_queue.store.postgres import driver

        with driver.connect(store.root) as conn:
            conn.execute("INSERT INTO storm_queue.result (slug, body) VALUES ('a', %s)", (json.dumps({"token": token}),))
    assert review.finished(store.snapshot()) == ("a", "b")
    doc = answer(store.cli("settle", "--finished", "integrated", "--json"))
    assert (doc["code"], doc["recorded"]) == ("lane_running", True) and "a holds a live lease" in doc["message"]
    assert ledgers(store) == ([], [])
    forced = answer(store.cli("settle", "--finished", "integrated", "--force", "--json"))
    assert forced["settled"] == ["a", "b"] and ledgers(store) == (["a", "b"], [])
    assert [e["action"] for e in store.events()[-3:]] == ["expire", "settle", "settle"]


def test_the_caller_is_judged_as_for_settle(store, tmp_path) -> None:
    made(store)
    done = store.cli("settle", "--finished", "integrated", "--json", env=clean_env(STORM_QUEUE_LANE="x"))
    doc = answer(done)
    assert done.returncode == 1 and (doc["code"], doc["recorded"]) == ("lane_process", True)
    assert ledgers(store) == (["f"], [])


@pytest.mark.parametrize("args, words", [
    (("settle", "--finished"), "takes LEDGER"),
    (("settle", "--finished", "bogus"), "not 'bogus'"),
    (("settle", "--finished", "a", "integrated"), "takes LEDGER alone"),
    (("settle", "--finished", "--from", "F", "integrated"), "not both"),
    (("settle", "a"), "settle takes SLUG and LEDGER"),
    (("settle", "--from", "MISSING", "integrated"), "cannot read it"),
])
def test_usage_errors_record_nothing(store, tmp_path, args, words) -> None:
    made(store)
    path = slugs_file(tmp_path, "a\n")
    args = tuple(path if a == "F" else str(tmp_path / "missing.txt") if a == "MISSING" else a for a in args)
    before = store.lines()
    done = store.cli(*args)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert store.lines() == before and ledgers(store) == (["f"], [])


def test_a_batch_whose_record_fails_settles_nothing(store, monkeypatch) -> None:
    """Directory: the ledger is cut back to what it was; database: the
    transaction that inserted the rows is rolled back."""
    from storm_queue.core.errors import AppendFailed, RecordFailed
    from storm_queue.service.storm import Storm

    made(store)
    storm = Storm.find(store.root, env=clean_env())
    before = state(store)

    def fail(*args, **kwargs):
        raise AppendFailed("No space left on device")

    monkeypatch.setattr(type(storm.store), "append", fail)
    with pytest.raises(RecordFailed, match="could not be recorded"):
        storm.settle_batch("integrated")
    getattr(storm.store, "close", lambda: None)()
    monkeypatch.undo()
    assert state(store) == before
    assert storm.settle_batch("integrated").settled == ["a", "d", "e"]


def test_the_quick_path_and_click_answer_the_same(tmp_path) -> None:
    from storm_queue.cli import entry

    command, words = entry.quick_form(["settle", "--from", "-", "integrated"]) or (None, {})
    assert command is not None and (words["from_file"], words["slug"], words["ledger"]) == ("-", "integrated", None)
    answers = []
    for click in (False, True):
        store = DirectoryStorm(tmp_path / str(click))
        made(store)
        done = run_main(["settle", "--from", "-", "integrated", "--root", store.root], stdin=b"a\nd\n", click=click)
        answers.append((done.returncode, done.stdout, done.stderr, ledgers(store)))
    assert answers[0] == answers[1] == (0, "settled 2 lanes as integrated: a d\n", "", (["f", "a", "d"], []))

"""Each store's words for what it did (issue 33, item 11): a push appends
a line to a directory's queue.txt but adds a lane row to a database, and
a database storm's log has no witness: ``log``, ``watch`` and ``verify``
say what each store did and checked, not the other's."""

from __future__ import annotations

import json
import re


def test_a_pushs_log_line_says_where_the_lane_was_queued(store) -> None:
    store.make("a 1\n")
    assert store.cli("push", "b", "2").returncode == 0
    line = store.cli("log").stdout.splitlines()[-1]
    frame = store.cli("watch", "--once").stdout
    if store.kind == "directory":
        assert "push b (issue 2) appended to queue.txt done" in line, line
        assert "appended to queue.txt" in frame
    else:
        assert "push b (issue 2) added as a lane row done" in line, line
        assert "queue.txt" not in line and "added as a lane row" in frame and "queue.txt" not in frame


def test_verify_says_what_it_checked_on_each_store(store) -> None:
    store.make("a 1\nb 2\n")
    for args in (("bump", "b"), ("bump", "a"), ("unbump", "a")):
        assert store.cli(*args).returncode == 0
    text = store.cli("verify").stdout
    assert json.loads(store.cli("verify", "--json").stdout)["sound"] is True
    if store.kind == "directory":
        assert "framing, schema, chain, seq and witness agree" in text, text
        assert "checkpoint: " in text
    else:
        assert "witness agree" not in text and "checkpoint" not in text, text
        assert "framing, schema, chain and seq agree" in text and "keeps no witness" in text
        assert re.search(r"^state row: at line \d+, agrees with the whole replay$", text, re.M), text

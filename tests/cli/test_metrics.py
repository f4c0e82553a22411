"""Issue 34 item 1: ``storm-queue metrics``, the storm's state as OpenMetrics
text, on a directory storm and a database storm alike: well-formed (each
family's ``# TYPE``, ``# UNIT`` where it has one, ``# HELP``, then its
samples; ``# EOF`` last), every pinned name with the values the storm
holds, reading only (no lock, no record, a database reader role suffices),
``--output FILE`` replaced atomically, and counts re-derived from the log
when a checkpoint or state row of an earlier format has none."""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
from pathlib import Path

import pytest

from tests.conftest import make_storm, run_cli, tree
from tests.stores import DatabaseStorm, under_test

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? (\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse(text: str) -> dict[str, dict]:
    """The families of an OpenMetrics text, checked line by line as the
    format asks; ``AssertionError`` at the first line that breaks it."""
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1, text[-200:]
    families: dict[str, dict] = {}
    current = None
    for line in text.splitlines()[:-1]:
        if line.startswith("# "):
            word, name, rest = (line[2:].split(" ", 2) + [""])[:3]
            assert word in ("TYPE", "HELP", "UNIT") and NAME.fullmatch(name), line
            if word == "TYPE":
                assert name not in families, f"{name} twice: families are not interleaved"
                assert rest in ("gauge", "counter", "info", "stateset", "histogram", "summary", "unknown"), line
                current = families[name] = {"type": rest, "samples": {}}
            else:
                assert current is not None and name in families and families[name] is current, line
                assert not current["samples"], f"{word} after a sample: {line}"
                current[word.lower()] = rest
                if word == "UNIT":
                    assert name.endswith("_" + rest), line
            continue
        m = SAMPLE.fullmatch(line)
        assert m and current is not None, line
        sample, labels, value = m.group(1), dict(LABEL.findall(m.group(3) or "")), m.group(4)
        family = next(n for n, f in families.items() if f is current)
        assert sample == family + ("_total" if current["type"] == "counter" else ""), line
        number = float(value)
        assert number >= 0, line
        current["samples"][tuple(sorted(labels.items()))] = number
    return families


def metrics(storm, *args: str) -> dict[str, dict]:
    done = storm.cli("metrics", *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return parse(done.stdout)


def value(families: dict, name: str, **labels: str) -> float:
    """A sample's value, by the sample's name (a counter's ends in ``_total``) and labels."""
    family = name.removesuffix("_total") if name not in families else name
    return families[family]["samples"][tuple(sorted(labels.items()))]


def test_every_pinned_metric_holds_what_the_storm_holds(under_test) -> None:
    s = under_test
    s.make("a 1\nb 2 a\nc 3\nd 4 gone\ne 5\nf 6\n", abandoned=["gone"], integrated=["f"], finished=["e"],
           unattended=True)  # so that the claim leases a lane rather than ask for a review of e
    empty = metrics(s)
    assert value(empty, "storm_queue_log_lines") == (0 if s.kind == "directory" else 1)  # a database's init line
    assert value(empty, "storm_queue_oldest_ready_seconds") > 0  # a and c are ready, since the storm was made
    assert s.cli("bump", "b", "--reason", "outage").returncode == 0
    assert s.cli("bump", "no-such", "--reason", 'a "quoted"\nreason').returncode == 2  # refused, recorded
    assert s.cli("bump", "e").returncode == 0  # finished: a recorded no-op
    assert s.cli("claim", "--holder", "r1").returncode == 0  # leases a (pulled forward for b)
    assert s.cli("halt", "--reason", "disk").returncode == 0
    seen = metrics(s)
    assert seen["storm_queue_lanes"]["type"] == "gauge" and seen["storm_queue_requests"]["type"] == "counter"
    assert seen["storm_queue_oldest_ready_seconds"]["unit"] == "seconds"
    assert all("help" in f and f["help"] for f in seen.values())
    listed = json.loads(s.cli("list", "--all", "--json").stdout)
    states = {}
    for row in listed["rows"] + listed["settled"]:
        states[row["state"]] = states.get(row["state"], 0) + 1
    from storm_queue.core.resolver import STATES

    assert {dict(k)["state"]: v for k, v in seen["storm_queue_lanes"]["samples"].items()} == \
        {state: states.get(state, 0) for state in STATES}  # every state, zeros included
    assert states == {"running": 1, "waiting": 1, "ready": 1, "blocked": 1, "finished": 1, "settled": 1}
    assert value(seen, "storm_queue_prioritised_lanes") == 2  # a (running) and b
    assert value(seen, "storm_queue_halted") == 1
    assert value(seen, "storm_queue_leases") == 1 and value(seen, "storm_queue_orphaned_leases") == 0
    events = s.events()
    assert value(seen, "storm_queue_log_lines") == events[-1]["seq"]
    total = lambda action, outcome: value(seen, "storm_queue_requests_total", action=action, outcome=outcome)  # noqa: E731
    assert (total("bump", "done"), total("bump", "refused"), total("bump", "noop")) == (1, 1, 1)
    assert (total("claim", "done"), total("halt", "done"), total("unbump", "done")) == (1, 1, 0)
    assert sum(seen["storm_queue_requests"]["samples"].values()) == len(events)  # every line, once
    assert value(seen, "storm_queue_oldest_ready_seconds") > 0  # c waits
    assert s.cli("resume", "--reason", "ok").returncode == 0
    assert value(metrics(s), "storm_queue_halted") == 0


def test_no_lane_ready_is_zero_seconds(under_test) -> None:
    s = under_test
    s.make("a 1 b\nb 2 a\n")  # a cycle: nothing is ready
    assert value(metrics(s), "storm_queue_oldest_ready_seconds") == 0


def test_oldest_ready_is_how_long_the_first_ready_lane_has_waited(storm) -> None:
    """On a directory storm, a lane written into queue.txt by hand dates from
    the file's last change (later than the truth, never earlier:
    docs/metrics.md); the figure is the one ``list --json``'s
    ``ready_since`` gives for the lane ready longest."""
    import time

    root = storm("a 1\nb 2 a\n")
    then = time.time() - 1000
    os.utime(root / "queue.txt", (then, then))
    families = parse(run_cli(root, "metrics").stdout)
    assert 1000 <= value(families, "storm_queue_oldest_ready_seconds") < 1010
    rows = json.loads(run_cli(root, "list", "--json").stdout)["rows"]
    assert [r["slug"] for r in rows if r["ready_since"]] == ["a"]


def test_it_reads_only_and_takes_no_lock(storm) -> None:
    root = storm("a 1\nb 2 a\n")
    assert run_cli(root, "bump", "b").returncode == 0
    before = tree(root, times=True)
    with open(root / "priority.log.lock", "a") as held:  # another writer holds the writers' lock
        fcntl.flock(held, fcntl.LOCK_EX)
        done = run_cli(root, "metrics", timeout=20)
    assert done.returncode == 0, done.stderr
    assert tree(root, times=True) == before


@pytest.mark.postgresql
def test_a_database_reader_role_reads_them_while_a_writer_holds_the_lock(pg_server, pg_url, pg_role) -> None:
    s = DatabaseStorm(pg_url)
    s.make("a 1\nb 2 a\n")
    assert s.cli("bump", "b").returncode == 0
    role = pg_role(prefix="watcher")
    assert s.cli("grant", "reader", role).returncode == 0
    lines = len(s.events())
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    with pg_server.admin(conninfo_to_dict(pg_url)["dbname"]) as holder:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")  # a writer holds the storm's lock
        done = run_cli(pg_server.url_as(pg_url, role), "metrics", timeout=30)
        holder.execute("ROLLBACK")
    assert done.returncode == 0, done.stderr
    families = parse(done.stdout)
    assert value(families, "storm_queue_requests_total", action="bump", outcome="done") == 1
    assert len(s.events()) == lines


def test_output_replaces_the_file_atomically(storm, tmp_path: Path) -> None:
    root = storm("a 1\n")
    target = tmp_path / "textfile" / "storm.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    done = run_cli(root, "metrics", "--output", str(target))
    assert (done.returncode, done.stdout) == (0, "")
    timeless = lambda text: [ln for ln in text.splitlines() if not ln.startswith("storm_queue_oldest_ready_seconds ")]  # noqa: E731
    assert timeless(target.read_text()) == timeless(run_cli(root, "metrics").stdout)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # the textfile collector's account reads it
    assert sorted(p.name for p in target.parent.iterdir()) == ["storm.prom"]  # no temporary file left
    missing = run_cli(root, "metrics", "--output", str(tmp_path / "nowhere" / "x.prom"))
    assert missing.returncode == 2 and "--output" in missing.stderr and "nothing was written" in missing.stderr
    assert "Traceback" not in missing.stderr


def _old_checkpoint(path: Path) -> None:
    """Make the checkpoint at ``path`` one an earlier storm-queue wrote: format 5, no counts."""
    body = json.loads(path.read_bytes())
    body["v"] = 5
    del body["records"][body["state"]["@ref"]]["requests"]
    path.write_text(json.dumps(body))


def test_counts_of_a_checkpoint_without_them_are_re_derived(storm, monkeypatch) -> None:
    from storm_queue.store.directory.log import checkpoint

    monkeypatch.setattr(checkpoint, "EVERY", 2)
    root = storm("a 1\nb 2\n")
    for _ in range(3):
        assert run_cli(root, "bump", "a").returncode == 0
        assert run_cli(root, "bump", "zz").returncode == 2
    cp = root / ".priority.log.checkpoint"
    _old_checkpoint(cp)
    families = parse(run_cli(root, "metrics").stdout)
    assert value(families, "storm_queue_requests_total", action="bump", outcome="refused") == 3
    assert value(families, "storm_queue_requests_total", action="bump", outcome="noop") == 0  # re-bumps: done, moving nothing
    assert value(families, "storm_queue_requests_total", action="bump", outcome="done") == 3
    assert run_cli(root, "unbump", "a").returncode == 0  # the next writer writes a checkpoint with the counts
    assert json.loads(cp.read_bytes())["v"] > 5


@pytest.mark.postgresql
def test_counts_of_a_state_row_without_them_are_re_derived(pg_url) -> None:
    s = DatabaseStorm(pg_url)
    s.make("a 1\n")
    for _ in range(3):
        assert s.cli("bump", "zz").returncode == 2
    from storm_queue.core import fold, statebody

    body = json.loads(statebody.dump_state(fold.replay(s.events())))
    body["v"] = 5
    del body["records"][body["state"]["@ref"]]["requests"]
    s._sql("UPDATE storm_queue.state SET body = %s, body_seq = %s, body_digest = %s",
           [(json.dumps(body), len(s.events()), __import__("hashlib").sha256(s.lines()[-1]).hexdigest())])
    families = metrics(s)
    assert value(families, "storm_queue_requests_total", action="bump", outcome="refused") == 3
    assert value(families, "storm_queue_requests_total", action="init", outcome="done") == 1


def test_label_values_and_the_exposition_are_escaped() -> None:
    from storm_queue.core.metrics import Metric, exposition

    text = exposition((Metric("requests", "counter", "", "h", (((("action", 'a"b\\c\nd'), ("outcome", "done")), 2),)),))
    families = parse(text)
    assert families["storm_queue_requests"]["samples"] == {(("action", 'a\\"b\\\\c\\nd'), ("outcome", "done")): 2.0}
    assert text.splitlines()[-2] == 'storm_queue_requests_total{action="a\\"b\\\\c\\nd",outcome="done"} 2'


def test_metrics_says_what_every_reader_says_of_a_torn_tail(storm) -> None:
    """A torn tail is ignored and said (contract, section 4): list and next
    said it, metrics did not. On stderr; stdout is the exposition alone."""
    root = storm("a 1\n")
    assert run_cli(root, "bump", "a").returncode == 0
    with open(root / "priority.log", "ab") as f:
        f.write(b'{"v":1')
    done = run_cli(root, "metrics")
    assert done.returncode == 0 and "torn write of 6 bytes" in done.stderr
    assert "torn" not in done.stdout and parse(done.stdout)

"""``verify`` names the first wrong line (issue 20, item 5): when line N's
content no longer matches the digest line N + 1 chains to, the line named
is N, with its own offset, wherever the lines fall in the audit's blocks."""

from __future__ import annotations

from storm_queue.core import stream
from storm_queue.core.framing import frame
from storm_queue.core.verify import check_lines


def lines(count: int, reason: int) -> list[bytes]:
    bodies = [{"action": "bump", "slug": f"l{n}", "issue": "1", "deps": [], "moved": [f"l{n}"], "removed": [],
               "reason": "r" * reason} for n in range(count)]
    return [line for _, line in frame(bodies, 0, None, "2026-12-02T00:00:00.000000Z", "operator:op")]


def test_the_changed_line_is_named_in_any_block() -> None:
    log = lines(40, stream.BLOCK // 16)  # lines of a sixteenth of a block: the audit reads several blocks
    assert check_lines(log).problem is None
    starts = [sum(len(x) for x in log[:n]) for n in range(len(log))]
    for n in (1, 2, 15, 16, 17, 31, 38):  # line numbers from 1; around the block edges too
        damaged = list(log)
        damaged[n - 1] = damaged[n - 1].replace(b'"reason":"r', b'"reason":"R', 1)
        problem = check_lines(damaged).problem
        assert (problem.line, problem.offset) == (n, starts[n - 1]), (n, problem)
        assert problem.what.startswith(f"line {n} was changed: its content no longer matches the digest line {n + 1}")


def test_a_changed_last_line_breaks_no_chain_and_other_damage_is_named_as_it_was() -> None:
    log = lines(3, 10)
    assert check_lines(log[:2] + [log[2].replace(b"\"reason\":\"r", b"\"reason\":\"R", 1)]).problem is None  # the witness tells
    cut = log[:1] + log[2:]
    problem = check_lines(cut).problem
    assert (problem.line, problem.what) == (2, "line 2 has seq 3, expected 2")

"""Logs as the earlier priority tool wrote them (the format ``storm-queue
adopt`` takes over; see ``storm_queue.store.directory.log.adopted``): one JSON object per
line, keys sorted, ASCII, ``"v": 1``, no ``seq`` and no ``prev``; its witness
``{"log", "length", "at"}``."""

from __future__ import annotations

import json
from pathlib import Path

LOG = "priority.log"
WITNESS = ".priority.log.witness"


def line(action: str, by: str, at: str, **fields) -> bytes:
    """One old line, as the earlier tool wrote it."""
    body = {"v": 1, "action": action, "by": by, "at": at, **fields}
    return (json.dumps(body, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def push(slug, issue, deps, moved, appended, by="operator:alice", at="2026-11-01T10:00:00Z", noop=None, **extra):
    fields = dict(slug=slug, issue=issue, deps=list(deps), moved=list(moved), appended=appended, **extra)
    if noop is not None:
        fields["noop"] = noop
    return line("push", by, at, **fields)


def bump(slug, issue, deps, moved, by="operator:alice", at="2026-11-01T10:00:00Z", noop=None, **extra):
    fields = dict(slug=slug, issue=issue, deps=list(deps), moved=list(moved), **extra)
    if noop is not None:
        fields["noop"] = noop
    return line("bump", by, at, **fields)


def unbump(slug, removed=None, by="operator:alice", at="2026-11-01T10:00:00Z"):
    return line("unbump", by, at, slug=slug, **({} if removed is None else {"removed": list(removed)}))


def refused(requested, slug, authorised, reason, by="account:mallory", at="2026-11-01T10:00:00Z"):
    return line("refused", by, at, requested=requested, slug=slug, authorised=authorised, reason=reason)


def reset(reason, abandons, by="operator:alice", at="2026-11-01T09:00:00Z"):
    return line("reset", by, at, reason=reason, abandons=abandons)


def witness(data: bytes, at: str = "2026-11-02T00:00:00Z", length: int | None = None) -> bytes:
    return (json.dumps({"at": at, "length": len(data) if length is None else length, "log": LOG}) + "\n").encode()


def write(root: Path, lines: list[bytes], with_witness: bool = True, length: int | None = None) -> bytes:
    """Write an old log (and, unless told not to, its witness) into ``root``; return its bytes."""
    data = b"".join(lines)
    (root / LOG).write_bytes(data)
    if with_witness:
        (root / WITNESS).write_bytes(witness(data, length=length))
    return data


#: the queue the sample log ran over
QUEUE = "a 1\nb 2 a\nc 3\nd 4 c\ne 5\nf 6 b,d\ng 7\n"

#: a log with a reset as line 1, refusals, no-ops, bumps pulling dependencies,
#: un-bumps with and without ``removed``, and a source
SAMPLE = [
    reset("the disk moved", 120),
    bump("b", "2", ["a"], ["a", "b"], by="operator:alice", at="2026-11-01T10:05:00Z"),
    refused("bump", "../x;rm", False, "not a name", at="2026-11-01T10:06:00Z"),
    push("e", "5", [], ["e"], False, by="source:bot", at="2026-11-01T10:07:00Z"),
    bump("b", "2", ["a"], [], by="operator:alice", at="2026-11-01T10:08:00Z", noop="b is already prioritised"),
    bump("d", "4", ["c"], ["c", "d"], by="operator:bob", at="2026-11-01T10:09:00Z"),
    refused("unbump", "zz", True, "zz is not prioritised", by="operator:bob", at="2026-11-01T10:10:00Z"),
    unbump("e", ["e"], at="2026-11-01T10:11:00Z"),
    push("g", "7", [], ["g"], True, by="operator:carol", at="2026-11-01T10:12:00Z"),
    unbump("g", at="2026-11-01T10:13:00Z"),
    push("c", "3", [], [], False, by="operator:carol", at="2026-11-01T10:14:00Z", noop="c is already in the lane"),
    bump("f", "6", ["b", "d"], ["f"], by="operator:carol", at="2026-11-01T10:15:00Z"),
]

#: what SAMPLE replays to: the lane in order, each slug with named, by, at and the slug its line asked for
SAMPLE_LANE = [
    ("a", False, "operator:alice", "2026-11-01T10:05:00Z", "b"),
    ("b", True, "operator:alice", "2026-11-01T10:05:00Z", "b"),
    ("c", False, "operator:bob", "2026-11-01T10:09:00Z", "d"),
    ("d", True, "operator:bob", "2026-11-01T10:09:00Z", "d"),
    ("f", True, "operator:carol", "2026-11-01T10:15:00Z", "f"),
]

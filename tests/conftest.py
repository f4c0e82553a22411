"""Shared fixtures: build a storm directory, run the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def make_storm(root: Path, queue: str = "", *, integrated=(), abandoned=(), finished=(), running=(),
               unattended: bool = False, toml: str | None = None) -> Path:
    """Write a storm: queue.txt, the ledgers, result.json and running markers."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "queue.txt").write_text(queue)
    if integrated:
        (root / "integrated.txt").write_text("".join(s + "\n" for s in integrated))
    if abandoned:
        (root / "abandoned.txt").write_text("".join(s + "\n" for s in abandoned))
    for slug in finished:
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "result.json").write_text('{"status": "ok"}\n')
    for slug in running:
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "running").write_text("")
    if unattended:
        (root / "UNATTENDED").write_text("")
    if toml is not None:
        (root / "storm.toml").write_text(toml)
    return root


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli(root: Path | str | None, *args: str, env: dict[str, str] | None = None,
            cwd: Path | str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m storm_queue ARGS --root ROOT`` as a real process."""
    argv = [sys.executable, "-m", "storm_queue", *args]
    if root is not None:
        argv += ["--root", str(root)]
    return subprocess.run(argv, capture_output=True, text=True, env=env or clean_env(), cwd=cwd, timeout=timeout)


def tree(root: Path, times: bool = False) -> dict[str, tuple]:
    """Every path under ``root``: mode, owner, group, size, bytes (None for
    what is not a regular file) and, with ``times``, mtime: to prove a
    command wrote nothing (a writer's flock of the lock file may touch it)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, data) + ((st.st_mtime_ns,) if times else ())
    return out


def log_events(root: Path, name: str = "priority.log") -> list[dict]:
    path = root / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def storm(tmp_path: Path):
    """A factory: ``storm("a 1\\nb 2\\n", integrated=["b"])`` returns the root."""

    def factory(queue: str = "", **kwargs) -> Path:
        return make_storm(tmp_path / "storm", queue, **kwargs)

    return factory


def write_log(root: Path, bodies, at: str = "2026-11-30T00:00:00.000000Z", by: str = "operator:op",
              name: str = "priority.log") -> int:
    """Write a well-formed, witnessed log of ``bodies`` (an iterable of event
    bodies, each with its ``action``) straight to disk, streaming, without
    the request path: for views and benches that need a long history.
    Returns the number of lines written."""
    from storm_queue.log.framing import digest
    from storm_queue.log.writer import frame

    seq, prev, length = 0, None, 0
    with open(root / name, "wb") as f:
        for body in bodies:
            (event, line), = frame([body], seq, prev, at, by)
            f.write(line)
            seq, prev, length = event["seq"], digest(line), length + len(line)
    witness = {"log": name, "length": length, "seq": seq, "digest": prev, "at": at}
    (root / f".{name}.witness").write_text(json.dumps(witness) + "\n")
    return seq

"""One storm under test, kept by either store: the contract tests build it,
ask it, and read its log through this, so the same test runs against a
directory storm and a database storm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import clean_env, log_events, make_storm, run_cli

#: what a database storm cannot hold, so cases that need it run on a directory alone:
#: running markers without a lease (UNATTENDED is the declared [runner] unattended
#: there: DatabaseStorm.make(unattended=True); a hand edit of queue.txt, of the lane
#: rows: DatabaseStorm.edit_queue; tests/database/test_served_cases.py leases the
#: running lanes through the server's claim instead)
DIRECTORY_ONLY = ("running",)


class _Either:
    """What reads the same on either store: through the library's own Storm."""

    root: str
    #: where a runner on this host keeps each lane's work directory (RUNNER_LANES)
    lanes_dir: Path

    def snapshot(self):
        """The storm as the request path reads it now (lanes, ledgers, the
        state as stored), a ``lane.Snapshot``."""
        from storm_queue.service.storm import Storm

        storm = Storm.find(self.root, env=clean_env())
        try:
            return storm.store.snapshot(storm.store.read(storm.declaration()))
        finally:
            getattr(storm, "close", lambda: None)()

    def replayed(self):
        """The lane state a replay of every event from line 1 folds to."""
        from storm_queue.core import fold

        return fold.replay(self.events())

    def equals_its_derivation(self) -> bool:
        """Whether the stored state is the full replay, and its lane the
        derivation of its named set (contract: the lane equals its derivation)."""
        from storm_queue.core.lane import derive

        snap = self.snapshot()
        return snap.state == self.replayed() and snap.state.lane == derive(snap, snap.state.named)


class DirectoryStorm(_Either):
    kind = "directory"

    def __init__(self, tmp_path: Path):
        self.path = tmp_path / "storm"
        self.root: str = str(self.path)
        self.lanes_dir = self.path / "lanes"

    def make(self, queue: str, integrated=(), abandoned=(), finished=(), toml: str | None = None,
             unattended: bool = False) -> None:
        """queue.txt, the ledgers, result.json files, storm.toml, and the UNATTENDED file."""
        make_storm(self.path, queue, integrated=integrated, abandoned=abandoned, finished=finished, toml=toml,
                   unattended=unattended)

    def edit_queue(self, queue: str) -> None:
        """queue.txt replaced by hand."""
        (self.path / "queue.txt").write_text(queue)

    def declare(self, toml: str) -> None:
        """storm.toml replaced by hand (no ``declare`` request: any text, a broken one too)."""
        (self.path / "storm.toml").write_text(toml)

    def settle(self, slugs) -> None:
        with open(self.path / "integrated.txt", "a") as f:
            f.writelines(s + "\n" for s in slugs)

    def finish(self, slugs) -> None:
        for slug in slugs:
            marks = self.path / "lanes" / slug / ".qwenstorm"
            marks.mkdir(parents=True, exist_ok=True)
            (marks / "result.json").write_text("{}\n")

    def events(self) -> list[dict]:
        return log_events(self.path)

    def lines(self) -> list[bytes]:
        """Every log line as stored, newline included."""
        path = self.path / "priority.log"
        return path.read_bytes().splitlines(keepends=True) if path.exists() else []

    def lanes(self) -> list[str]:
        from storm_queue.store.directory.queuefile import read

        return [lane.slug for lane in read(str(self.path / "queue.txt")).lanes]

    def result(self, slug: str):
        """What a finish recorded for SLUG (its result.json), or None."""
        path = self.path / "lanes" / slug / ".qwenstorm" / "result.json"
        return json.loads(path.read_text()) if path.exists() else None

    def settled(self, ledger: str = "integrated") -> list[str]:
        """The slugs of LEDGER ("integrated" or "abandoned"), in the order written."""
        path = self.path / f"{ledger}.txt"
        return path.read_text().split() if path.exists() else []

    def cli(self, *args: str, env=None, timeout: float = 60, process: bool = False):
        """``storm-queue ARGS`` on this storm (``conftest.run_cli``: in this process unless ``process``)."""
        return run_cli(self.root, *args, env=env, timeout=timeout, process=process)


class DatabaseStorm(_Either):
    """A storm in a fresh database, its rows written as the operator's role
    would write them (lanes in order, settled, results)."""

    kind = "database"

    def __init__(self, url: str, lanes_dir: Path | None = None):
        self.root = url
        self.lanes_dir = lanes_dir if lanes_dir is not None else Path("lanes").resolve()

    def _sql(self, sql: str, rows) -> None:
        from storm_queue.store.postgres import driver

        with driver.connect(self.root) as conn, conn.cursor() as cur:
            cur.executemany(sql, rows)

    def make(self, queue: str, integrated=(), abandoned=(), finished=(), toml: str | None = None,
             unattended: bool = False) -> None:
        """The storm's rows; ``unattended`` is the declared ``[runner] unattended``
        (a database storm's UNATTENDED), added to ``toml``."""
        from storm_queue.core.queuetext import parse

        if unattended:
            toml = toml or ""
            toml = (toml.replace("[runner]\n", "[runner]\nunattended = true\n", 1) if "[runner]\n" in toml
                    else toml + "\n[runner]\nunattended = true\n")

        done = run_cli(None, "init", self.root)
        assert done.returncode == 0, done.stderr
        self._sql("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)",
                  [(lane.slug, lane.issue, list(lane.deps)) for lane in parse(queue).lanes])
        self._sql("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, 'then')",
                  [(s, "integrated") for s in integrated] + [(s, "abandoned") for s in abandoned])
        self.finish(finished)
        if toml is not None:
            self.declare(toml)

    def declare(self, toml: str) -> None:
        """The storm row's declaration replaced by hand, as declare records
        it (the text, and the runner policy the server serves runners by:
        none for a text that cannot be read), without a ``declare`` request:
        any text, a broken one too."""
        from storm_queue.store.postgres.driver import Jsonb

        from storm_queue.store.postgres.policy import policy

        found = policy(toml)
        self._sql("UPDATE storm_queue.storm SET declaration = %s, runner = %s, "
                  "runner_for = encode(sha256(convert_to(%s, 'UTF8')), 'hex')",
                  [(toml, None if found is None else Jsonb(found), toml)])

    def edit_queue(self, queue: str) -> None:
        """The lane rows edited by hand to be ``queue`` (a queue.txt's text):
        a lane it keeps keeps its row and place, its issue and dependencies
        made the text's; one it drops is deleted; a new one is appended."""
        from storm_queue.core.queuetext import parse

        lanes = parse(queue).lanes
        self._sql("DELETE FROM storm_queue.lane WHERE NOT slug = ANY(%s)", [([lane.slug for lane in lanes],)])
        self._sql("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s) "
                  "ON CONFLICT (slug) DO UPDATE SET issue = EXCLUDED.issue, deps = EXCLUDED.deps",
                  [(lane.slug, lane.issue, list(lane.deps)) for lane in lanes])

    def settle(self, slugs) -> None:
        self._sql("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, 'integrated', 'then')", [(s,) for s in slugs])

    def finish(self, slugs) -> None:
        self._sql("INSERT INTO storm_queue.result (slug, body) VALUES (%s, '{}')", [(s,) for s in slugs])

    def events(self) -> list[dict]:
        from storm_queue.store.postgres import driver

        with driver.connect(self.root) as conn:
            rows = conn.execute("SELECT line FROM storm_queue.event ORDER BY seq").fetchall()
        return [json.loads(bytes(r[0])) for r in rows]

    def lines(self) -> list[bytes]:
        """Every log line as stored, newline included."""
        from storm_queue.store.postgres import driver

        with driver.connect(self.root) as conn:
            return [bytes(r[0]) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq").fetchall()]

    def lanes(self) -> list[str]:
        from storm_queue.store.postgres import driver

        with driver.connect(self.root) as conn:
            return [r[0] for r in conn.execute("SELECT slug FROM storm_queue.lane ORDER BY pos").fetchall()]

    def result(self, slug: str):
        """What a finish recorded for SLUG (its result row), or None."""
        from storm_queue.store.postgres import driver

        with driver.connect(self.root) as conn:
            row = conn.execute("SELECT body FROM storm_queue.result WHERE slug = %s", (slug,)).fetchone()
        return None if row is None else row[0]

    def settled(self, ledger: str = "integrated") -> list[str]:
        """The slugs of LEDGER ("integrated" or "abandoned"), in the order written."""
        from storm_queue.store.postgres import driver

        with driver.connect(self.root) as conn:
            return [r[0] for r in conn.execute("SELECT slug FROM storm_queue.settled WHERE ledger = %s ORDER BY ver",
                                               (ledger,))]

    def cli(self, *args: str, env=None, timeout: float = 60, process: bool = False):
        """``storm-queue ARGS`` on this storm (``conftest.run_cli``: in this process unless ``process``)."""
        return run_cli(self.root, *args, env=env, timeout=timeout, process=process)


def open_store(kind: str, request, tmp_path: Path):
    """A fresh, empty storm of KIND ("directory": under TMP_PATH, not yet
    made; "database": a fresh database on the session's throwaway server,
    through the ``pg_url`` fixture), for REQUEST's test."""
    if kind == "directory":
        return DirectoryStorm(tmp_path)
    return DatabaseStorm(request.getfixturevalue("pg_url"), tmp_path / "lanes")


@pytest.fixture(params=["directory", pytest.param("database", marks=pytest.mark.postgresql)])
def under_test(request, tmp_path: Path):
    """A storm of each store in turn, made by the test (a module takes it with
    ``from tests.stores import under_test``)."""
    return DirectoryStorm(tmp_path) if request.param == "directory" else DatabaseStorm(request.getfixturevalue("pg_url"))


def doc(storm, *args: str, code: int = 0) -> dict:
    """``storm-queue ARGS --json`` on ``storm``: its document, once it exited ``code``."""
    done = storm.cli(*args, "--json")
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)

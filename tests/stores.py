"""One storm under test, kept by either store: the contract tests build it,
ask it, and read its log through this, so the same test runs against a
directory storm and a database storm."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import log_events, make_storm, run_cli

#: what a database storm cannot hold, so cases that need it run on a directory alone:
#: running markers without a lease, UNATTENDED, and hand edits of queue.txt
DIRECTORY_ONLY = ("running", "unattended", "edit_queue")


class DirectoryStorm:
    kind = "directory"

    def __init__(self, tmp_path: Path):
        self.path = tmp_path / "storm"
        self.root: str = str(self.path)

    def make(self, queue: str, integrated=(), abandoned=(), finished=(), toml: str | None = None) -> None:
        make_storm(self.path, queue, integrated=integrated, abandoned=abandoned, finished=finished, toml=toml)

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

    def lanes(self) -> list[str]:
        from storm_queue.queuefile import read

        return [lane.slug for lane in read(str(self.path / "queue.txt")).lanes]

    def cli(self, *args: str, env=None):
        return run_cli(self.root, *args, env=env)


class DatabaseStorm:
    """A storm in a fresh database, its rows written as the operator's role
    would write them (lanes in order, settled, results)."""

    kind = "database"

    def __init__(self, url: str):
        self.root = url

    def _sql(self, sql: str, rows) -> None:
        import psycopg

        with psycopg.connect(self.root, autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany(sql, rows)

    def make(self, queue: str, integrated=(), abandoned=(), finished=(), toml: str | None = None) -> None:
        from storm_queue.queuefile import parse

        done = run_cli(None, "init", self.root)
        assert done.returncode == 0, done.stderr
        self._sql("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES (%s, %s, %s)",
                  [(lane.slug, lane.issue, list(lane.deps)) for lane in parse(queue).lanes])
        self._sql("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, %s, 'then')",
                  [(s, "integrated") for s in integrated] + [(s, "abandoned") for s in abandoned])
        self.finish(finished)
        if toml is not None:
            self._sql("UPDATE storm_queue.storm SET declaration = %s", [(toml,)])

    def settle(self, slugs) -> None:
        self._sql("INSERT INTO storm_queue.settled (slug, ledger, at) VALUES (%s, 'integrated', 'then')", [(s,) for s in slugs])

    def finish(self, slugs) -> None:
        self._sql("INSERT INTO storm_queue.result (slug, body) VALUES (%s, '{}')", [(s,) for s in slugs])

    def events(self) -> list[dict]:
        import psycopg

        with psycopg.connect(self.root, autocommit=True) as conn:
            rows = conn.execute("SELECT line FROM storm_queue.event ORDER BY seq").fetchall()
        return [json.loads(bytes(r[0])) for r in rows]

    def lanes(self) -> list[str]:
        import psycopg

        with psycopg.connect(self.root, autocommit=True) as conn:
            return [r[0] for r in conn.execute("SELECT slug FROM storm_queue.lane ORDER BY pos").fetchall()]

    def cli(self, *args: str, env=None):
        return run_cli(self.root, *args, env=env)

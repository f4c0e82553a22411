"""Plant single changes in the served decision, one at a time, and say
which test caught each (issue 31, item 3). Not collected by pytest.

    .venv/bin/python tests/mutants/plant.py [--only NAME ...] [--sql-dir DIR] [--list] [--workers N]

The changes are data: tests/mutants/mutations.toml (its header says the
fields). For each, this script replaces its ``old`` text with its ``new``
in the .sql file that holds the function's current definition, runs the
named tests (which build every storm from the .sql files on disk), and
puts the file back byte for byte, before the next one and whatever happens
(an error, Ctrl-C, SIGTERM, a timeout). First it checks every change
applies (its text found as often as it says) and that the tests pass with
nothing planted. Then it prints a table, mutation and the test that caught
it, or MISSED; the exit code is 0 when every one was caught, 1 when one was
missed (or the tests fail with nothing planted), 2 for a list that does
not apply.

The tests run under the ``mutants`` Hypothesis profile (tests/conftest.py):
the full run's examples, in a fixed order (derandomized), not shrunk, and
no example database, so a run is repeatable and no failing example is kept
to be replayed by a later run. Once the server's functions live one per
file (store/postgres/sql/functions/NAME.sql), ``--sql-dir`` points there:
a mutation is then looked for in DIR/<function>.sql first.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIST = Path(__file__).resolve().with_name("mutations.toml")


@dataclass(frozen=True)
class Mutation:
    name: str
    description: str
    file: Path
    function: str
    old: str
    new: str
    count: int
    tests: tuple[str, ...]


class Stop(Exception):
    """SIGTERM or SIGHUP: stop, putting the file back first."""


def load(path: Path, sql_dir: Path | None) -> tuple[list[Mutation], list[str]]:
    """The mutations of ``path``, each pointed at the file that holds its
    text, and the problems found (a field missing, a text not found as often
    as it says): nothing is planted while there is one."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    default = tuple(doc.get("tests", ()))
    found: list[Mutation] = []
    problems: list[str] = []
    for n, raw in enumerate(doc.get("mutation", []), 1):
        missing = [k for k in ("name", "description", "file", "function", "old", "new") if not raw.get(k)]
        if missing:
            problems.append(f"mutation {n} ({raw.get('name', '?')}): no {', '.join(missing)}")
            continue
        count = int(raw.get("count", 1))
        places = ([sql_dir / f"{raw['function']}.sql"] if sql_dir else []) + [REPO / raw["file"]]
        where = [p for p in places if p.is_file() and p.read_text(encoding="utf-8").count(raw["old"]) == count]
        if not where:
            seen = ", ".join(f"{p.relative_to(REPO) if p.is_relative_to(REPO) else p}: "
                             f"{p.read_text(encoding='utf-8').count(raw['old']) if p.is_file() else 'no such file'}"
                             for p in places)
            problems.append(f"{raw['name']}: its old text is not found {count} time(s) ({seen}); point `file` (or "
                            f"--sql-dir) at the file that defines {raw['function']} now")
            continue
        if raw["old"] == raw["new"]:
            problems.append(f"{raw['name']}: old and new are the same text")
            continue
        found.append(Mutation(raw["name"], raw["description"], where[0], raw["function"], raw["old"], raw["new"],
                              count, tuple(raw.get("tests", default))))
    if not found and not problems:
        problems.append(f"{path} lists no mutation")
    return found, problems


def run_tests(tests: tuple[str, ...], workers: int, timeout: float, scratch: Path) -> tuple[str, list[tuple[str, str]]]:
    """Run ``tests`` (pytest, the ``mutants`` profile, in ``scratch`` so
    Hypothesis keeps nothing in the repository); the outcome (``passed``,
    ``failed``, ``timeout``, ``error``) and each failed test with its report."""
    report = scratch / "junit.xml"
    report.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hypothesis-profile", "mutants",
            f"--junitxml={report}", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"),
            *(["-n", str(workers)] if workers > 1 else []), *[str(REPO / t) for t in tests]]
    child = subprocess.Popen(argv, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(child)
        return "timeout", []
    except BaseException:
        _end(child)
        raise
    if not report.exists():
        return "error", [("pytest", out[-2000:])]
    failed = []
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = case.find("failure")
        bad = bad if bad is not None else case.find("error")
        if bad is not None:
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            failed.append((name, (bad.get("message") or "") + "\n" + (bad.text or "")))
    if child.returncode == 0:
        return "passed", failed
    return ("failed" if failed else "error"), failed or [("pytest", out[-2000:])]


def _end(child: subprocess.Popen) -> None:
    """End the test run this script started (its own session: pytest, its workers, its PostgreSQL)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            continue


def caught_by(failed: list[tuple[str, str]]) -> str:
    """The tests that failed, in words: the twin test with the edge (or a
    drawn example) that failed, the served cases by name."""
    words = []
    cases = [name.split("[", 1)[1].rstrip("]") for name, _ in failed if "[" in name and "served_cases" in name]
    for name, text in failed:
        if "served_cases" in name:
            continue
        edge = next((note[len("edge:"):].strip() for note in map(_reported, text.splitlines())
                     if note.startswith("edge:")), None)
        module, test = name.split("::", 1)
        label = f"{module}::{test if len(test) <= 40 else test[:39] + '…'}"
        if edge:
            label += f" (edge: {edge})" if not edge.startswith("none") else " (a drawn example)"
        words.append(label)
    if cases:
        words.append(f"test_served_cases: {len(cases)} case(s), first: {cases[0]}")
    return "; ".join(words)


def _reported(line: str) -> str:
    """A line of a failure's report without pytest's ``E`` margin (a note the test made)."""
    line = line.strip()
    return line[1:].strip() if line.startswith("E ") else line


def planted(m: Mutation, text: str) -> str:
    return text.replace(m.old, m.new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--list", dest="list_path", type=Path, default=LIST, help="the mutations (default: %(default)s)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="plant only these mutations")
    ap.add_argument("--sql-dir", type=Path, help="a folder of one .sql file per function (NAME.sql), looked in first")
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per run (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds one run of the tests may take")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run with nothing planted")
    ap.add_argument("--dry-run", action="store_true", help="check that every mutation applies; plant nothing")
    args = ap.parse_args(argv)

    mutations, problems = load(args.list_path, args.sql_dir.resolve() if args.sql_dir else None)
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutations})
        problems += [f"--only {name}: no such mutation (or it does not apply)" for name in unknown]
        mutations = [m for m in mutations if m.name in args.only]
    if problems:
        print("the mutation list does not apply; nothing was planted:", *problems, sep="\n  ", file=sys.stderr)
        return 2
    if args.dry_run:
        for m in mutations:
            print(f"{m.name}: {m.file.relative_to(REPO)} ({m.function}), {m.count} place(s)")
        return 0

    def stop(signum, frame):
        raise Stop(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        if not args.no_baseline:
            groups = sorted({m.tests for m in mutations})
            for tests in groups:
                outcome, failed = run_tests(tests, args.workers, args.timeout, Path(scratch))
                if outcome != "passed":
                    print(f"with nothing planted the tests do not pass ({outcome}): {caught_by(failed)}", file=sys.stderr)
                    for _, text in failed[:1]:
                        print(text[-3000:], file=sys.stderr)
                    return 1
            print("nothing planted: the tests pass", flush=True)
        for m in mutations:
            original = m.file.read_bytes()
            try:
                m.file.write_text(planted(m, original.decode("utf-8")), encoding="utf-8")
                outcome, failed = run_tests(m.tests, args.workers, args.timeout, Path(scratch))
            finally:
                m.file.write_bytes(original)
                assert m.file.read_bytes() == original, f"{m.file} was not put back"
            if outcome == "failed":
                verdict = caught_by(failed)
            elif outcome == "passed":
                verdict = "MISSED"
            else:
                verdict = f"MISSED? the tests did not run to the end ({outcome}): {caught_by(failed)[:200]}"
            rows.append((m.name, m.description, verdict))
            print(f"{m.name}: {verdict}", flush=True)
    print()
    print("| mutation | what it breaks | caught by |")
    print("|---|---|---|")
    for name, description, verdict in rows:
        print(f"| {name} | {description} | {verdict} |")
    missed = [name for name, _, verdict in rows if verdict.startswith("MISSED")]
    print(f"\n{len(rows) - len(missed)} of {len(rows)} caught" + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Stop as exc:
        print(f"stopped by {exc}; every file planted in was put back", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted; every file planted in was put back", file=sys.stderr)
        sys.exit(130)

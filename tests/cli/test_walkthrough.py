"""The README's "Your first storm", done as a newcomer does it: every
``sh`` block of the section in order, in one shell session (its variables
and working directory carried from block to block), from the checkout,
with an empty home; the ``storm.toml`` change it asks for; its crontab
line run as cron runs it (``/bin/sh``, a bare PATH, ``\\%`` unescaped); and
every ``text`` block it shows is what the commands printed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO, clean_env, log_events

README = (REPO / "README.md").read_text()
SECTION = README.split("\n## Your first storm\n", 1)[1].split("\n## ", 1)[0]
SHOWN_HOME = "/home/alice"


def steps() -> list[tuple[str, str]]:
    """The section's fenced blocks, in order: (language, body)."""
    return re.findall(r"^```(\w+)\n(.*?)^```$", SECTION, re.M | re.S)


def shim(home: Path) -> Path:
    """``storm-queue`` where the README's crontab line looks for it
    (``~/storm-queue/.venv/bin``), running this checkout's code."""
    bin_dir = home / "storm-queue" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "storm-queue"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(REPO))} exec {shlex.quote(sys.executable)} -m storm_queue \"$@\"\n")
    script.chmod(0o755)
    return bin_dir


class Shell:
    """One interactive shell's state across separate bash runs."""

    def __init__(self, home: Path, bin_dir: Path, state: Path):
        self.env = clean_env(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        for name in ("RUNNER_POLL", "RUNNER_LOG", "LANE_COMMAND", "STORM_QUEUE", "NO_COLOR"):
            self.env.pop(name, None)
        self.state = state
        state.write_text(f"cd {shlex.quote(str(REPO))}\n")

    def run(self, block: str) -> subprocess.CompletedProcess:
        program = (f"set -euo pipefail\nsource {shlex.quote(str(self.state))}\n{block}\n"
                   f'{{ export -p; printf "cd %q\\n" "$PWD"; }} > {shlex.quote(str(self.state))}\n')
        return subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                              env=self.env, timeout=120)


def as_cron_runs(line: str, home: Path) -> subprocess.CompletedProcess:
    """A crontab line's command, as cron runs it: its five time fields
    dropped, ``\\%`` made ``%`` (a bare ``%`` would end the command), by
    /bin/sh with HOME and a bare PATH."""
    fields = line.split(None, 5)
    assert len(fields) == 6 and all(re.fullmatch(r"[0-9*/,-]+", f) for f in fields[:5]), line
    command = fields[5]
    assert not re.search(r"(?<!\\)%", command), "a bare % in a crontab line is a newline"
    command = command.replace("\\%", "%")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", "LOGNAME": "alice"}
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, env=env, timeout=60)


def shown(text: str, home: Path) -> list[str]:
    return text.replace(SHOWN_HOME, str(home)).splitlines()


def contains(lines: list[str], part: list[str]) -> bool:
    return any(lines[i:i + len(part)] == part for i in range(len(lines) - len(part) + 1))


def test_the_readme_walkthrough_works_from_an_empty_home(tmp_path):
    """Real shells (bash, and cron's sh) calling the installed command."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = shim(home)
    shell = Shell(home, bin_dir, tmp_path / "shell-state")
    root = home / "storms" / "first"
    kinds = [kind for kind, _ in steps()]
    assert kinds.count("sh") >= 5 and "toml" in kinds and "crontab" in kinds, kinds
    said = None
    crontab_done = False
    for kind, body in steps():
        if kind == "sh":
            said = shell.run(body)
            assert said.returncode == 0, (body, said.stdout, said.stderr)
        elif kind == "text":
            assert said is not None, "a text block before any command"
            want = shown(body.rstrip("\n"), home)
            assert contains(said.stdout.splitlines(), want) or contains(said.stderr.splitlines(), want), (
                f"the README shows\n{body}\nbut the commands printed\n{said.stdout}\n{said.stderr}")
        elif kind == "toml":
            declared = tomllib.loads(body)["priority"]["sources"]
            toml = root / "storm.toml"
            text = toml.read_text()
            assert "\n[priority]\n" in "\n" + text, "the README says to edit the [priority] table init wrote"
            line = next(line for line in body.splitlines() if line.startswith("sources"))
            edited, n = re.subn(r"^# sources = .*$", line, text, count=1, flags=re.M)
            assert n == 1, "init's storm.toml has no commented sources line under [priority] to make read as told"
            toml.write_text(edited)
            assert tomllib.loads(edited)["priority"]["sources"] == declared == ["nightly-triage"]
        elif kind == "crontab":
            (line,) = [line for line in body.splitlines() if line.strip() and not line.startswith("#")]
            before = len(log_events(root))
            first = as_cron_runs(line, home)
            assert first.returncode == 0, (first.stdout, first.stderr)
            assert first.stdout.startswith("docs is prioritised"), first.stdout
            event = log_events(root)[-1]
            assert (event["action"], event["slug"], event["by"]) == ("bump", "docs", "source:nightly-triage")
            assert event["key"].startswith("nightly-") and event["reason"] == "nightly triage"
            again = as_cron_runs(line, home)  # cron, or a wrapper, running it twice the same day
            assert again.returncode == 0, (again.stdout, again.stderr)
            assert "a repeat of line" in again.stdout
            assert len(log_events(root)) == before + 1
            crontab_done = True
        else:
            raise AssertionError(f"a ```{kind} block the walkthrough test does not know how to check")
    assert crontab_done
    # the runner ran every lane to its end and settled it
    assert (root / "integrated.txt").read_text().split() == ["schema", "api", "billing", "docs"]
    listing = subprocess.run([str(bin_dir / "storm-queue"), "list", "--json", "--root", str(root)],
                             capture_output=True, text=True, env=clean_env(), timeout=60)
    assert json.loads(listing.stdout)["decision"] == "empty"


def test_the_walkthrough_starts_from_nothing_and_names_its_options():
    """init first; the crontab line carries --root, --source and --key."""
    blocks = steps()
    assert blocks[0][0] == "sh" and "storm-queue init" in blocks[0][1]
    (cron,) = [body for kind, body in blocks if kind == "crontab"]
    for option in ("--root", "--source", "--key"):
        assert option in cron
    runner = [body for kind, body in blocks if kind == "sh" and "examples/runner.sh" in body]
    assert runner and "--once" in runner[0]
    assert "### Shell completion" in SECTION

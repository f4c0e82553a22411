"""Shell completion: click's protocol run as a real process completes
commands, options and the slugs queue.txt carries; the scripts source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storm_queue.cli import main
from tests.conftest import clean_env, make_storm, run_cli

QUEUE = "schema 12\napi 13 schema\nauth 14\n../bad 15\nbilling 17 auth,api\n"
COMMANDS = sorted(main.commands)


def complete(words: str, shell: str = "bash", cwd: Path | None = None, **env: str) -> list[str]:
    """What ``storm-queue`` offers for the command line ``words`` (the word
    being completed is the last, possibly empty)."""
    argv = words.split(" ")
    cword = argv[-1] if shell == "fish" else str(len(argv) - 1)  # fish passes the word itself
    environ = clean_env(_STORM_QUEUE_COMPLETE=f"{shell}_complete", COMP_WORDS=words, COMP_CWORD=cword, **env)
    ran = subprocess.run([sys.executable, "-m", "storm_queue"], capture_output=True, text=True,
                         env=environ, cwd=cwd, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""
    lines = [line for line in ran.stdout.splitlines() if line]
    if shell == "zsh":  # type, value, help: three lines each
        return [lines[i + 1] for i in range(0, len(lines), 3)]
    return [line.split(",", 1)[1].split("\t")[0] for line in lines]  # bash: type,value; fish: type,value\thelp


@pytest.fixture
def storm(tmp_path) -> Path:
    return make_storm(tmp_path / "s", QUEUE)


def test_commands_and_options_complete(tmp_path):
    assert len(COMMANDS) >= 11 and {"init", "doctor", "completion", "bump"} <= set(COMMANDS)
    assert complete("storm-queue ", cwd=tmp_path) == COMMANDS
    assert complete("storm-queue un", cwd=tmp_path) == ["unbump", "unpark"]
    assert complete("storm-queue bump --r", cwd=tmp_path) == ["--reason", "--root"]
    assert complete("storm-queue completion ", cwd=tmp_path) == ["bash", "zsh", "fish"]


def test_slugs_complete_from_the_storm_found_as_every_command_finds_it(storm, tmp_path):
    assert complete("storm-queue bump ", cwd=storm) == ["schema", "api", "auth", "billing"]
    assert complete("storm-queue unbump a", cwd=storm / "..") == []  # no storm above tmp_path
    assert complete("storm-queue unbump a", cwd=storm) == ["api", "auth"]
    assert complete("storm-queue bump --root " + str(storm) + " b", cwd=tmp_path) == ["billing"]
    assert complete("storm-queue push s", cwd=tmp_path, STORM_QUEUE_ROOT=str(storm)) == ["schema"]
    assert complete("storm-queue why b", cwd=storm) == ["billing"]
    assert complete("storm-queue log --slug a", cwd=storm) == ["api", "auth"]


def test_deps_complete_the_last_name(storm):
    assert complete("storm-queue push z 26 --deps ", cwd=storm) == ["schema", "api", "auth", "billing"]
    assert complete("storm-queue push z 26 --deps api,", cwd=storm) == ["api,schema", "api,auth", "api,billing"]
    assert complete("storm-queue push z 26 --deps api,au", cwd=storm) == ["api,auth"]


def test_zsh_and_fish_get_the_same_slugs(storm):
    for shell in ("zsh", "fish"):
        assert complete("storm-queue bump ", shell=shell, cwd=storm) == ["schema", "api", "auth", "billing"], shell
        assert "unbump" in complete("storm-queue ", shell=shell, cwd=storm)


def test_no_storm_or_an_unreadable_queue_offers_nothing_without_a_traceback(tmp_path):
    assert complete("storm-queue bump ", cwd=tmp_path) == []
    (tmp_path / "queue.txt").mkdir()  # a queue.txt that cannot be read
    assert complete("storm-queue bump ", cwd=tmp_path) == []


@pytest.mark.parametrize("shell,marker", [
    ("bash", "complete -o nosort -F _storm_queue_completion storm-queue"),
    ("zsh", "compdef _storm_queue_completion storm-queue"),
    ("fish", "complete --no-files --command storm-queue"),
])
def test_completion_prints_the_script(shell, marker):
    ran = run_cli(None, "completion", shell)
    assert ran.returncode == 0, ran.stderr
    assert marker in ran.stdout and "_STORM_QUEUE_COMPLETE" in ran.stdout


def test_an_unknown_shell_is_a_usage_error():
    ran = run_cli(None, "completion", "tcsh")
    assert ran.returncode == 2 and "tcsh" in ran.stderr


def test_bash_sources_the_script_and_completes_slugs(storm):
    """The real thing: bash sources the printed script and runs its function."""
    script = run_cli(None, "completion", "bash").stdout
    bin_dir = os.path.dirname(sys.executable)
    assert os.access(os.path.join(bin_dir, "storm-queue"), os.X_OK), "the storm-queue console script is installed beside python"
    program = script + '\nCOMP_WORDS=(storm-queue bump "")\nCOMP_CWORD=2\n_storm_queue_completion storm-queue\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    env = clean_env(PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    ran = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         env=env, cwd=storm, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["schema", "api", "auth", "billing"]

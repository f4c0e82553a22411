"""Shell completion: click's protocol run as a real process completes
commands, options and the slugs queue.txt carries; the scripts source."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from storm_queue.cli.app import main
from tests.conftest import REPO, clean_env, make_storm, run_cli, run_main

QUEUE = "schema 12\napi 13 schema\nauth 14\n../bad 15\nbilling 17 auth,api\n"
COMMANDS = sorted(main.commands)


def complete(words: str, shell: str = "bash", cwd: Path | None = None, **env: str) -> list[str]:
    """What ``storm-queue`` offers for the command line ``words`` (the word
    being completed is the last, possibly empty)."""
    argv = words.split(" ")
    cword = argv[-1] if shell == "fish" else str(len(argv) - 1)  # fish passes the word itself
    environ = clean_env(_STORM_QUEUE_COMPLETE=f"{shell}_complete", COMP_WORDS=words, COMP_CWORD=cword, **env)
    ran = run_main([], env=environ, cwd=cwd)
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
    assert complete("storm-queue un", cwd=tmp_path) == ["unbump", "unhold", "unpark"]
    assert complete("storm-queue bump --r", cwd=tmp_path) == ["--reason", "--reason-file", "--root"]
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
    """The real thing: bash sources the printed script and runs its function.
    A real shell, calling the installed command."""
    script = run_cli(None, "completion", "bash").stdout
    bin_dir = os.path.dirname(sys.executable)
    assert os.access(os.path.join(bin_dir, "storm-queue"), os.X_OK), "the storm-queue console script is installed beside python"
    program = script + '\nCOMP_WORDS=(storm-queue bump "")\nCOMP_CWORD=2\n_storm_queue_completion storm-queue\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    env = clean_env(PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    ran = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         env=env, cwd=storm, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["schema", "api", "auth", "billing"]


# issue 13 item 11: one set of instructions, true for bash, zsh and fish

COMMAND_LINES = ("eval ", "autoload ", "mkdir ", "storm-queue completion ")


def instructions(text: str) -> dict[str, list[str]]:
    """The install commands in ``text``, by shell: each command line (eval,
    autoload, mkdir, storm-queue completion) under the last shell named."""
    out: dict[str, list[str]] = {}
    shell = None
    for line in text.splitlines():
        words = line.strip().lstrip("-* ").replace("*", "")
        for name in ("bash", "zsh", "fish"):
            if words.startswith(name):
                shell = name
        if line.startswith("      ") and words.startswith(COMMAND_LINES) and shell:
            out.setdefault(shell, []).append(words)
    return out


def help_instructions() -> dict[str, list[str]]:
    ran = run_cli(None, "completion", "--help", env=clean_env(COLUMNS="80"))
    assert ran.returncode == 0, ran.stderr
    body = ran.stdout.split("Example:")[0]
    return instructions(body)


def shell_env(home: Path) -> dict[str, str]:
    env = clean_env(HOME=str(home), PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "ZDOTDIR", "BASH_ENV", "ENV"):
        env.pop(name, None)
    return env


def test_the_help_the_readme_and_the_docs_give_the_same_instructions():
    told = help_instructions()
    assert told == {
        "bash": ['eval "$(storm-queue completion bash)"'],
        "zsh": ["autoload -Uz compinit && compinit", 'eval "$(storm-queue completion zsh)"'],
        "fish": ["mkdir -p ~/.config/fish/completions",
                 "storm-queue completion fish > ~/.config/fish/completions/storm-queue.fish"],
    }
    readme = (REPO / "README.md").read_text()
    page = (REPO / "docs" / "completion.md").read_text()
    for where, section in (("README.md", readme.split("### Shell completion\n", 1)[1].split("\n## ", 1)[0]),
                           ("docs/completion.md", page)):
        assert instructions(section) == told, where
        words = " ".join(section.split())
        assert "bash-completion package is not needed" in words and "(`compinit`) must be started first" in words, where


def test_bash_as_told_completes_without_the_bash_completion_package(storm, tmp_path):
    """A real `bash --norc` (so no system file can load bash-completion)
    runs the ~/.bashrc line the help gives: storm-queue is registered and
    completes the storm's slugs, and no bash-completion function exists.
    A real shell, calling the installed command."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("\n".join(help_instructions()["bash"]) + "\n")
    program = ('source ~/.bashrc\n'
               'complete -p storm-queue\n'
               'if declare -F _init_completion _comp_initialize >/dev/null; then echo "bash-completion is loaded"; fi\n'
               'COMP_WORDS=(storm-queue bump a); COMP_CWORD=2; _storm_queue_completion storm-queue\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    ran = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         env=shell_env(home), cwd=storm, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["complete -o nosort -F _storm_queue_completion storm-queue", "api", "auth"]
    assert ran.stderr == ""


def need(shell: str) -> None:
    """Skip without SHELL, or fail under CI (whose .ci/run installs it)."""
    if shutil.which(shell) is None:
        from tests.conftest import skip_or_fail

        skip_or_fail(f"{shell} is not installed here: apt-get install {shell}")


def test_zsh_as_told_registers_the_completion_and_needs_compinit(storm, tmp_path):
    """A real zsh, calling the installed command."""
    need("zsh")
    home = tmp_path / "home"
    home.mkdir()
    told = help_instructions()["zsh"]
    probe = ["zsh", "-i", "-c", "print -r -- ${_comps[storm-queue]}"]
    (home / ".zshrc").write_text("\n".join(told) + "\n")
    ran = subprocess.run(probe, capture_output=True, text=True, env=shell_env(home), cwd=storm, timeout=60)
    assert ran.stdout == "_storm_queue_completion\n", ran.stderr
    (home / ".zshrc").write_text("\n".join(line for line in told if "compinit" not in line) + "\n")
    ran = subprocess.run(probe, capture_output=True, text=True, env=shell_env(home), cwd=storm, timeout=60)
    assert ran.stdout == "\n" and "compdef" in ran.stderr, "without compinit the script cannot register"


def test_fish_as_told_completes_the_storms_slugs(storm, tmp_path):
    """A real fish, calling the installed command."""
    need("fish")
    home = tmp_path / "home"
    home.mkdir()
    env = shell_env(home)
    for line in help_instructions()["fish"]:
        ran = subprocess.run(["fish", "-c", line], capture_output=True, text=True, env=env, cwd=storm, timeout=60)
        assert ran.returncode == 0, ran.stderr
    ran = subprocess.run(["fish", "-c", 'complete -C "storm-queue bump "; complete -C "storm-queue unb"'],
                         capture_output=True, text=True, env=env, cwd=storm, timeout=60)
    assert ran.returncode == 0, ran.stderr
    offered = [line.split("\t")[0] for line in ran.stdout.splitlines()]
    assert sorted(offered) == sorted(["schema", "api", "auth", "billing", "unbump"])

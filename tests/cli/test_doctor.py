"""``storm-queue doctor``: each finding from a real storm on disk, its
severity, exit 0 clean and 1 with findings, the JSON shape, and escaping."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from storm_queue.core import config
from tests.conftest import REPO, make_storm, run_cli, tree

NOBODY = 65534
QUEUE = "a 1\nb 2 a\nc 3\n"


def doctor(root: Path, *args: str) -> tuple[int, dict]:
    ran = run_cli(root, "doctor", "--json", *args)
    assert ran.returncode in (0, 1), ran.stderr
    doc = json.loads(ran.stdout)
    assert ran.returncode == (1 if doc["findings"] else 0)
    return ran.returncode, doc


def codes(doc: dict) -> list[tuple[str, str, str]]:
    return [(f["severity"], f["code"], f["subject"]) for f in doc["findings"]]


@pytest.fixture
def sound(tmp_path) -> Path:
    """A storm with a log, its witness, a lane finished and one integrated."""
    root = make_storm(tmp_path / "s", QUEUE, integrated=["c"], finished=["c"], toml="[priority]\nsources = [\"nightly\"]\n")
    for name in ("integrated.txt", "abandoned.txt"):
        (root / name).touch()
    assert run_cli(root, "bump", "b", "--reason", "first").returncode == 0
    assert run_cli(root, "next").returncode == 0
    return root


def test_a_sound_storm_is_clean_exit_0_and_doctor_writes_nothing(sound):
    before = tree(sound, times=True)
    ran = run_cli(sound, "doctor")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout == f"no findings: the storm at {sound} is sound\n"
    code, doc = doctor(sound)
    assert code == 0
    assert doc == {"root": str(sound), "clean": True, "running_hours": 24.0, "errors": 0, "warnings": 0, "findings": [],
                   "moved": None}
    assert tree(sound, times=True) == before


def test_a_freshly_initialised_storm_is_clean(tmp_path):
    assert run_cli(None, "init", str(tmp_path / "new")).returncode == 0
    code, doc = doctor(tmp_path / "new")
    assert code == 0 and doc["clean"] is True


def test_the_shipped_example_declares_only_known_keys():
    decl = config.parse((REPO / "storm.toml.example").read_text())
    assert decl.error is None and decl.notes == () and decl.running_hours == 24.0


@pytest.mark.parametrize("rel,change,words", [
    ("storm.toml", "chown", "owned by nobody"),
    ("integrated.txt", "chown", "owned by nobody"),
    ("lanes/c/.qwenstorm/result.json", "chown", "owned by nobody"),
    ("progress.log", "chown", "owned by nobody"),
    ("queue.txt", 0o664, "writable by its group"),
    ("storm.toml", 0o646, "writable by others"),
    ("priority.log", 0o666, "writable by others"),
    (".priority.log.witness", 0o664, "writable by its group"),
    (".", 0o757, "writable by others"),
    ("abandoned.txt", 0o646, "writable by others"),
])
def test_a_file_another_account_could_forge_is_an_error(sound, rel, change, words):
    path = sound / rel
    if change == "chown":
        os.chown(path, NOBODY, NOBODY)
    else:
        os.chmod(path, change)
    code, doc = doctor(sound)
    assert code == 1
    assert codes(doc) == [("error", "exposed", rel)]
    finding = doc["findings"][0]
    assert words in finding["message"] and "forge" in finding["message"]
    assert ("chown root" if change == "chown" else "chmod go-w") in finding["fix"] and str(path) in finding["fix"]
    assert doc["errors"] == 1 and doc["warnings"] == 0 and doc["clean"] is False


def test_a_forgeable_checkpoint_is_an_error(sound):
    for _ in range(32):  # writers refresh the checkpoint every 32 lines
        assert run_cli(sound, "bump", "a").returncode == 0
    assert (sound / ".priority.log.checkpoint").exists()
    assert doctor(sound)[0] == 0
    os.chmod(sound / ".priority.log.checkpoint", 0o666)
    _, doc = doctor(sound)
    assert codes(doc) == [("error", "exposed", ".priority.log.checkpoint")]


def test_progress_log_may_be_written_by_everyone(sound):
    os.chmod(sound / "progress.log", 0o666)
    assert doctor(sound)[0] == 0


def test_a_planted_link_is_an_error(sound):
    os.unlink(sound / "abandoned.txt")
    os.symlink("/etc/hostname", sound / "abandoned.txt")
    code, doc = doctor(sound)
    assert code == 1
    assert ("error", "link", "abandoned.txt") in codes(doc)
    assert ("error", "unreadable", "ledgers") in codes(doc)  # and it is not read through


def test_a_log_that_does_not_replay_is_an_error_with_the_readers_words(sound):
    log = sound / "priority.log"
    data = bytearray(log.read_bytes())
    data[data.index(b'"bump"') + 1] = ord("B")
    log.write_bytes(bytes(data))
    ran = run_cli(sound, "doctor")
    assert ran.returncode == 1  # a finding, not exit 3
    assert ran.stdout.startswith("error   unknown_order priority.log: the priority order is unknown: ")
    assert "storm-queue reset --reason TEXT" in ran.stdout
    assert "1 error(s), 0 warning(s)" in ran.stderr
    code, doc = doctor(sound)
    assert codes(doc) == [("error", "unknown_order", "priority.log")]


def test_a_witness_that_disagrees_with_the_log(sound):
    witness = sound / ".priority.log.witness"
    held = json.loads(witness.read_text())
    held["digest"] = "0" * 64
    witness.write_text(json.dumps(held))
    code, doc = doctor(sound)
    assert codes(doc) == [("error", "unknown_order", "priority.log")]
    assert "witness recorded" in doc["findings"][0]["message"]


def test_a_witness_behind_its_log_is_a_warning(sound):
    witness = sound / ".priority.log.witness"
    behind = witness.read_bytes()
    assert run_cli(sound, "bump", "a").returncode == 0
    witness.write_bytes(behind)  # as if the second writer died before its witness
    code, doc = doctor(sound)
    assert code == 1
    assert codes(doc) == [("warning", "witness_behind", "priority.log")]
    assert "records 1 line(s), the log holds 2" in doc["findings"][0]["message"]


def test_a_torn_tail_is_a_warning(sound):
    with open(sound / "priority.log", "ab") as f:
        f.write(b'{"v": 1, "seq": 2')
    code, doc = doctor(sound)
    assert codes(doc) == [("warning", "torn_tail", "priority.log")]
    assert "17 bytes" in doc["findings"][0]["message"]


def test_skipped_lines_and_stray_slugs_are_warnings(sound):
    (sound / "queue.txt").write_text("a 1\nc 3\n../x 4\nd two\na 5\n")
    code, doc = doctor(sound)
    assert code == 1
    assert codes(doc) == [
        ("warning", "skipped_line", "queue.txt:3"),
        ("warning", "skipped_line", "queue.txt:4"),
        ("warning", "skipped_line", "queue.txt:5"),
        ("warning", "stray", "b"),
    ]
    assert doc["findings"][3]["fix"] == "add its line back to queue.txt, or: storm-queue unbump b"


@pytest.mark.parametrize("toml,expected", [
    ('[priority]\nsources = ["x"]\nsorces = ["y"]\n', [("warning", "unknown_key", "storm.toml")]),
    ('[priorty]\nsources = ["x"]\n', [("warning", "unknown_key", "storm.toml")]),
    ('[doctor]\nrunning_hours = "six"\n', [("warning", "wrong_type", "storm.toml")]),
    ('[doctor]\nrunning_hours = -1\n', [("warning", "wrong_type", "storm.toml")]),
    ('[priority]\nsources = "x"\n', [("error", "declaration_unreadable", "storm.toml")]),
    ('[priority]\nsources = [\n', [("error", "declaration_unreadable", "storm.toml")]),
])
def test_storm_toml_unknown_keys_and_wrong_types(sound, toml, expected):
    (sound / "storm.toml").write_text(toml)
    code, doc = doctor(sound)
    assert code == 1
    assert codes(doc) == expected, doc


def test_invalid_toml_says_the_order_cannot_be_known(sound):
    (sound / "storm.toml").write_text("[priority\n")
    _, doc = doctor(sound)
    assert "not valid TOML" in doc["findings"][0]["message"]
    assert "list and next cannot know the order" in doc["findings"][0]["message"]


def _mark_running(root: Path, slug: str, hours_ago: float) -> None:
    marks = root / "lanes" / slug / ".qwenstorm"
    marks.mkdir(parents=True, exist_ok=True)
    (marks / "running").touch()
    then = time.time() - hours_ago * 3600
    os.utime(marks / "running", (then, then))


def test_lanes_running_for_longer_than_the_threshold(sound):
    _mark_running(sound, "a", 30)
    _mark_running(sound, "b", 2)
    _mark_running(sound, "c", 100)  # finished and integrated: not running
    markers = [("warning", "marker_without_lease", "a"), ("warning", "marker_without_lease", "b")]  # whatever their age
    code, doc = doctor(sound)
    assert code == 1
    assert codes(doc) == [("warning", "long_running", "a")] + markers
    assert "30.0 hours (threshold 24)" in doc["findings"][0]["message"]
    assert codes(doctor(sound, "--running-hours", "48")[1]) == markers
    _, doc = doctor(sound, "--running-hours", "1")
    assert codes(doc) == [("warning", "long_running", "a"), ("warning", "long_running", "b")] + markers
    assert doc["running_hours"] == 1.0
    (sound / "storm.toml").write_text("[doctor]\nrunning_hours = 1.5\n")
    _, doc = doctor(sound)
    assert doc["running_hours"] == 1.5 and len(doc["findings"]) == 4
    _, doc = doctor(sound, "--running-hours", "40")  # the option wins over storm.toml
    assert doc["running_hours"] == 40.0 and codes(doc) == markers
    bad = run_cli(sound, "doctor", "--running-hours", "0")
    assert bad.returncode == 2


def test_no_storm_is_exit_2(tmp_path):
    ran = run_cli(None, "doctor", cwd=tmp_path)
    assert ran.returncode == 2 and "no storm here" in ran.stderr


def test_doctor_escapes_everything_it_prints(sound):
    evil = "ev\x1bil[red]x\u2028[link=https:example.com]y\rz"
    (sound / "queue.txt").write_text(f"a 1\nb 2 a\n{evil} 9\n")
    (sound / "storm.toml").write_text('["k\\u001b[31m[red]\\n"]\nx = 1\n')
    (sound / "lanes" / evil).mkdir()
    os.chown(sound / "lanes" / evil, NOBODY, NOBODY)
    ran = run_cli(sound, "doctor")
    assert ran.returncode == 1
    _, doc = doctor(sound)
    assert len(doc["findings"]) == 3
    for out in (ran.stdout, ran.stderr):
        for ch in ("\x1b", "\r", "\u2028"):
            assert ch not in out
    lines = ran.stdout.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("error   exposed lanes/ev\\x1bil[red]x\\u2028[link=https:example.com]y\\x0dz: owned by nobody")
    assert lines[1].startswith('warning unknown_key storm.toml: unknown table "k\\x1b[31m[red]\\x0a"')
    assert lines[2].startswith('warning skipped_line queue.txt:3: "ev\\x1bil[red]x\\u2028[link=https:example.com]y\\x0dz 9" is skipped')
    shutil.rmtree(sound / "lanes" / evil)


def _give_to_an_owner_who_is_not_root(root: Path) -> None:
    """Root writes whatever the mode, so as root the storm is given to
    nobody first: the owner is then an account the mode binds."""
    if os.geteuid() == 0:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, NOBODY, NOBODY)


def test_a_storm_directory_its_owner_cannot_write_is_an_error_with_the_fix(sound):
    """Issue 13 item 7: every request would be refused (storm_unwritable)."""
    _give_to_an_owner_who_is_not_root(sound)
    os.chmod(sound, 0o555)
    try:
        code, doc = doctor(sound)
        text = run_cli(sound, "doctor").stdout
    finally:
        os.chmod(sound, 0o755)
    assert code == 1
    assert codes(doc) == [("error", "unwritable", ".")]
    finding = doc["findings"][0]
    assert "cannot write this directory (mode dr-xr-xr-x)" in finding["message"]
    assert "every request is refused" in finding["message"]
    assert finding["fix"] == f"chmod u+wx {sound}"
    assert text.startswith("error   unwritable .: the storm's owner ") and f"(fix: chmod u+wx {sound})" in text


def test_a_log_and_queue_txt_their_owner_cannot_write_are_errors(sound):
    _give_to_an_owner_who_is_not_root(sound)
    for name in ("priority.log", "queue.txt"):
        os.chmod(sound / name, 0o444)
    _, doc = doctor(sound)
    assert codes(doc) == [("error", "unwritable", "queue.txt"), ("error", "unwritable", "priority.log")]
    assert "push cannot append" in doc["findings"][0]["message"]
    assert [f["fix"] for f in doc["findings"]] == [f"chmod u+w {sound / 'queue.txt'}", f"chmod u+w {sound / 'priority.log'}"]


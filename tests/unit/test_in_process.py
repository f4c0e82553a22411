"""The in-process runner (``tests.conftest.run_main``, what ``run_cli`` calls)
runs the command line as a fresh process would, and leaves the test's
process as it found it: no module global of the package, descriptor,
connection, environment variable, working directory, stream or signal
handler changed by a call. What a call prints and exits with is what a real
process prints and exits with."""

from __future__ import annotations

import fcntl
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import CLICK, clean_env, make_storm, run_main

QUEUE = "a 1\nb 2 a\nc 3\n"


def inside(root, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """``storm-queue ARGS --root ROOT`` in this process (or ARGS alone, ROOT None)."""
    return run_main([*args, *(["--root", str(root)] if root is not None else [])], **kwargs)

#: forms that between them load every module a directory storm's commands use
FORMS = [
    ["next"], ["list"], ["list", "--json"], ["list", "--plain"], ["bump", "c", "--reason", "r"], ["unbump", "c"],
    ["push", "d", "4", "--deps", "c"], ["claim", "--holder", "r1", "--ttl", "600"], ["why", "b"], ["log"],
    ["log", "--json"], ["verify"], ["doctor"], ["doctor", "--json"], ["watch", "--once"], ["recover"],
    ["--help"], ["bump", "--help"], ["bump"], ["bump", "--json"], ["nosuchcommand"], ["bump", "nosuchlane", "--json"],
    ["halt", "--reason", "stop"], ["next"], ["resume", "--reason", "go"], ["list", "--json"],
    ["renew", "a", "--token", "1"], ["finish", "a", "--token", "1", "--result", "ok"], ["settle", "a", "integrated"],
]


def package_state() -> dict[str, object]:
    """Every module global of the package: what it is bound to, and the
    contents of what can change in place (containers, a class's attributes).
    A record class's ``__init__`` is left out: ``core.records`` compiles it
    once the class has made ``COMPILE_AFTER`` instances, binding the same
    fields the same way, only faster."""
    out: dict[str, object] = {}
    for name, mod in sorted(sys.modules.items()):
        if mod is None or not (name == "storm_queue" or name.startswith("storm_queue.")):
            continue
        for key, value in list(vars(mod).items()):
            if isinstance(value, (list, dict, set, bytearray)):
                seen: object = (id(value), repr(value))
            elif isinstance(value, type) and value.__module__ == name:
                record = hasattr(value, "__record_fields__")
                seen = (id(value), tuple((k, id(v)) for k, v in vars(value).items() if not (record and k == "__init__")))
            elif hasattr(value, "cache_info"):
                seen = (id(value), value.cache_info().currsize)
            else:
                seen = id(value)
            out[f"{name}.{key}"] = seen
    return out


def process_state() -> dict[str, object]:
    """What of the process a call may swap: the environment, working
    directory, argv, streams, signal handlers, timer and mask, descriptors."""
    return {
        "environ": dict(os.environ), "cwd": os.getcwd(), "argv": list(sys.argv),
        "streams": (sys.stdin, sys.stdout, sys.stderr),
        "handlers": {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGWINCH,
                                                      signal.SIGUSR1)},
        "timer": signal.getitimer(signal.ITIMER_REAL), "mask": signal.pthread_sigmask(signal.SIG_BLOCK, []),
        "fds": sorted(os.listdir("/proc/self/fd")),
    }


def changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k, "absent") != after.get(k, "absent"))


def test_no_call_changes_the_package_or_the_process(tmp_path: Path) -> None:
    """Each form twice (the first loads what it loads): the second changes
    no module global of the package, and neither changes the process."""
    root = make_storm(tmp_path / "storm", QUEUE)
    for form in FORMS:
        for _ in range(2):
            before, proc_before = package_state(), process_state()
            inside(root, *form)
            after, proc_after = package_state(), process_state()
            assert changed(proc_before, proc_after) == [], form
        assert changed(before, after) == [], form


def test_a_call_with_its_own_env_and_cwd_puts_both_back(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    before = process_state()
    done = inside(None, "next", cwd=root, env=clean_env(STORM_QUEUE_ROOT=str(root), STORM_QUEUE_LANE="a", TZ="Asia/Tokyo"))
    assert (done.returncode, done.stdout) == (0, "run a 1\n"), done.stderr
    assert changed(before, process_state()) == []


def _waiting_for(lock: Path) -> bool:
    """Whether /proc/locks shows a process blocked on the flock of ``lock``."""
    st = os.stat(lock)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as f:
        return any("->" in row and "FLOCK" in row and inode in row for row in f)


def test_the_events_a_call_appended_are_its_own(tmp_path: Path) -> None:
    """``writer.appended`` (what an interrupt reports as recorded) is fresh
    for each call and put back after it: a call interrupted while waiting
    for the lock says nothing was recorded, whatever this process appended."""
    from storm_queue.store.directory.log import writer

    root = make_storm(tmp_path / "storm", QUEUE)
    assert inside(root, "bump", "a").returncode == 0
    mine = {"action": "bump", "slug": "mine", "seq": 99}
    before = list(writer.appended)
    writer.appended.append(mine)
    lock = root / "priority.log.lock"
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)

    def interrupt() -> None:  # SIGINT once the call waits for the lock: its own handler is in place by then
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if _waiting_for(lock):
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    sender, handler = threading.Thread(target=interrupt), signal.getsignal(signal.SIGINT)
    try:
        sender.start()
        done = inside(root, "bump", "b", "--wait", "60")
        sender.join(60)
        assert (done.returncode, done.stdout) == (130, ""), done.stderr
        assert done.stderr.strip().splitlines() == ["storm-queue: interrupted: nothing was recorded"]
        assert writer.appended == [*before, mine] and signal.getsignal(signal.SIGINT) is handler
    finally:
        os.close(fd)
        writer.appended[:] = before


FIDELITY = [["next"], ["list"], ["list", "--json"], ["bump", "b", "--json"], ["bump", "b"], ["why", "b"], ["log"],
            ["bump"], ["bump", "--json"], ["list", "--json", "--bogus"], ["--help"], ["nosuchcommand"],
            ["push", "x"], ["claim", "--holder", "r1", "--json"], ["verify"], ["watch", "--once"], ["doctor"]]


@pytest.mark.parametrize("click", [False, True], ids=["entry", "click"])
def test_it_prints_and_exits_as_a_real_process(tmp_path: Path, click: bool) -> None:
    """The same bytes and exit code, form by form, on twin storms (times
    and the storm's own path aside).
    A real process, to compare the in-process call with."""
    import re

    stamp = re.compile(rb"\d{4}-\d\d-\d\d[T ][\d:.]+Z|\d+[smhd] ago|in \d+[smhd]|left of [\dhms]+")
    twins = [make_storm(tmp_path / name / "storm", QUEUE) for name in ("in", "out")]
    for form in FIDELITY:
        ran = []
        for root, real in zip(twins, (False, True)):
            words = [*form, "--root", str(root)] if form != ["nosuchcommand"] else form
            if real:
                done = subprocess.run([sys.executable, *(["-c", CLICK] if click else ["-m", "storm_queue"]), *words],
                                      capture_output=True, env=clean_env(), cwd=tmp_path, timeout=60)
            else:
                done = run_main(words, text=False, cwd=tmp_path, click=click)
            ran.append((done.returncode, *(stamp.sub(b"T", out.replace(str(root).encode(), b"ROOT"))
                                           for out in (done.stdout, done.stderr))))
        assert ran[0] == ran[1], form


def test_bytes_that_are_not_utf8_come_out_as_a_process_gives_them(tmp_path: Path) -> None:
    """A real process, to compare the in-process call with."""
    twins = [make_storm(tmp_path / name / "storm", QUEUE) for name in ("in", "out")]
    argv = [b"bump", b"a\xff\xfe", b"--reason", "r\u00e9".encode(), b"--json", b"--root"]
    inside = run_main([*argv, bytes(twins[0])], text=False)
    real = subprocess.run([*(a.encode() for a in (sys.executable, "-m", "storm_queue")), *argv, bytes(twins[1])],
                          capture_output=True, env=clean_env(), timeout=60)
    assert inside.returncode == real.returncode == 2
    assert (inside.stdout, inside.stderr) == (real.stdout, real.stderr)


def test_text_is_decoded_as_subprocess_decodes_it() -> None:
    """The locale's encoding and universal newlines, as ``text=True`` decodes a child's output.
    A real process, to compare the in-process call with."""
    from tests.conftest import _decoded

    data = b"a\r\nb\rc\n\xc3\xa9\n"
    real = subprocess.run([sys.executable, "-c", f"import sys; sys.stdout.buffer.write({data!r})"], capture_output=True,
                          text=True, timeout=60)
    assert _decoded(data) == real.stdout == "a\nb\nc\n\u00e9\n"


def test_a_timeout_ends_the_call_and_puts_the_lock_and_timer_back(tmp_path: Path) -> None:
    """A call that would wait 60 s for the writers' lock (held here) is
    ended by its 1 s timeout, as ``subprocess.run`` would end it, in flock(2)."""
    root = make_storm(tmp_path / "storm", QUEUE)
    assert inside(root, "bump", "a").returncode == 0
    fd = os.open(root / "priority.log.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    before, start = process_state(), time.monotonic()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            inside(root, "bump", "b", "--wait", "60", timeout=1)
    finally:
        os.close(fd)
    assert time.monotonic() - start < 30, "the lock's wait was not ended at the timeout"
    assert changed({k: v for k, v in before.items() if k != "fds"},
                   {k: v for k, v in process_state().items() if k != "fds"}) == []
    assert inside(root, "bump", "b").returncode == 0


def test_off_the_main_thread_it_refuses(tmp_path: Path) -> None:
    root = make_storm(tmp_path / "storm", QUEUE)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            inside(root, "next")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    t.join(60)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError) and "process=True" in str(errors[0])


def open_connections() -> list:
    driver = sys.modules.get("storm_queue.store.postgres.driver")
    if driver is None:
        return []
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, driver.Connection) and not o.closed]


def test_a_database_storms_calls_close_their_connections(pg_url: str) -> None:
    forms = [["add", "a", "1"], ["add", "b", "2"], ["bump", "b"], ["next"], ["list"], ["list", "--json"], ["log"],
             ["claim", "--holder", "r1"], ["why", "a"], ["verify"], ["doctor"], ["watch", "--once"], ["bump", "zz"]]
    assert inside(None, "init", pg_url).returncode == 0
    open_before = open_connections()
    for form in forms:
        for _ in range(2):
            before, proc_before = package_state(), process_state()
            done = inside(pg_url, *form)
            assert done.returncode in (0, 1, 2), (form, done.stderr)
            assert open_connections() == open_before, form
            after = package_state()
            assert changed(proc_before, process_state()) == [], form
        assert changed(before, after) == [], form

"""The child processes tests start, and how they end, so that no test can
hang on one (issue 33, item 11).

- A child starts with SIGINT (and SIGTERM, SIGHUP) at its default
  (``restore_signals``, the ``preexec_fn`` of ``start``): the suite may run
  with SIGINT ignored, as ``nohup pytest … &`` starts it (a shell ignores
  SIGINT in the jobs it starts in the background), and an ignored signal
  is inherited across exec. A shell script could not trap it (bash takes
  no trap for a signal ignored on entry), nor would a Python child raise
  ``KeyboardInterrupt`` for it, and a test that signals either would wait
  for an end that never comes.
- ``start`` puts a child in a session of its own (``start_new_session``):
  its process group, and every group its children make (a runner runs
  each lane in a group of its own), belong to that session, which
  ``kill_session`` ends whole.
- Every wait has a deadline: ``end`` (``communicate`` with a timeout; past
  it, the child's whole session is killed and the streams read with a
  timeout again), ``reap`` (``waitpid`` of a forked child, polled).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

#: how long a child may take to end once its session was sent SIGKILL (a zombie only waits to be reaped)
KILLED_WITHIN = 30


def restore_signals() -> None:
    """In the child, before exec: SIGINT, SIGTERM and SIGHUP at their defaults."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


#: every child ``start`` made during the test under way: its session is killed once the test ends
#: (``tests/conftest.py``, ``_children_end``), whatever the test did or did not do
STARTED: list[subprocess.Popen] = []


def start(argv: list[str], **popen) -> subprocess.Popen:
    """``subprocess.Popen(argv, ...)`` in a session of its own, its signals at their defaults."""
    proc = subprocess.Popen(argv, start_new_session=True, preexec_fn=restore_signals, **popen)
    STARTED.append(proc)
    return proc


def session_of(sid: int) -> list[int]:
    """The processes of session ``sid`` (from /proc), this one aside."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(name))
    return found


def kill_session(sid: int) -> None:
    """SIGKILL to every process of session ``sid``: the child ``start``
    made its leader, its process group and every group it made since (a
    lane's), however far it got."""
    for _ in range(3):  # a process that forked meanwhile is met the next time round
        pids = session_of(sid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def end(proc: subprocess.Popen, timeout: float) -> tuple[str | bytes | None, str | bytes | None, bool]:
    """``proc.communicate()`` within ``timeout`` seconds: ``(stdout, stderr,
    in_time)``. Past it, the child's whole session is killed (``start``'s
    child leads one) and its streams are read within ``KILLED_WITHIN``
    seconds (a grandchild outside the session that still holds them open
    is then not waited for)."""
    try:
        out, err = proc.communicate(timeout=timeout)
        return out, err, True  # what it left running is the test's to judge; the test's end kills it (``stop``)
    except subprocess.TimeoutExpired:
        pass
    kill_session(proc.pid)
    try:
        out, err = proc.communicate(timeout=KILLED_WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=KILLED_WITHIN)
        out, err = None, None
    return out, err, False


def stop(proc: subprocess.Popen) -> None:
    """End ``proc`` and all its session now (its lanes' groups too), and
    reap it: a test's clean-up."""
    kill_session(proc.pid)
    if proc.returncode is None:
        end(proc, 0)


def stop_all() -> None:
    """``stop`` every child ``start`` made since the last call."""
    while STARTED:
        stop(STARTED.pop())


def reap(pid: int, timeout: float) -> int:
    """The wait status of the forked child ``pid``, waited for at most
    ``timeout`` seconds; past it, the child is killed (SIGKILL) and reaped."""
    deadline, killed = time.monotonic() + timeout, False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            if killed:
                raise TimeoutError(f"child {pid} did not end within {KILLED_WITHIN} s of SIGKILL")
            os.kill(pid, signal.SIGKILL)
            deadline, killed = time.monotonic() + KILLED_WITHIN, True
        time.sleep(0.01)


def alive(pid: int) -> bool:
    """Whether PID is a process that has not ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between the open and the read
        return False

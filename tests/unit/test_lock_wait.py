"""The writers' lock's wait (``log.lock``): in the main thread a blocking
flock(2) ended by a timer, so a waiter takes the lock the moment it is
freed (never a sleep-and-try loop, whose pauses left a freed lock idle
while eight writers queued); elsewhere the polling loop. Either way: Busy
at the deadline, the holder named once after ``NOTICE_AFTER``, and any
``SIGALRM`` handler and timer of the caller put back."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from storm_queue.core.errors import Busy
from storm_queue.store.directory.log import lock


@pytest.fixture
def log_path(tmp_path: Path) -> str:
    path = tmp_path / "priority.log"
    path.write_text("")
    return str(path)


def hold(log_path: str) -> int:
    """Another open file description holding the flock (flock conflicts between them, even in one process)."""
    import fcntl

    fd = os.open(lock.lock_path(log_path), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_waiter_takes_the_freed_lock_without_polling(log_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fd = hold(log_path)
    threading.Timer(0.3, os.close, (fd,)).start()
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail(f"polled: slept {s}"))
    start = time.monotonic()
    with lock.held(log_path, 10, may_create=True):
        took = time.monotonic() - start
    assert 0.25 <= took < 5
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_deadline_raises_busy_and_puts_back_the_callers_alarm(log_path: str) -> None:
    rang: list[int] = []

    def mine(signum: int, frame: object) -> None:
        rang.append(signum)

    before = signal.signal(signal.SIGALRM, mine)
    fd = hold(log_path)
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        start = time.monotonic()
        with pytest.raises(Busy, match="busy"):
            with lock.held(log_path, 0.3, may_create=True):
                pass
        assert 0.25 <= time.monotonic() - start < 3
        assert signal.getsignal(signal.SIGALRM) is mine
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 3.5 < left < 4.8  # the caller's timer runs on, less the wait
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        time.sleep(0.3)
        assert rang == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        os.close(fd)


def test_the_holder_is_named_once_after_the_notice_delay(log_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    told: list[tuple[str, float]] = []
    monkeypatch.setattr(lock, "on_wait", lambda who, path, wait: told.append((path, wait)))
    monkeypatch.setattr(lock, "NOTICE_AFTER", 0.2)
    fd = hold(log_path)
    threading.Timer(0.6, os.close, (fd,)).start()
    with lock.held(log_path, 10, may_create=True):
        pass
    assert told == [(lock.lock_path(log_path), 10)]


def test_outside_the_main_thread_it_polls_to_the_same_end(log_path: str) -> None:
    fd = hold(log_path)
    found: list[object] = []

    def writer(wait: float) -> None:
        try:
            with lock.held(log_path, wait, may_create=True):
                found.append("held")
        except Busy as exc:
            found.append(exc)

    t = threading.Thread(target=writer, args=(0.2,))
    t.start()
    t.join(10)
    assert isinstance(found.pop(), Busy)
    threading.Timer(0.2, os.close, (fd,)).start()
    t = threading.Thread(target=writer, args=(10,))
    t.start()
    t.join(10)
    assert found == ["held"]
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL

"""Noticing that a directory storm changed, for a reader that waits for it
(``claim --wait``, the live view): the files whose change can change what
the storm decides (``paths``), what they look like now (``signature``),
and inotify on their directories through the C library (``Waker``), no
dependency beyond ctypes. Where inotify is not to be had (another system,
no ctypes, the watch limit reached) a waiter compares signatures instead
(``Changes`` polls every ``POLL`` seconds)."""

from __future__ import annotations

import os
import sys
import time

from ..wake import readable
from ..wake import signature as stamps
from . import ledger
from .log.reader import witness_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable

    from .store import Directory

#: how often a waiter without inotify compares the storm's files, in seconds
POLL = 0.25
#: an inotify event's fixed part: wd, mask, cookie, len (struct inotify_event)
_HEAD = 16


def paths(store: Directory) -> list[str]:
    """The files whose change can change what the storm decides: queue.txt,
    storm.toml, the ledgers, the log and its witness, the lanes directory
    and each lane's markers. ``StormError`` when storm.toml cannot be read."""
    root = store.root
    decl = store.declaration()
    out = [os.path.join(root, name) for name in ("queue.txt", "storm.toml", ledger.INTEGRATED, ledger.ABANDONED,
                                                 ledger.UNATTENDED)]
    if not decl.log_error:
        log = store.log_path(decl)
        out += [log, witness_path(log)]
    lanes = os.path.join(root, ledger.LANES)
    out.append(lanes)
    try:
        with os.scandir(lanes) as entries:
            names = sorted(e.name for e in entries)
    except OSError:
        names = []
    for name in names:
        marks = os.path.join(lanes, name, ledger.MARKS)
        out += [marks, os.path.join(marks, ledger.RESULT), os.path.join(marks, ledger.RUNNING)]
    return out


def signature(store: Directory) -> tuple:
    """What the storm's files look like now: equal signatures, an unchanged storm."""
    try:
        return stamps(paths(store))
    except Exception:  # noqa: BLE001 -- an unreadable storm.toml: whoever reads the storm next says why
        return ("unreadable", time.monotonic())


class Waker:
    """inotify on the storm's directories, where the C library has it: its
    descriptor ``fd`` turns readable soon after a file there changes.
    Without it ``fd`` is None (and a caller compares signatures)."""

    #: modify, attrib, close_write, moved from and to, create, delete; only directories
    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x01000000

    def __init__(self) -> None:
        self.fd: int | None = None
        self._libc = None
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError, ImportError):
            return
        if fd >= 0:
            self.fd, self._libc = fd, libc

    def watch(self, paths: Iterable[str]) -> None:
        """Watch each directory among ``paths`` (and each file's directory);
        a directory already watched is watched once."""
        if self.fd is None:
            return
        dirs = {p if os.path.isdir(p) else os.path.dirname(p) for p in paths}
        for d in sorted(dirs):
            if os.path.isdir(d):
                self._libc.inotify_add_watch(self.fd, os.fsencode(d), self.MASK)

    def drain(self) -> set[str]:
        """Read every event waiting; the names of the files they are about."""
        names: set[str] = set()
        if self.fd is None:
            return names
        try:
            while True:
                data = os.read(self.fd, 65536)
                if not data:
                    break
                at = 0
                while at + _HEAD <= len(data):
                    size = int.from_bytes(data[at + 12:at + _HEAD], sys.byteorder)
                    names.add(os.fsdecode(data[at + _HEAD:at + _HEAD + size].rstrip(b"\0")))
                    at += _HEAD + size
        except OSError:  # BlockingIOError: nothing more waiting
            pass
        return names

    def close(self, later: bool = False) -> None:
        """Close the descriptor; ``later``: on a thread of its own, since
        closing one waits for the kernel to retire its watches (an RCU
        grace period, some 15 ms), which an answer need not wait for."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            if later:
                import threading

                threading.Thread(target=os.close, args=(fd,), daemon=True).start()
            else:
                os.close(fd)


class Changes:
    """A wait for a change to a directory storm (``Store.changes``):
    inotify on its directories, set up when the block begins, so a change
    made after that is never missed; else a comparison of signatures every
    ``POLL`` seconds. A change to progress.log or to the lock file alone
    (what a request that changed nothing writes, or opens) is no change."""

    def __init__(self, store: Directory):
        self._store = store
        self._waker = Waker()
        self._quiet = {ledger.PROGRESS}
        self._sig: tuple = ()
        self._stale = False  # the storm changed since its directories were last looked at

    def __enter__(self) -> Changes:
        self._look()
        return self

    def __exit__(self, *exc: object) -> None:
        self._waker.close(later=True)

    def _look(self) -> None:
        """Watch the storm's directories as they are now (lanes come and
        go), and note what its files look like."""
        if self._waker.fd is None:
            self._sig = signature(self._store)
            return
        self._waker.watch(paths(self._store))
        decl = self._store.declaration()
        if not decl.log_error:
            self._quiet = {ledger.PROGRESS, os.path.basename(self._store.log_path(decl)) + ".lock"}

    def wait(self, timeout: float) -> bool:
        """Block until the storm may have changed since the block began or
        the last ``wait`` returned, or ``timeout`` seconds passed; whether
        a change was seen."""
        end = time.monotonic() + max(0.0, timeout)
        if self._stale:  # here, not when the change was seen: the caller's ask comes first
            self._stale = False
            self._look()
        while True:
            left = end - time.monotonic()
            if self._waker.fd is None:
                time.sleep(max(0.0, min(POLL, left)))
                now = signature(self._store)
                if now != self._sig:
                    self._sig = now
                    return True
            else:
                if readable(self._waker.fd, left) and self._waker.drain() - self._quiet:
                    self._stale = True
                    return True
            if time.monotonic() >= end:
                return False

"""Waiting for a database storm to change (``Store.changes``, for
``claim --wait``, ``lease --wait`` and ``serve``): woken by the server,
never polling, through one connection a process that LISTENs on the
channel a transaction notifies at its commit when it may have let a lane
be claimed or ended a lease (sql/functions/announce_change.sql). A view,
which wants every change (``every``: ``serve``), also reads the log's head
on that connection every ``POLL`` seconds: a claim and a renew notify no
one, nor does a transaction whose claim left every slot held.

Every waiter of the process on the same URL (``serve``'s threads, a
program with several ``Storm`` objects, several waits at once) shares that
connection (``_Listener``, one a URL): the first to wait reads the socket
while the others wait for its word, and it is closed when the last waiter
leaves. A notice counts only when it is the storm's: its payload is a
number and a MAC of it under the storm's key (``storm_queue.notice``, which
only the storm's members read), and a number is taken once, and only past
the last taken; so a stranger's ``NOTIFY storm_queue``, or a payload copied
and sent again, wakes no one."""

from __future__ import annotations

import threading
import time

from ..wake import readable
from . import driver
from .connect import connect
from .queries import q

#: the channel the storm's changes are announced on (one storm a database, so one channel)
CHANNEL = "storm_queue"
#: how often a waiter for every change (``serve``'s) reads the log's head, in seconds: a claim and a renew notify no one
POLL = 0.5


def signed(key: bytes, number: int) -> str:
    """The MAC of a notice's ``number`` under the storm's ``key``, as the
    server makes it (sha256(key || sha256(key || number)), hex)."""
    from hashlib import sha256

    return sha256(key + sha256(key + str(number).encode()).digest()).hexdigest()


class _Listener:
    """The process's one LISTEN connection to one URL, and what it heard:
    ``heard`` grows by one at each notice the storm sent (and at each loss
    of the connection, or its making again: one may have been missed).
    ``lock`` is held by the one waiter reading the socket."""

    def __init__(self, url: str):
        self.url = url
        self.conn = None
        self.key: bytes | None = None  # None: a storm before version 13, whose notices carry no MAC
        self.taken = 0  # the last notice's number taken
        self.heard = 0
        self.users = 0
        self.lock = threading.Lock()
        self.strangers = 0  # notices ignored: not the storm's, or one already taken

    def listen(self) -> None:
        """Connect, read the storm's key and its last notice's number, then
        LISTEN: a notice past that number commits after the read, and one
        before it committed before (what a caller asks next sees it)."""
        conn = connect(self.url)
        try:
            try:
                self.taken, self.key = conn.execute(q("read_notice")).fetchone()
                self.key = bytes(self.key)
            except driver.errors.UndefinedTable:  # an older storm: its notices carry nothing to check
                self.taken, self.key = 0, None
            conn.execute(q("listen_changes"))
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def lost(self) -> None:
        """The connection is gone: a notice may have been missed."""
        self.close()
        self.heard += 1

    def take(self) -> None:
        """Count the notices the server sent so far that are the storm's."""
        for channel, payload in self.conn.notifies():
            if channel == CHANNEL and self._storms(payload):
                self.heard += 1
            else:
                self.strangers += 1

    def _storms(self, payload: str) -> bool:
        """Whether ``payload`` is a notice of the storm's not taken yet (and take it)."""
        if self.key is None:
            return True
        from hmac import compare_digest

        number, _, mac = payload.partition(" ")
        if not (number.isascii() and number.isdigit() and len(number) < 20) or int(number) <= self.taken:
            return False
        if not compare_digest(mac, signed(self.key, int(number))):
            return False
        self.taken = int(number)
        return True


_listeners: dict[str, _Listener] = {}
_guard = threading.Lock()  # over _listeners and each listener's users


class Changes:
    """From the moment the block begins (it listens), ``wait`` returns
    soon after any transaction that may have let a lane be claimed, or
    ended a lease, commits; with ``every``, also within ``POLL`` seconds
    of any line appended (the log's head, read on the shared connection)."""

    def __init__(self, url: str, every: bool = False):
        self._url = url
        self._listener: _Listener | None = None
        self._seen = 0
        self._every = every
        self._head: int | None = None  # the log's head as last read (every)
        self._polled = 0.0

    def __enter__(self) -> Changes:
        with _guard:
            listener = _listeners.get(self._url)
            if listener is None:
                listener = _listeners[self._url] = _Listener(self._url)
            listener.users += 1
        self._listener = listener
        try:
            with listener.lock:
                if listener.conn is None:
                    try:
                        listener.listen()
                    except driver.OperationalError:  # lost before LISTEN answered: the first wait listens again
                        listener.lost()
                self._seen = listener.heard
                if self._every:
                    self._moved(listener)
        except BaseException:  # the storm's errors (unreachable, refused): this waiter never began
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        listener, self._listener = self._listener, None
        with _guard:
            listener.users -= 1
            last = listener.users == 0
            if last:
                del _listeners[self._url]
        if last:
            with listener.lock:
                listener.close()

    def wait(self, timeout: float) -> bool:
        """Block until the storm's notice of a change arrives after the
        block began (or the last ``wait`` returned), or ``timeout`` seconds
        passed; whether one did. A connection lost meanwhile (or as the
        block began) counts as a change (one may have been missed): it is
        made again at the next wait, which returns at once once it listens
        again, so the caller asks again after it listens and meets the
        server as it is."""
        listener = self._listener
        end = time.monotonic() + max(0.0, timeout)
        while True:
            if listener.heard != self._seen:
                self._seen = listener.heard
                return True
            now = time.monotonic()
            left = end - now
            if self._every and now >= self._polled + POLL:
                with listener.lock:
                    if self._moved(listener):
                        return True
                continue
            if left <= 0:
                return False
            span = min(left, self._polled + POLL - now) if self._every else left
            if not listener.lock.acquire(timeout=span):
                continue
            try:
                if listener.heard == self._seen:  # no other waiter heard one meanwhile: read the socket
                    self._read(listener, span)
            finally:
                listener.lock.release()

    def _moved(self, listener: _Listener) -> bool:
        """Under the listener's lock: whether the log's head moved since it
        was last read (the first reading: not), read now."""
        self._polled = time.monotonic()
        if listener.conn is None:
            return False
        try:
            seq = listener.conn.execute(q("read_head_seq")).fetchone()[0]
        except driver.OperationalError:
            listener.lost()
            return False
        moved, self._head = self._head is not None and seq != self._head, seq
        return moved

    @staticmethod
    def _read(listener: _Listener, left: float) -> None:
        """Under the listener's lock: listen again if the connection is
        gone, else take what arrives within ``left`` seconds."""
        try:
            if listener.conn is None:
                listener.listen()
                listener.heard += 1
                return
            heard = listener.heard
            listener.take()
            if listener.heard == heard and readable(listener.conn.fileno(), left):
                listener.take()
        except driver.OperationalError:
            listener.lost()

    @property
    def strangers(self) -> int:
        """The notices this process's connection ignored (not the storm's, or one already taken)."""
        return self._listener.strangers if self._listener is not None else 0

"""Waiting for a database storm to change (``Store.changes``, for
``claim --wait``): a connection of its own that LISTENs on the channel
every writing transaction notifies at its commit (sql/functions/announce_change.sql),
woken by the server, never polling."""

from __future__ import annotations

import time

from ..wake import readable
from . import driver
from .connect import connect
from .queries import q


class Changes:
    """From the moment the block begins (LISTEN has returned), ``wait``
    returns soon after any transaction that changed the storm commits."""

    def __init__(self, url: str):
        self._url = url
        self._conn = None

    def __enter__(self) -> Changes:
        try:
            self._listen()
        except driver.OperationalError:  # lost before LISTEN answered: the first wait listens again
            self._close()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _listen(self) -> None:
        self._conn = connect(self._url)
        self._conn.execute(q("listen_changes"))

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


    def wait(self, timeout: float) -> bool:
        """Block until a change commits after the block began (or the last
        ``wait`` returned), or ``timeout`` seconds passed; whether one did.
        A connection lost meanwhile (or as the block began) counts as a
        change (one may have been missed): it is made again at the next
        wait, which returns at once once it listens again, so the claim
        asks again after it listens and meets the server as it is."""
        end = time.monotonic() + max(0.0, timeout)
        try:
            if self._conn is None:
                self._listen()
                return True
            while not self._conn.notifies():
                left = end - time.monotonic()
                if left <= 0:
                    return False
                readable(self._conn.fileno(), left)
        except driver.OperationalError:
            self._close()
        return True

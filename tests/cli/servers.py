"""A ``storm-queue serve`` for a test: a real process (signals, sockets and
threads are what is under test), its address read from its first line on
stderr, ended at the end of the test; and HTTP requests to it through the
standard library, each with a timeout."""

from __future__ import annotations

import http.client
import os
import re
import selectors
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.conftest import PYTHON_M, clean_env

ADDRESS = re.compile(r"on http://(\[[0-9a-f:]+\]|[0-9.]+):(\d+)/")


def _default_sigint() -> None:
    """A child gets SIGINT back at its default (the suite may run with it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Served:
    """A running ``serve``: its process, host, port and the stderr read so far."""

    def __init__(self, proc: subprocess.Popen, host: str, port: int, said: str):
        self.proc, self.host, self.port, self.said = proc, host, port, said

    def get(self, path: str, method: str = "GET", headers: dict | None = None, timeout: float = 30):
        """(status, headers, body) of one request."""
        conn = http.client.HTTPConnection(self.host.strip("[]"), self.port, timeout=timeout)
        try:
            conn.request(method, path, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 20) -> tuple[int, str]:
        """Send ``signum``; its exit code and the rest of its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=timeout)
        self.said += err
        return self.proc.returncode, self.said


@contextmanager
def serving(root: str, *args: str, env: dict | None = None, timeout: float = 60) -> Iterator[Served]:
    """``storm-queue serve --root ROOT --port 0 ARGS``, until the block ends."""
    proc = subprocess.Popen([*PYTHON_M, "serve", "--root", root, "--port", "0", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or clean_env(),
                            preexec_fn=_default_sigint)
    said = ""
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)
        end = time.monotonic() + timeout
        found = None
        while found is None:
            left = end - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                raise AssertionError(f"serve did not say its address: exit {proc.poll()}, stderr {said!r}")
            if sel.select(left):
                line = proc.stderr.readline()
                said += line
                found = ADDRESS.search(line)
        sel.close()
        served = Served(proc, found.group(1), int(found.group(2)), said)
        yield served
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=20)


def wait_for(check, timeout: float = 10.0, every: float = 0.05):
    """``check()``'s first true value within ``timeout`` seconds, else AssertionError."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= end:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(every)


def token_file(tmp: Path, token: str = "s3cret-token-0123456789abcdef") -> Path:
    path = tmp / "token"
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return path

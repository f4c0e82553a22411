"""Headless Chromium for the tests, driven through chromedriver's W3C
WebDriver HTTP API with the standard library's urllib (no Python
dependency): Debian's ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them when missing). ``Browser`` starts chromedriver on a free
port, opens one session in a fresh profile, and ends both (every wait
bounded). Chromium as root needs --no-sandbox."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

#: where Debian's packages put them
CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic", "--disable-dev-shm-usage",
        "--no-default-browser-check", "--window-size=1280,900")


def found() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed, else None."""
    browser = next((p for p in CHROMIUM if os.access(p, os.X_OK)), None)
    driver = next((p for p in DRIVER if os.access(p, os.X_OK)), shutil.which("chromedriver"))
    return (browser, driver) if browser and driver else None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Browser:
    """One headless Chromium session: ``go(url)``, ``run(script, *args)``
    (its return value), ``screenshot()`` (PNG bytes); ``close()`` ends it."""

    def __init__(self, browser: str, driver: str, timeout: float = 60):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="storm-chromium-")
        self.port = _free_port()
        self.driver = subprocess.Popen([driver, f"--port={self.port}"], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_default_sigint,
                                       start_new_session=True)
        self.session = None
        end = time.monotonic() + timeout
        while True:
            try:
                if self._call("GET", "/status", timeout=2)["value"].get("ready"):
                    break
            except (OSError, urllib.error.URLError, ValueError):
                pass
            if time.monotonic() > end or self.driver.poll() is not None:
                self.close()
                raise RuntimeError(f"chromedriver did not start (exit {self.driver.poll()})")
            time.sleep(0.1)
        caps = {"browserName": "chrome", "goog:chromeOptions": {
            "binary": browser, "args": [*ARGS, f"--user-data-dir={self.profile}"]}}
        try:
            self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["value"]["sessionId"]
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"webdriver {method} {path}: {exc.code} {exc.read()[:500]!r}") from None

    def go(self, url: str) -> None:
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str, *args: object) -> object:
        return self._call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": list(args)})["value"]

    def screenshot(self) -> bytes:
        return base64.b64decode(self._call("GET", f"/session/{self.session}/screenshot")["value"])

    def close(self) -> None:
        try:
            if self.session is not None:
                self._call("DELETE", f"/session/{self.session}", timeout=20)
        except (OSError, RuntimeError, urllib.error.URLError):
            pass
        finally:
            self.session = None
            if self.driver.poll() is None:
                try:
                    os.killpg(self.driver.pid, signal.SIGTERM)
                    self.driver.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    os.killpg(self.driver.pid, signal.SIGKILL)
                    self.driver.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

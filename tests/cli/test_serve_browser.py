"""Issue 34 item 4: the web view in a real browser. ``storm-queue serve``
runs on a storm (a real process: its socket and threads are what is under
test) and headless Chromium (Debian's ``chromium``, driven by
``chromium-driver`` over WebDriver: ``tests/browser.py``) loads its pages;
the test reads the DOM the browser rendered: the lanes in run order, a
hostile reason shown as text (no element injected), the live update after
a bump within 2 seconds (no reload), the log page's refusals. Under CI a
missing browser fails the test rather than skip it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.browser import Browser, found
from tests.cli.servers import serving
from tests.conftest import in_ci, run_cli

pytestmark = pytest.mark.slow

HOSTILE = '<img src=x onerror="document.title=1"><b>bold</b> & "quotes"'
ROWS = "return Array.from(document.querySelectorAll('#lanes tbody tr')).map(tr => tr.children[1].textContent)"


@pytest.fixture
def browser():
    tools = found()
    if tools is None:
        if in_ci():
            pytest.fail("chromium and chromedriver are not installed (CI is set: the browser test must run; "
                        ".ci/run installs them)", pytrace=False)
        pytest.skip("chromium and chromedriver are not installed: apt-get install chromium chromium-driver")
    with Browser(*tools) as b:
        yield b


def test_the_view_in_a_browser_follows_the_storm(storm, browser: Browser) -> None:
    root = storm("schema 12\napi 13 schema\ndocs 15\nbilling 17 api\n")
    assert run_cli(root, "bump", "billing", "--reason", HOSTILE).returncode == 0
    assert run_cli(root, "bump", "ghost", "--reason", "typo").returncode == 2
    with serving(str(root)) as srv:
        browser.go(f"http://127.0.0.1:{srv.port}/")
        assert browser.run(ROWS) == ["schema", "api", "billing", "docs"]  # the run order, the bump's pulled forward
        assert browser.run("return document.querySelectorAll('main img, main b').length") == 0  # nothing injected
        assert browser.run("return document.title") == "Run order · storm-queue"  # no handler ran
        shown = browser.run("return document.querySelector('#lanes').textContent")
        assert '<img src=x onerror=\\"document.title=1\\"><b>bold</b> & \\"quotes\\"' in shown  # the reason, as text
        assert browser.run("return document.body.getAttribute('data-version')")

        browser.run("window.stillThisPage = true")  # a reload would forget it
        for change, order in ((("unbump", "billing"), ["schema", "api", "docs", "billing"]),
                              (("bump", "docs"), ["docs", "schema", "api", "billing"])):
            assert run_cli(root, *change).returncode == 0  # from outside: the open page follows, unreloaded
            changed = time.monotonic()
            while browser.run(ROWS) != order and time.monotonic() - changed < 2.0:
                time.sleep(0.05)
            assert browser.run(ROWS) == order, change
            assert time.monotonic() - changed < 2.0, change
        assert browser.run("return window.stillThisPage === true")  # updated in place, never reloaded

        browser.go(f"http://127.0.0.1:{srv.port}/log?action=refused")
        refused = browser.run("return Array.from(document.querySelectorAll('#events tbody tr.refused'))"
                              ".map(tr => tr.children[5].textContent)")
        assert len(refused) == 1 and "unknown_slug" in refused[0]
        browser.go(f"http://127.0.0.1:{srv.port}/lane/billing")
        assert "billing: waiting" in browser.run("return document.querySelector('main').textContent")


def screenshot(out: Path) -> None:
    """``docs/img/serve.png``: the view of a copy of the bundled example
    storm after a few requests, as headless Chromium draws it:
    ``python -m tests.cli.test_serve_browser docs/img/serve.png``."""
    import shutil
    import tempfile

    from tests.conftest import REPO

    tools = found()
    assert tools is not None, "apt-get install chromium chromium-driver"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "spring"
        shutil.copytree(REPO / "examples" / "storm", root)
        for args in (("bump", "billing", "--reason", "customer outage"), ("bump", "docs", "--reason", "release notes due"),
                     ("claim", "--holder", "runner-1"), ("bump", "dashboard", "--reason", "typo")):
            run_cli(root, *args)
        with serving(str(root)) as srv, Browser(*tools) as b:
            b.go(f"http://127.0.0.1:{srv.port}/")
            b.run("document.querySelector('header p code').textContent = '~/storms/spring'")
            out.write_bytes(b.screenshot())


if __name__ == "__main__":
    import sys

    screenshot(Path(sys.argv[1]))

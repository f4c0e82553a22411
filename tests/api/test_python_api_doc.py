"""The example runner loop of docs/python-api.md, taken from the page and
run against a storm of each kind (tests/stores.py), so that the page
cannot rot: it runs every lane, finishes each ok, and stops when only the
operator's review is left."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from tests.conftest import clean_env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def example() -> str:
    """The one ```python block under the page's "An example runner loop"."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("### An example runner loop"):]
    found = re.search(r"^```python\n(.*?)^```$", section, re.S | re.M)
    assert found, "docs/python-api.md: no ```python block under 'An example runner loop'"
    return found.group(1)


def test_the_example_runner_loop_runs_every_lane_and_stops(store, monkeypatch, capsys):
    code = example()
    assert "storm.lease(" in code and "NothingLeased" in code
    store.make("api 13\ndocs 20\n", toml="[runner]\nttl = 60\nslots = 1\n",
               unattended=True)
    monkeypatch.setattr("os.environ", clean_env(STORM_QUEUE_ROOT=store.root))
    ran: list[BaseException | None] = []

    def run() -> None:
        try:
            exec(compile(code, str(PAGE), "exec"), {"__name__": "python_api_example"})  # noqa: S102 -- the page's
            ran.append(None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            ran.append(exc)

    loop = threading.Thread(target=run, daemon=True)  # (a daemon: a loop that never stops fails, never hangs)
    loop.start()
    loop.join(120)
    assert ran == [None], ran or "the example's loop did not stop within 120 s"
    said = capsys.readouterr().out.splitlines()
    assert said == ["running api (issue 13, token 1)", "api finished ok (token 1); it awaits review",
                    "running docs (issue 20, token 1)", "docs finished ok (token 1); it awaits review",
                    "stopping: wait api docs"], said
    finishes = [(e["slug"], e["result"]) for e in store.events() if e["action"] == "finish"]
    assert finishes == [("api", "ok"), ("docs", "ok")]
    assert store.result("api") is not None and store.result("docs") is not None

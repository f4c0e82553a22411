"""The documentation's pictures (docs/img/*.svg) are what ``python -m
storm_queue.cli.pictures --write docs/img`` makes today: made again into a
temporary folder, they must equal the committed ones. The text each shows
(its <desc>) must always match; the bytes too, when the installed rich is
the one that made them (another rich draws the same text a little
differently, which is not staleness)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from storm_queue.cli import pictures

REPO = Path(__file__).resolve().parent.parent.parent
IMG = REPO / "docs" / "img"
FIX = f"run `{pictures.REGENERATE}`"


def desc(svg: str) -> str:
    found = re.search(r"<desc>(.*?)</desc>", svg, re.S)
    assert found, "a picture without its <desc>"
    return html.unescape(found.group(1))


def made_with(svg: str) -> str:
    found = re.search(r"with rich (\S+); do not edit", svg)
    assert found, "a picture that does not say which rich made it"
    return found.group(1)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("img")
    assert pictures.main(["--write", str(out)]) == 0
    return out


def test_every_picture_is_committed_and_no_other(fresh):
    assert sorted(p.name for p in fresh.iterdir()) == sorted(f"{name}.svg" for name, _, _ in pictures.PICTURES)
    assert sorted(p.name for p in IMG.glob("*.svg")) == sorted(p.name for p in fresh.iterdir()), FIX


def test_the_pictures_are_fresh(fresh):
    for made in sorted(fresh.iterdir()):
        held = (IMG / made.name).read_text()
        new = made.read_text()
        assert desc(held) == desc(new), f"docs/img/{made.name} shows what the commands no longer print; {FIX}"
    if any(made_with((IMG / made.name).read_text()) != pictures.rich_version() for made in fresh.iterdir()):
        pytest.skip(f"the pictures were made with another rich than {pictures.rich_version()}: their text is "
                    f"checked, their bytes are not")
    for made in sorted(fresh.iterdir()):
        assert (IMG / made.name).read_text() == made.read_text(), f"docs/img/{made.name} is stale; {FIX}"


def test_the_pictures_show_the_story():
    """The list shows the priority lane with who put each lane there, and a
    lane under a runner's lease; why explains a pulled-forward lane."""
    listing = desc((IMG / "list.svg").read_text())
    assert "$ storm-queue list" in listing and "next: run docs 15" in listing
    assert "operator:alice for billing" in listing and "source:nightly-triage" in listing
    # each lane one line at 100 columns (issue 20 item 10): the lease's detail is cut with an ellipsis
    assert "running now: held by runner-…" in listing
    why = desc((IMG / "why.svg").read_text())
    assert why.startswith("$ storm-queue why api\napi: waiting") and "pulled forward for billing" in why


def test_making_the_pictures_leaves_the_process_as_it_was():
    import time

    from storm_queue import wall
    from storm_queue.store.directory import accounts

    before = (time.time, wall.clock, accounts.account_name)
    pictures.pictures()
    assert (time.time, wall.clock, accounts.account_name) == before

"""Where a storm is: a directory holding one of its files, or a
PostgreSQL URL."""

from __future__ import annotations

import os

from .errors import NoStorm
from .names import printable, quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

#: a directory is a storm when it holds one of these; ``init`` makes one
STORM_FILES = ("queue.txt", "storm.toml", "priority.log", ".priority.log.witness")


def find_root(root: str | None, env: Mapping[str, str], cwd: str | None = None) -> str:
    """The storm root: ``root``, else ``$STORM_QUEUE_ROOT`` (either must be
    a storm: a directory holding one of ``STORM_FILES``; a PostgreSQL URL is
    returned as it is), else the nearest directory at or above ``cwd``
    holding ``queue.txt`` or ``storm.toml``."""
    given = root or env.get("STORM_QUEUE_ROOT")
    if given and is_url(given):
        return given
    if given:
        if not os.path.isdir(given):
            raise NoStorm(f"storm root {quote(given)} is not a directory; pass --root DIR for an existing storm")
        if os.access(given, os.X_OK) and not any(os.path.lexists(os.path.join(given, f)) for f in STORM_FILES):
            from shlex import quote as sh

            raise NoStorm(f"{printable(given)} is not a storm (no queue.txt or storm.toml): "
                          f"create one with storm-queue init {sh(printable(given))}")
        return os.path.abspath(given)
    here = os.path.abspath(cwd or os.getcwd())
    while True:
        if any(os.path.exists(os.path.join(here, f)) for f in ("queue.txt", "storm.toml")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise NoStorm(
                "no storm here: no queue.txt or storm.toml in this directory or above it; "
                "cd into a storm, pass --root DIR, or set STORM_QUEUE_ROOT"
            )
        here = parent


def is_url(root: str) -> bool:
    """Whether ``root`` names a database storm (a libpq URL) rather than a directory."""
    return root.startswith(("postgresql://", "postgres://"))

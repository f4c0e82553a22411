"""``storm.toml``, the operator's reviewed declaration, read into a frozen value.

"There is no declaration" (absent) and "I could not read the declaration"
(unreadable, or a bad ``sources``) are different results, never confused.
"""

from __future__ import annotations

import os

from .names import is_name
from .records import dataclass

DEFAULT_LOG = "priority.log"
RESERVED_SOURCES = frozenset({"operator"})


@dataclass(frozen=True)
class Declaration:
    """What ``storm.toml`` says.

    ``log_error`` is set when the file cannot be read as TOML (or its ``log``
    key is unusable): the log's place, and so the order, is unknown.
    ``sources_error`` is set when the log's place is known but ``sources`` is
    not a list of names: every request is refused, and the refusal recorded.
    """

    present: bool
    log: str = DEFAULT_LOG
    sources: tuple[str, ...] = ()
    log_error: str | None = None
    sources_error: str | None = None

    @property
    def error(self) -> str | None:
        return self.log_error or self.sources_error


def _log_path(value: object) -> str | None:
    """A log path is relative to the root, made of names, with no ``..``."""
    if not isinstance(value, str):
        return None
    parts = value.split("/")
    return value if all(is_name(p) for p in parts) else None


def parse(text: str) -> Declaration:
    """Return the declaration that the TOML ``text`` makes."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Declaration(True, log_error=f"storm.toml is not valid TOML ({exc})")
    priority = data.get("priority", {})
    if not isinstance(priority, dict):
        return Declaration(True, log_error="storm.toml: [priority] must be a table")
    log = _log_path(priority.get("log", DEFAULT_LOG))
    if log is None:
        return Declaration(
            True,
            log_error="storm.toml: [priority] log must be a relative path of names, "
            f"such as {DEFAULT_LOG!r}",
        )
    sources = priority.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        return Declaration(True, log, sources_error="storm.toml: [priority] sources must be a list of names")
    bad = [s for s in sources if not is_name(s) or s in RESERVED_SOURCES]
    if bad:
        return Declaration(
            True,
            log,
            sources_error=f"storm.toml: [priority] sources lists {bad[0]!r}, which cannot be "
            "declared (a source is a name, and 'operator' is reserved)",
        )
    return Declaration(True, log, tuple(sources))


def load(root: str) -> Declaration:
    """Read ``<root>/storm.toml``; a missing file declares no source."""
    path = os.path.join(root, "storm.toml")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return Declaration(False)
    except OSError as exc:
        return Declaration(True, log_error=f"storm.toml cannot be read ({exc.strerror})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Declaration(True, log_error="storm.toml is not UTF-8 text")
    return parse(text)

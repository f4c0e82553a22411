"""A directory storm's declaration: ``<root>/storm.toml``, read and parsed."""

from __future__ import annotations

import os

from ...core.config import Declaration, parse
from ...core.records import replace
from .fsutil import open_file


def load(root: str) -> Declaration:
    """Read ``<root>/storm.toml``; a missing file declares no source."""
    path = os.path.join(root, "storm.toml")
    try:
        with os.fdopen(open_file(path), "rb") as f:
            st = os.fstat(f.fileno())
            raw = f.read()
    except FileNotFoundError:
        return Declaration(False)
    except OSError as exc:
        return Declaration(True, log_error=f"storm.toml cannot be read ({exc.strerror})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Declaration(True, log_error="storm.toml is not UTF-8 text", stat=st)
    return replace(parse(text), stat=st)

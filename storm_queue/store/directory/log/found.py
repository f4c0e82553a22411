"""Where a log's witness lives."""

from __future__ import annotations

from ..fsutil import beside


def witness_path(log_path: str) -> str:
    """Where the witness of ``log_path`` lives: ``.<log name>.witness`` beside it."""
    return beside(log_path, "witness")


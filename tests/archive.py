"""Unpacking a tar archive of this repository's own history (``git
archive``) on every Python the package supports (3.11 and later):
``extractall(filter=...)`` came in 3.11.4 (and 3.12)."""

from __future__ import annotations

import tarfile
from pathlib import Path


def extract(archive: Path | str, into: Path | str) -> None:
    """Unpack ``archive`` into ``into``: through the ``data`` filter where
    this Python has one (3.11.4 and later), else as it is. Only for an
    archive this repository's git made: without the filter a hostile
    archive could write outside ``into``, but ``git archive`` of our own
    commit holds only the commit's files."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)

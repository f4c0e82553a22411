"""A file the caller names, read whole: ``--from FILE``, ``--reason-file
FILE``, the declaration ``declare`` records. The one place outside the
stores where a file is read by a name the caller gave (a storm's own
files are its store's)."""

from __future__ import annotations


def read(path: str, flag: str, nothing: str = "nothing was done", stdin: bool = True) -> bytes:
    """The bytes of the file ``flag PATH`` names (``-``: standard input,
    unless not ``stdin``); ``BadArgument`` (exit 2) when it cannot be read,
    saying why and ``nothing`` (what was not done)."""
    import sys

    from .core.errors import BadArgument

    try:
        if path == "-" and stdin:
            return sys.stdin.buffer.read()
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise BadArgument(f"{flag} {path}: cannot read it ({exc.strerror}); {nothing}") from None

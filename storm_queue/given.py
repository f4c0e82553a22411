"""A file the caller names, read whole: ``--from FILE``, ``--reason-file
FILE``, the declaration ``declare`` records. The one place outside the
stores where a file is read by a name the caller gave (a storm's own
files are its store's)."""

from __future__ import annotations


#: the most a named file may hold, in bytes (64 MiB): a larger one is refused after reading one byte more,
#: so that a file without end (``/dev/zero``, a stream) is never read into memory whole
MOST = 64 << 20


def read(path: str, flag: str, nothing: str = "nothing was done", stdin: bool = True) -> bytes:
    """The bytes of the file ``flag PATH`` names (``-``: standard input,
    unless not ``stdin``); ``BadArgument`` (exit 2) when it cannot be read
    or holds more than ``MOST`` bytes, saying why and ``nothing`` (what
    was not done), and ``PATH`` with any password masked (a URL given
    where a file goes: ``core.passwords.hidden``)."""
    import sys

    from .core.errors import BadArgument
    from .core.passwords import hidden

    try:
        if path == "-" and stdin:
            data = sys.stdin.buffer.read(MOST + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MOST + 1)
    except OSError as exc:
        raise BadArgument(f"{flag} {hidden(path)}: cannot read it ({exc.strerror}); {nothing}") from None
    if len(data) > MOST:
        raise BadArgument(f"{flag} {hidden(path)}: it holds more than {MOST:,} bytes, more than storm-queue reads from a "
                          f"file; {nothing}")
    return data

"""What the server needs of Python's Unicode tables to write a refusal's
words as the Python path writes them: ``core/names.quote`` escapes every
character ``str.isprintable`` calls not printable, and the server's
``storm_queue.quoted`` (sql/functions/quoted.sql) looks them up in
``storm_queue.unprintable``, which init, migrate and an upgrade fill from
``unprintable.txt`` (written from Python's ``unicodedata``: a Python of
another Unicode version differs on the characters assigned between them,
nowhere else).

``python -m storm_queue.store.postgres.unicode --write`` writes the file
anew from this Python's tables."""

from __future__ import annotations

import os

_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unprintable.txt")


def computed() -> list[tuple[int, int]]:
    """The ranges (first, last) of code points from U+0080 that this
    Python's ``str.isprintable`` calls not printable."""
    out, start = [], None
    for code in range(0x80, 0x110000):
        if chr(code).isprintable():
            if start is not None:
                out.append((start, code - 1))
                start = None
        elif start is None:
            start = code
    if start is not None:
        out.append((start, 0x10FFFF))
    return out


def kept() -> tuple[str, list[tuple[int, int]]]:
    """The Unicode version and the ranges ``unprintable.txt`` holds."""
    version, ranges = "", []
    with open(_FILE, encoding="ascii") as f:
        for line in f:
            if line.startswith("#"):
                if "Unicode " in line:
                    version = line.split("Unicode ", 1)[1].split(" ", 1)[0]
                continue
            first, last = line.split()
            ranges.append((int(first, 16), int(last, 16)))
    return version, ranges


def write_unprintable(conn) -> None:
    """Fill ``storm_queue.unprintable`` from the file (in the caller's transaction)."""
    from .queries import q

    _, ranges = kept()
    conn.execute(q("fill_unprintable"), ([lo for lo, _ in ranges], [hi for _, hi in ranges]))


def main() -> None:
    import sys
    import unicodedata

    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m storm_queue.store.postgres.unicode --write")
    with open(_FILE, "w", encoding="ascii") as f:
        f.write("# The code points from U+0080 that Python's str.isprintable calls not printable (core/names.escape writes\n"
                f"# them as escapes), as ranges: first and last, hex. Unicode {unicodedata.unidata_version} (Python's\n"
                "# unicodedata). storm_queue.unprintable holds them (unicode.py); regenerate with:\n"
                "#   python -m storm_queue.store.postgres.unicode --write\n")
        f.writelines(f"{first:x} {last:x}\n" for first, last in computed())


if __name__ == "__main__":
    main()

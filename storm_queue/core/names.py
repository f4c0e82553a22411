"""The allow-list for names (slugs, dependencies, sources) and issues, and the
escaping of outside text before it reaches a terminal or ``progress.log``."""

from __future__ import annotations

MAX_NAME = 200
#: the punctuation a name may hold after its first character (``str.translate`` drops it)
_PUNCTUATION = str.maketrans("", "", "._-")


#: the most digits of an int written out in full (``figure``): as many as ``str`` writes by default
#: (``sys.get_int_max_str_digits``), so every number it wrote before is written as it was
FIGURE_DIGITS = 4300
#: log10(2): an int of b bits has about b * this many digits
_LOG2 = 0.30102999566398119521


def figure(n: int) -> str:
    """The int ``n`` (any size: a caller's token, TTL or wait) written for a
    message or a key's fingerprint: as ``str`` writes it up to
    ``FIGURE_DIGITS`` digits (``12``, ``-7``, ``True``), else its first ten
    digits and how many it has (``1000000000...(5,001 digits)``). Never the
    ``ValueError`` that ``str`` raises past ``sys.get_int_max_str_digits``
    digits: a caller's number is said, not a crash."""
    size = abs(n)
    if size < 10**FIGURE_DIGITS:
        try:
            return str(n)
        except ValueError:  # the process set str's limit lower: as a longer number
            pass
    digits = int((size.bit_length() - 1) * _LOG2) + 1  # the count, or one less
    if size >= 10**digits:
        digits += 1
    head = size // 10 ** (digits - 10)
    return f"{'-' if n < 0 else ''}{head:d}...({digits:,} digits)"


def is_name(text: str) -> bool:
    """True when ``text`` may be a slug, a dependency or a source name: at
    most ``MAX_NAME`` characters matching ``[A-Za-z0-9][A-Za-z0-9._-]*``
    (ASCII), without ``..``. (String methods, not a pattern: compiling one
    costs every command's start-up more than all its names' checks.)"""
    return (
        len(text) <= MAX_NAME
        and text.isascii()
        and text[:1].isalnum()
        and text.translate(_PUNCTUATION).isalnum()
        and ".." not in text
    )


def is_issue(text: str) -> bool:
    """True when ``text`` is an issue: ASCII digits (``[0-9]+``), or ``-`` for none."""
    return text == "-" or (len(text) <= MAX_NAME and text.isascii() and text.isdigit())


def why_not_name(text: str) -> str:
    """Say in words why ``text`` is not a name (assumes ``is_name`` is false)."""
    if not text:
        return "it is empty"
    if len(text) > MAX_NAME:
        return f"it is longer than {MAX_NAME} characters"
    if ".." in text:
        return "it contains '..'"
    return "a name is letters, digits, '.', '_' and '-', starting with a letter or digit"


def as_text(arg: str) -> str:
    """Return command-line text as valid Unicode: bytes that were not UTF-8
    (carried as surrogate escapes) become ``\\xNN``, any other lone
    surrogate ``\\udNNN``, so the text can be stored.
    ``TypeError`` for what is not a ``str`` (a caller of the Python API
    passing a number or bytes), before anything is asked."""
    if not isinstance(arg, str):
        raise TypeError(f"expected text (a str), not {type(arg).__name__}: {arg!r:.60}")
    try:
        arg.encode("utf-8")
        return arg
    except UnicodeEncodeError:
        pass
    try:
        return arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate no byte stands for (a Python caller's "\ud800"): \ud800, visibly
        return arg.encode("utf-8", "backslashreplace").decode("utf-8")


def escape(text: str) -> str:
    """Return ``text`` with every backslash and non-printable character
    (newline, carriage return, escape, U+2028, ...) written as a backslash
    escape, so the result is one line that prints only what it says."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    return "".join(out)


def printable(text: str) -> str:
    """Return ``text`` unchanged when it is already one printable line (as
    text built with ``quote`` is), else escaped: a last guard before output
    that never escapes twice."""
    return text if text.isprintable() else escape(text)


def quote(text: str) -> str:
    """Return ``text`` escaped and in double quotes: outside text as data."""
    return '"' + escape(text).replace('"', '\\"') + '"'


#: how much of an outside text a report quotes when it is too long to be any name (a name's limit, and some)
SHOWN = 256


def clipped(text: str, limit: int = SHOWN) -> str:
    """``text``, or its first ``limit`` characters and how many more there
    are: a report about a text too long to be anything quotes it, never
    copies it whole (one damaged queue.txt line of a megabyte was copied
    twice into every listing and into progress.log)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def why_not_issue(text: str) -> str:
    """Say in words why ``text`` is not an issue (assumes ``is_issue`` is
    false), as the predicate of "issue TEXT ..."."""
    if text.isascii() and text.isdigit():
        return f"is {len(text):,} digits, longer than {MAX_NAME}"
    return "is not ASCII digits or '-'"

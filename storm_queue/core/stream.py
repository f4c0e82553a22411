"""The checks every line of a priority log passes, over a stream of lines,
wherever the lines are kept: each line's framing and schema (the rules of
``framing.decode``), ``seq`` from one without gaps, the chain from the first
line, and the fold.

``LineCheck`` holds the one copy of those checks. The reader gives it the
log file's bytes in blocks of whole lines (and checks the witness and the
torn tail itself); ``verify.check_lines`` gives it lines from anywhere.

Each line is parsed once. On the quick path the JSON of a block of ASCII
lines is decoded as one text and each line's object is parsed in place by
the parser ``json.loads`` uses; then what ``decode`` checks is asked of the
parsed event by checks compiled per action from the same schema
(``framing.QUICK``). A line that does not pass that way (damage, a line a
person wrote by hand, text that is not ASCII) goes through ``decode`` and
the plain checks, which say what is wrong exactly as they always have: the
quick path only ever accepts what they accept.
"""

from __future__ import annotations

from . import fold
from .framing import QUICK, Malformed, decode, sha256
from .jsoncodec import scanner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: the bytes a reader takes at a time: memory stays flat in the log's length
BLOCK = 1 << 16


def bulk_sha256() -> Callable[[bytes], Any]:
    """The fastest SHA-256 at hand for many lines: OpenSSL's (slower to load
    than the interpreter's own, which commands reading a few lines keep)."""
    try:
        from _hashlib import openssl_sha256
    except ImportError:  # pragma: no cover -- a Python built without OpenSSL
        return sha256
    return openssl_sha256


class Bad(Exception):
    """The first line that fails: ``what`` is wrong, at line ``line``
    (1-based), which starts at byte ``offset``."""

    def __init__(self, what: str, line: int, offset: int):
        super().__init__(what)
        self.what, self.line, self.offset = what, line, offset


class LineCheck:
    """Check and fold lines in order, from ``state`` after line ``seq``
    (whose chain digest is ``digest``) at byte ``offset``: the first line
    given must have ``seq + 1`` and ``prev`` equal to ``digest``.

    ``seq``, ``digest`` and ``offset`` always describe the last line that
    passed. A failing line raises ``Bad`` and leaves them at the line
    before it. ``each(line, event)`` is called for every line that passed,
    in order; ``keep_events`` keeps the events in ``events``. ``quick``
    takes the quick path (worth its set-up from a few hundred lines on; the
    answers are the same without it); ``bulk`` the SHA-256 fastest for many
    lines (slower to load)."""

    def __init__(self, state: fold.LaneState = fold.EMPTY, seq: int = 0, digest: str | None = None,
                 offset: int = 0, *, keep_events: bool = False,
                 each: Callable[[bytes, dict[str, Any]], None] | None = None,
                 quick: bool = True, bulk: bool = False):
        self.seq, self.digest, self.offset = seq, digest, offset
        self.folder = fold.Fold(state)
        self.events: list[dict[str, Any]] | None = [] if keep_events else None
        self.each = each
        self._sha = bulk_sha256() if bulk else sha256
        self._scan = scanner() if quick else None
        self._names: set[str] = set()  # text already found to be names (bounded)

    def state(self) -> fold.LaneState:
        """The lane state folded so far."""
        return self.folder.state()

    def block(self, data: bytes) -> None:
        """Check and fold the whole lines in ``data``, which ends in a newline
        (the bytes of a log file: a line ends at each newline)."""
        if data:
            self._check(data, self._text(data), True)

    def lines(self, lines: list[bytes]) -> None:
        """Check and fold ``lines``, each the bytes of one line as stored,
        ending in its newline. A line that is not exactly that is malformed."""
        for i, line in enumerate(lines):
            if line[-1:] != b"\n" or line.find(b"\n") != len(line) - 1:
                self.lines(lines[:i])  # the lines before it are checked first
                number = self.seq + 1
                raise Bad(f"line {number} is malformed: it is not one line ending in a newline", number, self.offset)
        if lines:
            data = b"".join(lines)
            self._check(data, self._text(data), True)

    def line(self, line: bytes) -> dict[str, Any]:
        """Check and fold one whole line and return its event, without
        telling ``each`` or keeping it (``tell`` does, once the caller's own
        checks of this line pass)."""
        return self._check(line, self._text(line), False)

    def tell(self, line: bytes, event: dict[str, Any]) -> None:
        """What ``block`` and ``lines`` do with a line that passed."""
        if self.events is not None:
            self.events.append(event)
        if self.each is not None:
            self.each(line, event)

    def _text(self, data: bytes) -> str | None:
        """``data`` as text for the quick path, when it takes it and ``data`` is ASCII."""
        return data.decode("ascii") if self._scan is not None and data.isascii() else None

    def _plain(self, line: bytes, number: int, offset: int, prev: str | None) -> dict[str, Any]:
        """The checks of one line, one by one, saying what is wrong."""
        try:
            event = decode(line)
        except Malformed as exc:
            raise Bad(f"line {number} is malformed: {exc}", number, offset) from None
        if event["seq"] != number:
            raise Bad(f"line {number} has seq {event['seq']}, expected {number}", number, offset)
        if event["prev"] != prev:
            raise Bad(f"line {number} breaks the chain: its prev does not match line {number - 1}", number, offset)
        return event

    def _check(self, data: bytes, text: str | None, tell: bool) -> Any:
        """Check and fold the lines of ``data`` (whole lines); ``text`` is
        ``data`` as ASCII text, or None: each line is then checked plainly.
        Returns the last line's event."""
        scan, checks, names, find = self._scan, QUICK, self._names, data.find
        fresh, step, plain = self._sha().copy, self.folder.step, self._plain  # a copy of an empty digest: no set-up per line
        told = tell and (self.events is not None or self.each is not None)
        seq, prev, base = self.seq, self.digest, self.offset
        pos, limit = 0, len(data)  # the line being checked starts at byte base + pos
        event: Any = None
        try:
            while pos < limit:
                number = seq + 1
                end = find(b"\n", pos)  # the line is data[pos:end + 1]
                ok = False
                if text is not None:
                    try:  # the object at pos, parsed once, must be the whole line and pass decode's rules
                        event, stop = scan(text, pos)  # type: ignore[misc]
                        ok = stop == end and checks[event["action"]](event, names, number, prev)
                    except Exception:  # noqa: BLE001 -- anything odd is judged by the plain checks
                        ok = False
                line = data[pos:end + 1]
                if not ok:
                    event = plain(line, number, base + pos, prev)
                digest = fresh()
                digest.update(line)
                prev = digest.hexdigest()
                seq, pos = number, end + 1
                step(event)
                if told:
                    self.tell(line, event)
        finally:
            self.seq, self.digest, self.offset = seq, prev, base + pos
        return event

"""The shape checks of a request's arguments: each returns the refusal of
the first thing that is not what it must be, or None."""

from __future__ import annotations

from . import clock
from .lane import Refusal
from .names import as_text, figure, is_name, printable, quote, why_not_name


def optional_text(value: str | None) -> str | None:
    return None if value is None else as_text(value)


def optional_seconds(ttl: int | None) -> int | None:
    """A TTL as a Python caller gives it: None or whole seconds (an
    ``int``, not a ``bool``). ``TypeError`` in words for anything else,
    before anything is asked: a float TTL would be recorded in a claim's
    line that the log's reader refuses, damaging the storm."""
    if ttl is None or (isinstance(ttl, int) and not isinstance(ttl, bool)):
        return ttl
    raise TypeError(f"expected a TTL in whole seconds (an int), not {type(ttl).__name__}: {ttl!r:.60}")


def shape_holder(holder: str) -> Refusal | None:
    if not is_name(holder):
        return Refusal("invalid_holder", f"holder {quote(holder)} is not a name: {why_not_name(holder)}")
    return None


def shape_token(token: int) -> Refusal | None:
    if isinstance(token, bool) or not isinstance(token, int) or token < 1:
        said = figure(token) if isinstance(token, int) else str(token)
        return Refusal("invalid_token", f"token {quote(said)} is not a positive whole number; "
                       "give the token the claim printed")
    return None


KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@/+=-")


def shape_key(key: str | None) -> Refusal | None:
    """A key is 1 to 200 of letters, digits and ``._:@/+=-``."""
    if key is None or (0 < len(key) <= 200 and set(key) <= KEY_CHARS):
        return None
    return Refusal("invalid_key", f"key {quote(key)} is not 1 to 200 letters, digits or ._:@/+=- characters")


#: the longest reason a request records (characters)
REASON_MOST = 4096


def shape_reason(reason: str | None) -> Refusal | None:
    """A reason is at most ``REASON_MOST`` characters: a longer one is
    refused, and never recorded (it would be printed again with every lane
    it pulled forward)."""
    if reason is None or len(reason) <= REASON_MOST:
        return None
    return Refusal("reason_too_long", f"a reason of {len(reason):,} characters is longer than {REASON_MOST:,}: "
                   "shorten it (a reason says why in a sentence or two; link to the rest)")


#: the longest note a finish records (characters)
NOTE_MOST = 4096


def shape_note(note: str | None) -> Refusal | None:
    """A finish's note is at most ``NOTE_MOST`` characters: a longer one
    is refused, and never recorded (the refusal's line carries no note)."""
    if note is None or len(note) <= NOTE_MOST:
        return None
    return Refusal("note_too_long", f"a note of {len(note):,} characters is longer than {NOTE_MOST:,}: shorten it "
                   "(a note says how the lane ended; keep the rest in the lane's own output)")


def parse_when(text: str | None, refusal: Refusal | None, t: float) -> tuple[str | None, Refusal | None]:
    """The stamp of a ``--not-before`` time counted from the POSIX time
    ``t``, and the first shape refusal."""
    if text is None or refusal is not None:
        return None, refusal
    try:
        return clock.parse(text, t), None
    except ValueError as exc:
        return None, Refusal("invalid_time", f"--not-before: {printable(str(exc))}")


def when_at(text: str | None, now: str, earlier: str | None) -> str | None:
    """The stamp of a ``--not-before`` TEXT counted from NOW, the request's
    own time (its events' ``at``, taken under the lock), so ``+2h`` is two
    hours after the line that records it on either store, however long the
    request waited for its lock or its connection; EARLIER (``parse_when``'s,
    counted from before) when there is no TEXT or it no longer parses."""
    if text is None or earlier is None:
        return earlier
    try:
        return clock.parse(text, clock.seconds(now))
    except ValueError:
        return earlier


def shape_names(slug: str | None, deps: tuple[str, ...], source: str | None) -> Refusal | None:
    """The first shape error among the names a request carries."""
    if slug is not None and not is_name(slug):
        return Refusal("invalid_slug", f"slug {quote(slug)} is not a name: {why_not_name(slug)}")
    for dep in deps:
        if not is_name(dep):
            return Refusal("invalid_dependency", f"dependency {quote(dep)} is not a name: {why_not_name(dep)}")
    if source is not None and not is_name(source):
        return Refusal("invalid_source", f"source {quote(source)} is not a name: {why_not_name(source)}")
    return None

"""A batch of lanes to add at once (``add --from FILE``): lines in
``queue.txt``'s grammar, taken all or nothing. Pure: the text and the
storm's lanes and ledgers come in; the lanes to add, or every bad line
with its code and why, come back.

What makes a line bad, in the order a request judges it:

- its shape (``shape``, before authority and the lock): a slug, issue or
  dependency that is not one (``queuetext.lane``'s codes), or a slug the
  batch lists twice (``duplicate_slug``, naming the first line);
- against the storm (``lookups``, under the lock): a slug already queued
  (``duplicate_slug``: appended, queue.txt would keep its first line and
  skip the batch's), or a dependency on nothing (``dependency_unknown``):
  a dependency that is neither a queued lane, a settled one, nor a lane
  of the batch. A lane of the batch counts wherever its line is, before
  or after the line that needs it, as in queue.txt, whose order is the
  run order and not an order of definition: the batch is added whole or
  not at all, so every lane it names exists once it is added.

A batch with no lane (only blanks and comments, or nothing) is refused
(``empty_batch``): an empty input more often says that the step that made
it failed than that there is nothing to add."""

from __future__ import annotations

from . import queuetext
from .lane import Refusal
from .names import quote
from .records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping

#: how many bad lines a refusal names beside the first
MORE = 4


@dataclass(frozen=True)
class Bad:
    """A line the batch is refused for: its number, and its refusal."""

    line: int
    refusal: Refusal


@dataclass(frozen=True)
class Batch:
    """The lanes of a batch's good lines in order, its bad lines, and the
    fields of every line that is not blank nor a comment (what a key's
    fingerprint covers: the batch as written, comments aside)."""

    lanes: tuple[queuetext.Lane, ...]
    bad: tuple[Bad, ...]
    fields: tuple[tuple[str, ...], ...]


def shape(text: str) -> Batch:
    """The batch ``text`` holds: its lanes, and its lines bad in themselves."""
    lanes: list[queuetext.Lane] = []
    bad: list[Bad] = []
    fields: list[tuple[str, ...]] = []
    seen: dict[str, int] = {}
    for number, _, words in queuetext.lines(text):
        fields.append(tuple(words))
        found = queuetext.lane(words, number)
        if isinstance(found, tuple):
            bad.append(Bad(number, Refusal(*found)))
        elif found.slug in seen:
            bad.append(Bad(number, Refusal("duplicate_slug", f"slug {found.slug} is listed twice: first on line "
                                           f"{seen[found.slug]}")))
        else:
            seen[found.slug] = number
            lanes.append(found)
    return Batch(tuple(lanes), tuple(bad), tuple(fields))


def lookups(lanes: tuple[queuetext.Lane, ...], queued: Mapping[str, queuetext.Lane],
            settled: Callable[[str], bool]) -> tuple[Bad, ...]:
    """The lines of ``lanes`` (a batch good in shape) that the storm refuses:
    a slug ``queued`` already, a dependency that is neither queued, nor
    ``settled``, nor a lane of the batch."""
    ours = {lane.slug for lane in lanes}
    bad = []
    for lane in lanes:
        was = queued.get(lane.slug)
        if was is not None:
            bad.append(Bad(lane.line, Refusal("duplicate_slug", f"slug {lane.slug} is already queued (issue "
                                              f"{was.issue}); take its line out of the batch")))
            continue
        nothing = next((d for d in lane.deps if d not in ours and d not in queued and not settled(d)), None)
        if nothing is not None:
            bad.append(Bad(lane.line, Refusal("dependency_unknown", f"{lane.slug} depends on {nothing}, which is "
                                              "neither queued, settled, nor a lane of the batch")))
    return tuple(bad)


def refusal(bad: tuple[Bad, ...], name: str, done: str = "added", holds: str = "lane",
            give: str = "lines of SLUG ISSUE [DEPS], as queue.txt holds them") -> Refusal:
    """The refusal of a batch read from ``name`` whose bad lines are ``bad``
    (in line order; a line 0 is a lane the batch did not read from a line):
    the code of the first, and words naming it and the next few, saying
    that nothing was ``done``. ``bad`` empty: the batch
    holds no ``holds`` (``empty_batch``), and ``give`` says what it should."""
    if not bad:
        return Refusal("empty_batch", f"{name} holds no {holds} (only blank lines and comments, or nothing): nothing "
                       f"was {done}; give {give}")
    first, rest = bad[0], bad[1:]
    words = (f"{name} line {first.line}: " if first.line else "") + first.refusal.message  # line 0: no line to name
    if rest:
        named = ", ".join(f"line {b.line} ({b.refusal.code})" if b.line else b.refusal.code for b in rest[:MORE])
        words += f"; also {named}" + (f" and {len(rest) - MORE} more" if len(rest) > MORE else "")
    return Refusal(first.refusal.code, f"{words}; nothing was {done} (a batch is taken whole or not at all): correct "
                   f"the line{'s' if rest else ''} and ask again")


def source_name(path: str) -> str:
    """How a refusal names where the batch came from (``-``: standard input)."""
    return "standard input" if path == "-" else quote(path)


def counted(done: str, slugs: tuple[str, ...] | list[str], tail: str = "") -> str:
    """What a batch did to ``slugs``, counted and named (``queued 3 lanes:
    a b c``; of more than ten, the first and last five and how many between)."""
    n = len(slugs)
    words = f"{done} {lanes(n)}{tail}"
    if n <= 10:
        return f"{words}: {' '.join(slugs)}"
    return f"{words}: {' '.join(slugs[:5])}, {n - 10} more, {' '.join(slugs[-5:])}"


def lanes(n: int) -> str:
    """``1 lane``, ``2 lanes``."""
    return f"{n} lane{'' if n == 1 else 's'}"

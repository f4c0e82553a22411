"""Shell completion: the script each shell sources, and the slugs that
``queue.txt`` carries, for arguments that name a lane."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SHELLS = ("bash", "zsh", "fish")
PROG = "storm-queue"
COMPLETE_VAR = "_STORM_QUEUE_COMPLETE"


def script(shell: str, command: Any) -> str:
    """The completion script for ``shell`` (one of ``SHELLS``), as click
    writes it for ``command``, the ``storm-queue`` click group."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:
        raise ValueError(f"no completion for shell {shell!r}")
    return cls(command, {}, PROG, COMPLETE_VAR).source()


def queued_slugs(root: str | None, incomplete: str = "") -> list[str]:
    """The slugs ``queue.txt`` carries that start with ``incomplete``, in
    file order; none when there is no storm or it cannot be read (completion
    never fails). ``root`` is ``--root`` if given, else found as every
    command finds it."""
    import os

    from ..roots import find_root
    from ..store.directory import queuefile

    try:
        where = find_root(root, os.environ)
        queue = queuefile.read(os.path.join(where, "queue.txt"))
    except Exception:  # noqa: BLE001 -- completion offers nothing rather than a traceback
        return []
    return [lane.slug for lane in queue.lanes if lane.slug.startswith(incomplete)]


def complete_slug(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """click ``shell_complete`` for a SLUG argument."""
    return queued_slugs(_root(ctx), incomplete)


def complete_deps(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """click ``shell_complete`` for ``--deps A,B``: completes the last name."""
    head, comma, last = incomplete.rpartition(",")
    done = set(head.split(",")) if comma else set()
    prefix = head + comma
    return [prefix + slug for slug in queued_slugs(_root(ctx), last) if slug not in done]


def _root(ctx: Any) -> str | None:
    while ctx is not None:
        if ctx.params.get("root"):
            return ctx.params["root"]
        ctx = ctx.parent
    return None

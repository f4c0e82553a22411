"""Where a storm is kept. ``interface`` is the store interface (the
``Store`` and ``Effects`` protocols the request path calls); ``directory``
and ``postgres`` are its two implementations; ``roots.opened`` is the one
factory that looks at a root to choose one.

``Store``, ``Effects`` and ``Judged`` load on first use (the protocols need
``typing``, which a reader's start-up never pays for)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .interface import Effects, Judged, Store  # noqa: F401

__all__ = ["Store", "Effects", "Judged"]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import interface

    return getattr(interface, name)

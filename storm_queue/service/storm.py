"""The service: a storm, read fresh on every call. Every request goes shape
-> authority -> lock -> snapshot -> plan -> record (``passage``); every
reader takes a snapshot and the resolver. It never prints; it returns
results and raises typed errors. What a directory keeps in files a
database storm keeps in rows: those steps are the hooks of
``store.directory.store``."""

from __future__ import annotations

from ..core.halt import Halting
from ..core.outcome import Listing, Outcome  # noqa: F401 -- the answers, where the package's names point
from ..ops.adopt import Adoption
from ..store.directory.store import Directory
from .leases import Leases
from .passage import Passage
from .requests import Requests


class Storm(Requests, Leases, Adoption, Halting, Passage, Directory):
    """One storm directory, read fresh on every call, and every request on it.

    ``wait`` is how many seconds a writer waits for the writers' lock.
    """

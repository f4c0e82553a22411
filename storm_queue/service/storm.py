"""The service: a storm, read fresh on every call, over the store that
keeps it (``store.interface.Store``). Every request goes shape ->
authority -> lock -> snapshot -> plan -> record (``passage.request``);
every reader takes a snapshot and the resolver. It never prints; it
returns results and raises typed errors."""

from __future__ import annotations

from .. import wall
from ..core.outcome import Listing, Outcome  # noqa: F401 -- the answers, where the package's names point
from ..core.resolver import resolve
from ..roots import shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any, Callable, Mapping

    from ..core import config, logread, why
    from ..core.authority import Principal
    from ..core.tenure import Tenure
    from ..core.verify import Audit
    from ..store.interface import Store
    from .runner import Aside, Lease

#: each request kind, and the module whose function of that name serves it
#: (loaded on a kind's first use, so a command pays only for its own)
KINDS = {
    **dict.fromkeys(("bump", "unbump", "push", "add", "add_batch", "waive", "declare", "reset", "halt", "resume",
                     "hold", "unhold"),
                    "storm_queue.service.requests"),
    **dict.fromkeys(("settle", "settle_batch"), "storm_queue.service.settling"),
    **dict.fromkeys(("recover", "cancel", "unpark", "schedule"), "storm_queue.service.leases"),
}


class Storm:
    """One storm, and every request and reading of it.

    ``Storm(root)``, or ``Storm.find(root)``, opens whichever store
    ``root`` names (a directory, or a database by its URL; no root: as
    ``roots.find_root`` finds one, ``$STORM_QUEUE_ROOT`` or the storm
    around the working directory), ``NoStorm`` when it names no storm;
    ``Storm(store=...)`` is the storm over a store already open.
    ``wait`` is how many seconds a writer waits for the storm's lock.

    The requests are its methods, each the function of that name in the
    module ``KINDS`` gives, taking the storm first: ``bump``, ``unbump``,
    ``push``, ``add``, ``add_batch``, ``waive``, ``declare``, ``reset``,
    ``halt``, ``resume``, ``hold``, ``unhold`` (``service.requests``); ``settle``, ``settle_batch``
    (``service.settling``); ``recover``, ``cancel``, ``unpark``,
    ``schedule`` (``service.leases``). Each returns an ``Outcome``.
    A runner's requests are methods of their own, typed and documented
    (docs/python-api.md): ``claim``, ``renew``, ``finish``, ``release``,
    each returning the ``Outcome`` whose ``to_json()`` is the command's
    ``--json`` answer, and ``lease``, the runner's context manager.
    The requests of the operator's upkeep (``ops.adopt.adopt``,
    ``ops.upgrade.upgrade``, ``ops.grants.grant`` and ``revoke``) are
    functions of ``ops`` taking the storm first: ops calls the service,
    never the other way round.
    """

    def __init__(self, root: str | PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                 wait: float = 30.0, *, store: Store | None = None) -> None:
        if store is None:
            import os

            from ..roots import opened

            store = opened(root, os.environ if env is None else env, wait)
        self.store = store
        self._aside_kept: Aside | None = None

    @classmethod
    def find(cls, root: str | PathLike[str] | None = None, env: Mapping[str, str] | None = None,
             wait: float = 30.0) -> Storm:
        """The storm at ``root`` (else as ``roots.find_root`` finds it): a
        directory's, or the database's a URL names; ``Storm(root)``."""
        return cls(root, env, wait)

    def __getattr__(self, name: str) -> Callable[..., Outcome]:
        """A request kind (``KINDS``), bound to this storm."""
        home = KINDS.get(name)
        if home is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        import importlib
        from types import MethodType

        return MethodType(getattr(importlib.import_module(home), name), self)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(KINDS))

    def request(self, *args: Any, **kwargs: Any) -> Outcome:
        """The one request path (``passage.request``), loaded by the first
        request: a reader never loads it."""
        from .passage import request

        return request(self, *args, **kwargs)

    @property
    def root(self) -> str:
        """Where the storm is, as printed (a URL's password masked)."""
        return self.store.root

    @property
    def env(self) -> Mapping[str, str]:
        return self.store.env

    @property
    def wait(self) -> float:
        return self.store.wait

    def close(self) -> None:
        """Let go of what the store holds open (a database's connection),
        and of its leases' renewing twin's."""
        self.store.upkeep.close()
        if self._aside_kept is not None:
            self._aside_kept.storm.close()

    # -- a runner's requests ---------------------------------------------

    def claim(self, holder: str | None = None, ttl: int | None = None, wait: float = 0.0, key: str | None = None, *,
              source: str | None = None, reason: str | None = None,
              waiting: Callable[[Outcome], None] | None = None) -> Outcome:
        """``storm-queue claim``: take back orphaned leases, decide, and
        when the decision is ``run`` lease that lane to ``holder`` (default:
        this host and the parent process) for ``ttl`` seconds (default: the
        storm's ``[runner] ttl``) under a new fencing token: ``decision``
        is then ``run SLUG ISSUE TOKEN`` and ``slug``, ``token``,
        ``holder``, ``expires`` say the lease. Any other decision (``wait``,
        ``review ...``, ``empty``, ``halted``) leases nothing; with ``wait``
        seconds, ``wait`` and ``halted`` (and ``review`` for a caller who
        may not settle) are waited out for a change (``leases.claim``).
        ``key`` makes it one idempotent request. A refusal is an answer
        (``outcome == "refused"``), recorded."""
        from .leases import claim

        return claim(self, holder, ttl, source=source, reason=reason, key=key, wait=wait, waiting=waiting)

    def renew(self, slug: str, token: int, ttl: int | None = None, *, source: str | None = None,
              reason: str | None = None, key: str | None = None) -> Outcome:
        """``storm-queue renew``: extend the live lease on ``slug`` held
        under ``token`` by ``ttl`` seconds from now (default: the TTL it was
        claimed or last renewed with); ``expires`` is its new end. A lease
        that has ended is refused (``stale_fence``, ``lane_cancelled``)."""
        from .leases import renew

        return renew(self, slug, token, ttl, source=source, reason=reason, key=key)

    def finish(self, slug: str, token: int, result: str, note: str | None = None, then_claim: bool = False, *,
               holder: str | None = None, ttl: int | None = None, wait: float = 0.0, source: str | None = None,
               reason: str | None = None, key: str | None = None,
               waiting: Callable[[Outcome], None] | None = None) -> Outcome:
        """``storm-queue finish``: end the live lease on ``slug`` held
        under ``token`` with ``result`` ``ok`` (the lane awaits review) or
        ``failed`` (claimable again after the storm's backoff, or
        quarantined once its attempts are spent); ``note`` is kept with
        the result. ``then_claim`` (``finish --then-claim``): then claim,
        as ``claim`` does for ``holder`` and ``ttl``, in the same request
        (one hold of the lock; on a database one transaction); the claim's
        answer is ``Outcome.claim`` (None when the finish was refused),
        and ``wait`` seconds are waited for work after the finish as
        ``claim`` waits. ``key`` makes the pair one idempotent request."""
        from .finishing import finish

        return finish(self, slug, token, result, note, source=source, reason=reason, key=key, then_claim=then_claim,
                      holder=holder, ttl=ttl, wait=wait, waiting=waiting)

    def release(self, slug: str, token: int, *, source: str | None = None, reason: str | None = None,
                key: str | None = None) -> Outcome:
        """``storm-queue release``: give back the live lease on ``slug``
        held under ``token``; the lane may be claimed again at once (the
        attempt stays spent)."""
        from .leases import release

        return release(self, slug, token, source=source, reason=reason, key=key)

    def lease(self, holder: str | None = None, ttl: int | None = None, wait: float = 0.0) -> Lease:
        """A runner's lease as a context manager (``service.runner.Lease``):
        ``with storm.lease(ttl=60, wait=300) as lane:`` claims (waiting up
        to ``wait`` seconds for work), renews the lease every third of its
        TTL while the block runs, and finishes ``ok`` on a clean exit,
        ``failed`` (the exception's type name as the note) on an exception,
        which it re-raises. A lease that ends under the block (a cancel)
        stops the renewals and sets ``lane.cancelled`` and the event
        ``lane.stopped``; nothing more is recorded. A claim that leases
        nothing raises ``NothingLeased`` (its ``decision``: ``wait``,
        ``review``, ``empty``, ``halted``); a refused claim, ``Refused``."""
        from .runner import Lease

        return Lease(self, holder, ttl, wait)

    def _aside(self) -> Aside:
        """The storm leases renew on: the store's twin, made once and kept."""
        if self._aside_kept is None:
            from .runner import Aside

            self._aside_kept = Aside(Storm(store=self.store.upkeep.twin()))
        return self._aside_kept

    # -- reading -------------------------------------------------------

    def declaration(self) -> config.Declaration:
        return self.store.declaration()

    def whoami(self, source: str | None = None) -> Principal:
        """Who asks: the principal a request of this caller (as the
        declared ``source``, when given) is recorded under, and the requests
        the store's own judgement (``Store.judge``, as every request is
        judged) admits. Reads only: no lock, nothing recorded. A caller
        that may not read the storm is judged as the request path judges
        it (its declaration unread: as none); a source that is not a name
        is ``BadArgument`` (exit 2)."""
        from ..core.authority import REQUESTS, Principal
        from ..core.config import Declaration
        from ..core.errors import BadArgument, StormUnreadable
        from ..core.outcome import Request
        from ..core.shapes import optional_text, shape_names

        source = optional_text(source)
        bad = shape_names(None, (), source)
        if bad is not None:
            raise BadArgument(f"{bad.message}; nothing was asked")
        try:
            decl = self.store.declaration()
        except StormUnreadable:
            decl = Declaration(False)
        verdicts = [(verb, self.store.judge(Request(verb, None, None, source), decl, False).verdict) for verb in REQUESTS]
        refused = [verdict.refusal for _, verdict in verdicts if verdict.refusal is not None]
        return Principal(verdicts[0][1].by, tuple(verb for verb, verdict in verdicts if verdict.admitted),
                         refused[0] if refused else None)

    def listing(self, decl: config.Declaration | None = None, waits: bool = True,
                log: logread.LogRead | None = None, slots: bool = True) -> Listing:
        """The storm as it will run; reads only, writes nothing. With
        ``waits``, how long each ready lane has waited (``starving``);
        ``log``: the log as the caller has just read it (else read now);
        with ``slots``, whether every slot is held while the order says run
        (``runs.full_slots``: a claim would wait)."""
        decl = decl or self.store.declaration()
        log = log or self.store.read(decl)
        snap = self.store.snapshot(log)
        view = resolve(snap)
        warnings = read_warnings(decl, log)
        from ..core.resolver import cycle_note, held_note

        warnings += [note for note in (cycle_note(snap, view), held_note(view)) if note]
        if view.stale:
            warnings.append(
                "the priority lane is stale after a change to queue.txt or the ledgers; it runs as "
                "replayed, and the next request will re-derive it"
            )
        found = {}
        if waits:
            from ..core.starving import waits as waited

            found = waited(snap, view.rows, decl.starving_after, wall.seconds())
        from ..core.lane import keepers

        held = None
        if slots:
            from ..core.runs import full_slots

            held = full_slots(snap, decl.runner)
        return Listing(self.root, view, snap.skipped, warnings, log.state.marks, log.seq, found, decl.starving_after,
                       keepers(snap), shown(log.state.moved_to), slots=held)

    def why(self, slug: str) -> why.Why:
        """Where the lane ``slug`` stands and why, as plain data; reads only."""
        from ..core import why
        from ..core.names import as_text
        from ..core.records import replace
        from ..core.runs import full_slots

        decl = self.store.declaration()
        log = self.store.read(decl)
        snap = self.store.snapshot(log)
        found = why.explain(snap, resolve(snap), snap.skipped, as_text(slug), decl.runner)
        return replace(found, slots=full_slots(snap, decl.runner), moved=shown(snap.state.moved_to),
                       warnings=tuple(read_warnings(decl, log)))

    def tenure(self, slug: str, token: int, wait: float = 0.0) -> Tenure:
        """What became of the lease on ``slug`` under ``token``: live, or
        how it ended; with ``wait``, once it ends (``service.tenure``;
        ``storm-queue lease``). Reads only."""
        from .tenure import tenure

        return tenure(self, slug, token, wait)

    def next(self) -> tuple[Listing, list[str]]:
        """Decide, then let the store do what a decision does as the
        operator (``Store.decided``: blocked marks, what is news once).
        Returns the listing and notes for stderr. A storm that moved
        decides nothing here (``Moved``, exit 3)."""
        decl = self.store.declaration()
        listing = self.listing(decl, waits=False, slots=False)  # the order alone: next counts no slots
        if listing.moved_to:
            from ..core.errors import Moved

            raise Moved(f"the order is no longer kept here: this storm moved to {listing.moved_to} (the log's last "
                        "line says so); ask there with --root URL", listing.moved_to)
        return listing, self.store.decided(decl, listing.view, listing.skipped)

    def moved(self) -> str:
        """Where the storm moved (``migrate``), as printed; '' while it is
        kept here, or when its log cannot be read (the reader that asks
        then says why, as it would have)."""
        from ..core.errors import StormError

        try:
            return shown(self.store.read(self.store.declaration()).state.moved_to)
        except StormError:
            return ""

    def history(self, each: Callable[[bytes, dict[str, Any]], None],
                decl: config.Declaration | None = None) -> logread.LogRead:
        """Every line of the log, oldest first, checked (``Store.history``)."""
        return self.store.history(each, decl)

    def verify(self, progress: Callable[[int], None] | None = None) -> Audit:
        """The full audit of the log (``Store.verify``); reads only."""
        return self.store.verify(progress)


def moved_note(url: str) -> str:
    """What a reader of a storm that moved says first."""
    return (f"this storm moved to {url} (the log's last line says so): its lanes run there; what follows is "
            "the storm as it was here when it moved; ask there with --root URL")


def read_warnings(decl: config.Declaration, log: logread.LogRead) -> list[str]:
    """What a reader says on stderr (and in ``warnings`` with ``--json``)
    whatever it reads: the log's own (a torn tail ignored, lines after the
    witness) and a declaration every request is refused under."""
    warnings = list(log.warnings)
    if decl.sources_error:
        warnings.append(f"{decl.sources_error}: every request is refused until storm.toml is fixed (see storm.toml.example)")
    return warnings

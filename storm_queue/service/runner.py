"""A Python runner's lease (``Storm.lease``): a context manager that
claims a lane, renews its lease in the background while the block runs,
and ends it as the block ends: ``finish ok`` on a clean exit, ``finish
failed`` (the exception's type name as the note) on an exception, which
it re-raises; ``release`` when the runner itself is stopped (a
``KeyboardInterrupt``, a ``SystemExit``). A lease that ends under the
block (a cancel, ``recover --force``, ``settle --force``, an expiry its
renewals could not prevent) stops the renewals and tells the block: the
flag ``Lease.cancelled``, the event ``Lease.stopped``, and how it ended,
``Lease.ending`` (``core.tenure``). A claim that leases nothing raises
``NothingLeased``, carrying the claim's answer.

Renewals are made on a twin of the storm's store (``Upkeep.twin``: its
own connection on a database storm, opened once per ``Storm`` and kept),
so the block may go on using the storm in its own thread meanwhile."""

from __future__ import annotations

import threading

from ..core.errors import StormError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

    from ..core.outcome import Outcome
    from ..core.tenure import Tenure
    from .storm import Storm


class NothingLeased(Exception):
    """A ``Storm.lease`` whose claim leased nothing: ``outcome`` is the
    claim's answer (``Outcome``), ``decision`` its first word: ``wait``
    (lanes are pending, none can start now; with ``wait`` seconds, none
    could start in that time), ``review`` (finished lanes await the
    operator's review), ``empty`` (nothing is left to run) or ``halted``
    (the operator's halt is in force: ``outcome.halt`` says who, when and
    why). ``final``: whether asking again cannot lease a lane until
    someone acts: the storm is ``empty``, or finished lanes await the
    operator's review and nothing else can run (a ``review``, or a
    ``wait`` naming finished lanes when they are all that is left); a
    runner loop stops there, and asks again otherwise (a ``wait`` or a
    ``halted`` can end by itself). Not a ``StormError``: nothing went
    wrong, there is no work."""

    def __init__(self, outcome: Outcome, final: bool) -> None:
        self.outcome = outcome
        self.decision = (outcome.decision or "").split(" ")[0]
        self.final = final
        super().__init__(f"nothing was leased: {outcome.decision}")


class Lease:
    """One lease of a lane, held while a ``with`` block runs
    (``Storm.lease(holder, ttl, wait)``; the claim is made as the block
    begins). Inside the block: ``slug``, ``issue``, ``token``, ``holder``,
    ``expires`` (as last renewed), ``claim`` (the claim's ``Outcome``);
    ``cancelled`` and ``stopped`` once the lease ended under the block
    (``ending``: how, a ``Tenure``). After it: ``finished``, the
    ``Outcome`` of the request that ended the lease (a finish or a
    release; None when the lease had already ended under the block).
    ``renewals`` counts the renewals made; ``trouble`` is the last error a
    renewal met (a server away, the storm's lock busy, a refusal while the
    lease lived), tried again at the next interval (but a refusal past
    ``max_lease_age``). One use: a ``Lease`` is entered once."""

    def __init__(self, storm: Storm, holder: str | None = None, ttl: int | None = None, wait: float = 0.0) -> None:
        self._storm = storm
        self._asked = (holder, ttl, wait)
        self.claim: Outcome | None = None
        self.slug: str = ""
        self.issue: str = ""
        self.token: int = 0
        self.holder: str = ""
        self.expires: str = ""
        self.ttl: int = 0
        self.stopped = threading.Event()
        self.ending: Tenure | None = None
        self.finished: Outcome | None = None
        self.renewals = 0
        self.trouble: BaseException | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def cancelled(self) -> bool:
        """Whether the lease ended under the block (``ending`` says how):
        stop the lane's work; the block's end records nothing more."""
        return self.stopped.is_set()

    @property
    def interval(self) -> float:
        """Seconds between renewals: a third of the lease's TTL."""
        return self.ttl / 3

    def __enter__(self) -> Lease:
        if self.claim is not None:
            raise RuntimeError("a Lease is entered once: ask storm.lease(...) again for the next lane")
        holder, ttl, wait = self._asked
        try:
            out = self._storm.claim(holder, ttl, wait)
        except BaseException as stop:
            self._let_go(stop)
            raise
        out.check()  # a refusal raises Refused
        self.claim = out
        if out.slug is None or out.token is None:
            words = (out.decision or "").split(" ")
            final = words[0] in ("empty", "review")
            if words[0] == "wait" and len(words) > 1:
                from .leases import only_reviews_left

                final = only_reviews_left(self._storm)
            raise NothingLeased(out, final)
        self.slug, self.token, self.holder, self.expires = out.slug, out.token, out.holder or "", out.expires or ""
        self.issue = (out.decision or "").split(" ")[2]
        self.ttl = int((out.event or {}).get("ttl") or ttl or self._storm.declaration().runner.ttl)
        self._thread = threading.Thread(target=self._renew_until_done, args=(self._storm._aside(),),
                                        name=f"storm-queue lease {self.slug}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._halt.set()
        if self._thread is not None:  # a renewal under way ends within the store's wait for the lock
            self._thread.join(self._storm.wait + 60)
        if self.stopped.is_set():
            return  # ended under the block: nothing to record
        try:
            if exc is None:
                out = self._storm.finish(self.slug, self.token, "ok")
            elif isinstance(exc, Exception):
                out = self._storm.finish(self.slug, self.token, "failed", type(exc).__name__)
            else:  # the runner is stopped (Ctrl-C, SystemExit), the lane did not fail
                out = self._storm.release(self.slug, self.token, reason=f"runner stopped: {type(exc).__name__}")
        except StormError as error:
            if exc is None:
                raise
            exc.add_note(f"storm-queue: the end of the lease on {self.slug} (token {self.token}) was not recorded: "
                         f"{error}; the lease expires at {self.expires}")
            return
        self.finished = out
        if out.outcome != "refused":
            return
        if self._ended():  # it ended under the block after the last renewal (a cancel, say)
            return
        if exc is None:
            out.check()
        exc.add_note(f"storm-queue: the end of the lease on {self.slug} (token {self.token}) was refused: "
                     f"{out.text()}")

    def _let_go(self, stop: BaseException) -> None:
        """The claim raised ``stop``. When it is an interrupt that came as
        the claim was recorded (a Ctrl-C, a ``SystemExit``: a directory
        storm's writers' lock holds it back until the line is written, and
        the request carries the answer it recorded on it,
        ``errors.recorded_before``) and the claim took a lease, the lease
        is released as a runner stopped in the block releases it (the
        reason ``runner stopped: KeyboardInterrupt``): ``claim`` and
        ``finished`` say both, and a note on ``stop`` says what became of
        the lease. Otherwise nothing was leased: nothing is done."""
        from ..core.errors import recorded_before

        done = None if isinstance(stop, Exception) else recorded_before(stop)
        if done is None or done.action != "claim" or done.slug is None or done.token is None:
            return
        self.claim, self.slug, self.token, self.holder = done, done.slug, done.token, done.holder or ""
        self.expires = done.expires or ""
        lease = f"the lease on {self.slug} (token {self.token}) the claim took as it was interrupted"
        try:
            self.finished = self._storm.release(self.slug, self.token, reason=f"runner stopped: {type(stop).__name__}")
        except StormError as error:
            stop.add_note(f"storm-queue: {lease} was not released: {error}; it expires at {self.expires}")
            return
        stop.add_note(f"storm-queue: {lease} was released" if self.finished.outcome != "refused" else
                      f"storm-queue: {lease} was not released: {self.finished.text()}")

    def _ended(self, other: Storm | None = None) -> bool:
        """Whether the lease has ended, as the storm records it now; if so,
        ``ending`` says how, and the flag and the event are set."""
        found = (other or self._storm).tenure(self.slug, self.token)
        if found.ended is None:
            return False
        self.ending = found
        self.stopped.set()
        return True

    def _pause(self) -> bool:
        """Wait one ``interval`` (or less, when the block ends first);
        whether the block has ended, so the renewals stop. The one wait
        between renewals: a test paces the renewals here, one at a time."""
        return self._halt.wait(self.interval)

    def _renew_until_done(self, aside: Aside) -> None:
        """Renew every ``interval`` until the block ends, on the storm's
        twin. A refused renewal asks how the lease stands: ended (a
        cancel, an expiry, ...), the renewals stop and the block is told;
        live still and past ``max_lease_age`` (``lease_age_exceeded``: no
        renewal can be made again), it is only watched, until it ends;
        live still and refused for any other reason (a ``[runner]`` the
        operator broke, a database's ``reorder_conflict``), the refusal is
        kept in ``trouble`` and the renewal is asked again at the next
        interval, as after an error (a server away, a busy lock).

        This thread holds SIGINT and SIGTERM back for good (``held_back``),
        so the kernel hands a Ctrl-C to the main thread: one it handed
        here would make the main thread raise at once, even while a
        request of the block holds a directory storm's writers' lock,
        which holds the signals back only in the thread that holds it."""
        held_back()
        renewing = True
        while not self._pause():
            with aside.turn:
                try:
                    if not renewing:
                        if self._ended(aside.storm):
                            return
                        continue
                    out = aside.storm.renew(self.slug, self.token, self._asked[1])
                    if out.outcome != "refused":
                        self.expires, self.renewals = out.expires or self.expires, self.renewals + 1
                        continue
                    if self._ended(aside.storm):
                        return
                    self.trouble = StormError(out.text())
                    renewing = out.code != "lease_age_exceeded"
                except Exception as exc:  # noqa: BLE001 -- kept for the block to read; tried again
                    self.trouble = exc


def held_back() -> None:
    """Hold SIGINT and SIGTERM back in the calling thread (not the main
    thread: its signals are the runner's), for as long as it lives."""
    import signal

    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except AttributeError:  # no signal mask here (not POSIX)
        pass


class Aside:
    """The storm a ``Storm``'s leases renew on (its store's twin), and the
    lock that gives it to one renewal at a time."""

    def __init__(self, storm: Storm) -> None:
        self.storm = storm
        self.turn = threading.Lock()

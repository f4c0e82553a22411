"""Typed errors of the library; each one's exit code is ``exit_codes.ERRORS``'s."""

from __future__ import annotations

from .exit_codes import ERRORS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .outcome import Outcome


class StormError(Exception):
    """Base of every error storm-queue reports instead of an answer."""

    exit_code = ERRORS["StormError"]


class UnknownOrder(StormError):
    """The priority log cannot be replayed: the order is unknown (exit 3)."""

    exit_code = ERRORS["UnknownOrder"]


class Moved(UnknownOrder):
    """The storm moved (``migrate``): its order is kept where it went, and
    a runner asking here must not be sent to work (exit 3). ``moved`` is
    where it went, as printed (a password masked)."""

    def __init__(self, message: str, moved: str = ""):
        super().__init__(message)
        self.moved = moved


class NoStorm(StormError):
    """No storm root could be found or opened (exit 2: the request cannot be
    carried out as asked)."""

    exit_code = ERRORS["NoStorm"]


class Busy(StormError):
    """Another writer held the lock for longer than the caller would wait."""

    exit_code = ERRORS["Busy"]


class Unreachable(Busy):
    """A database storm's server could not be reached, or dropped the
    connection before the request was sent: nothing changed, and a retry
    is safe (exit 5, as ``Busy``; ``recorded`` is False)."""

    exit_code = ERRORS["Unreachable"]
    recorded = False


class RecordFailed(StormError):
    """The request was decided but its record could not be written whole (an
    I/O error such as a full disk). ``recorded`` says what is true: False
    (it did not happen), True (its line is on the log and counts, but the
    witness lags), None (the disk failed in a way that leaves it unknown).
    When it is True, ``outcome`` is the answer the request recorded (a
    claim's decision line and token: the lease counts, so its runner must
    hear of it)."""

    exit_code = ERRORS["RecordFailed"]

    def __init__(self, message: str, recorded: bool | None = False, outcome: object = None):
        super().__init__(message)
        self.recorded = recorded
        self.outcome = outcome


class OutputFailed(StormError):
    """Stdout could not be written (a full disk, an I/O error; not a reader
    that stopped reading, whose rest is dropped): the command's answer was
    not all printed, and what it recorded stands."""

    exit_code = ERRORS["OutputFailed"]


class StormUnreadable(StormError):
    """A storm file cannot be read (permissions, a planted link): the
    request cannot be carried out as asked (exit 2)."""

    exit_code = ERRORS["StormUnreadable"]


class Refused(StormError):
    """A request that was refused, raised by ``Outcome.check()`` for callers
    that prefer an exception: ``code`` is the stable refusal code,
    ``recorded`` whether the refusal was written to the log, ``exit_code``
    1 (not authorised) or 2 (cannot be carried out as asked)."""

    def __init__(self, code: str, message: str, exit_code: int, recorded: bool):
        super().__init__(f"refused ({code}): {message}")
        self.code = code
        self.exit_code = exit_code
        self.recorded = recorded


class NotHere(StormError):
    """A command this kind of storm does not take (exit 2: cannot be
    carried out as asked)."""

    exit_code = ERRORS["NotHere"]


class InvalidDeclaration(NotHere):
    """A file ``declare`` cannot record: nothing changed (exit 2)."""


class BadArgument(StormError):
    """An argument the command cannot take as given (exit 2), saying which
    values it takes; nothing was done."""

    exit_code = ERRORS["BadArgument"]


class InitRefused(StormError):
    """``init`` would overwrite a file, or cannot make a storm there (exit 2:
    cannot be carried out as asked). Nothing was written."""

    exit_code = ERRORS["InitRefused"]


class Aborted(StormError):
    """The store gave a request up before it committed (a database's
    deadlock or serialization failure): nothing of it happened, and a retry
    is safe. The request path answers it as a recorded ``reorder_conflict``."""


class WriteFailed(Exception):
    """A store's write that an I/O error stopped, as the store says it: the
    error its Protocol documents (``store.interface``), for the service to
    answer; the system's own error never leaves a store. ``strerror`` is
    the system's words, ``filename`` the file (None: none named),
    ``denied`` whether this account may not write there (permission
    denied, a read-only file system: the caller is refused, the storm is
    sound), ``kept`` whether what the write wrote could not be taken back
    off either, so the file may still carry it."""

    def __init__(self, strerror: str, filename: object = None, denied: bool = False, kept: bool = False):
        super().__init__(strerror + (f": {filename}" if filename else ""))
        self.strerror, self.filename, self.denied, self.kept = strerror, filename, denied, kept

    @classmethod
    def of(cls, exc: OSError, filename: object = None, **more: object) -> WriteFailed:
        """The store's word for the system's error ``exc`` (``filename``:
        the file, when ``exc`` names none; ``more``: a subclass's fields)."""
        import errno

        denied = exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        return cls(exc.strerror or str(exc), exc.filename or filename, denied=denied, **more)


class AppendFailed(WriteFailed):
    """An append that an I/O error stopped. ``state`` says what is true in
    the store: ``nothing`` (no line of the append counts: none was written,
    or it was cut back off, or it is a torn tail the next writer repairs),
    ``unwitnessed`` (the lines are on the log and durable, and readers count
    them, but what vouches for them was not written: ``events`` are they), or
    ``uncertain`` (the lines could not be made durable, nor cut back off).
    ``words`` is the store's own account of a state but ``nothing``: what
    failed, and what comes of it."""

    def __init__(self, strerror: str, filename: object = None, denied: bool = False, state: str = "nothing",
                 events: list | None = None, words: str = ""):
        super().__init__(strerror, filename, denied)
        self.state, self.events, self.words = state, events or [], words


#: the words of the ``OSError`` for a storm's file that is not a regular file (``fsutil.open_file``)
NOT_A_FILE = "not a regular file"


def unreadable(path: str, exc: OSError) -> StormUnreadable:
    """The error for a storm file that could not be opened, saying what to do."""
    import errno

    if exc.errno == errno.ELOOP:
        return StormUnreadable(f"{path} is a symbolic link, and storm-queue never follows a link in a storm; "
                               "replace it with the file itself")
    if exc.errno == errno.EISDIR:
        return StormUnreadable(f"{path} is a directory; it must be a file")
    if exc.strerror == NOT_A_FILE:
        return StormUnreadable(f"{path} is not a regular file (a FIFO, a socket or a device); it must be a file")
    return StormUnreadable(f"{path} cannot be read ({exc.strerror}); check its permissions")


#: the attribute of an interrupt that carries the answer of the request recorded before it (``recorded_before``)
_RECORDED = "storm_queue_recorded"


def recorded_before(stop: BaseException) -> Outcome | None:
    """The ``Outcome`` of the request recorded just before the interrupt
    ``stop`` was raised, or None. A directory storm's writers' lock holds
    SIGINT and SIGTERM back while a request holds it, so that the request
    is recorded whole; the interrupt (a ``KeyboardInterrupt``, or whatever
    the process's handler raises) is raised as the lock lets go, and the
    request path puts on it the answer it recorded (``carry_recorded``):
    a claim's lease, which its caller must end. None when ``stop`` came
    after no record (while a request waited, or outside one)."""
    return getattr(stop, _RECORDED, None)


def carry_recorded(stop: BaseException, outcome: Outcome) -> None:
    """Put ``outcome``, the answer of a request recorded before the
    interrupt ``stop``, on it for ``recorded_before``."""
    try:
        setattr(stop, _RECORDED, outcome)
    except AttributeError:  # an exception that takes no attribute: its caller cannot be told
        pass

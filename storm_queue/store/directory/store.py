"""A directory storm: queue.txt, the ledgers and the priority log's files
under one flock (the ``store.interface.Store`` of a storm kept on one
host). The request path and the readers are the service's
(``service.storm.Storm``); this is where they read and write."""

from __future__ import annotations

import os

from ... import wall
from ...core import config, logread
from ...core.errors import Busy, NotHere, RecordFailed, UnknownOrder
from ...core.lane import Snapshot
from ...core.records import replace
from . import declared, ledger, queuefile
from .log import reader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, ContextManager, Mapping

    from ...core.authority import Judged
    from ...core.checkup import Checkup
    from ...core.outcome import Request
    from ...core.queuetext import Skipped
    from ...core.resolver import View
    from . import accounts
    from .changes import Changes
    from .effects import Files


def _no_schema(root: str) -> NotHere:
    return NotHere(f"{root} is a directory storm: its files have no schema to upgrade; upgrade carries "
                   "a database storm (storm-queue upgrade URL) forward; nothing was recorded")


def _no_members(root: str) -> NotHere:
    return NotHere(f"{root} is a directory storm: who may write it is its files' owner; grant and revoke "
                   "name a role of a database storm; nothing was recorded")


class Directory:
    """The storm directory ``root``, read fresh on every call.

    ``wait`` is how many seconds a writer waits for the writers' lock.
    """

    appended = "appended to queue.txt"  # how a push's lane is enqueued, in the log's words (``Upkeep``)

    def __init__(self, root: str, env: Mapping[str, str] | None = None, wait: float = 30.0):
        self.root = root
        self.env = dict(os.environ if env is None else env)
        self.wait = wait

    def declaration(self) -> config.Declaration:
        """storm.toml, read and parsed (none: no source, default runner settings)."""
        return declared.load(self.root)

    @property
    def upkeep(self) -> Directory:
        """The store's own upkeep (``interface.Upkeep``): its members below."""
        return self

    def log_path(self, decl: config.Declaration) -> str:
        """Where the priority log is, as ``decl`` declares it."""
        return os.path.join(self.root, decl.log)

    def log_file(self, decl: config.Declaration) -> str | None:
        """The log's file (``Upkeep.log_file``); None while storm.toml names none."""
        return None if decl.log_error else self.log_path(decl)

    def declared_in(self) -> str:
        """storm.toml, in the storm's directory."""
        return os.path.join(self.root, "storm.toml")

    def watched(self) -> list[str]:
        """queue.txt, storm.toml, the ledgers, the log and its witness, the lanes and their markers."""
        from .changes import paths

        return paths(self)

    def tell_waits(self, tell: Callable[[str, str, float], None]) -> None:
        """``tell`` who holds the writers' lock while a request waits for it (``log.lock.on_wait``)."""
        from .log import lock

        lock.on_wait = tell

    def schema(self) -> tuple[int, int, bool]:
        raise _no_schema(self.root)

    def carry(self, was: int) -> int | None:
        raise _no_schema(self.root)

    def member(self, role: str, kind: str) -> bool | None:
        raise _no_members(self.root)

    def change_member(self, verb: str, kind: str, role: str) -> list[str]:
        raise _no_members(self.root)

    def doctor(self, running_hours: float | None = None, now: float | None = None) -> Checkup:
        """``checkup.gather`` of the storm's files, diagnosed (``core.checkup.checkup``)."""
        from ...core.checkup import checkup
        from .checkup import gather

        return checkup(gather(self.root, now), running_hours)

    def close(self) -> None:
        """Nothing is held open between requests."""

    def twin(self) -> Directory:
        """The same directory, kept by a store of its own (``Upkeep.twin``)."""
        return Directory(self.root, self.env, self.wait)

    def judge(self, req: Request, decl: config.Declaration, operator_only: bool) -> Judged:
        """The process's uid against the owner of queue.txt (``accounts``)."""
        from ...core.authority import Judged
        from . import accounts

        who = accounts.caller(self.env)
        op = accounts.owner(self.root)
        verdict = accounts.judge(who, op, decl, req.source, operator_only=operator_only, verb=req.verb)
        owner_ids = None if accounts.is_owner(who, op) else (op.uid, op.gid)
        return Judged(verdict, owner_ids, self._unrecordable(decl, who, op), who.name)

    def _unrecordable(self, decl: config.Declaration, who: accounts.Caller, op: accounts.Owner) -> str:
        """Why this caller cannot record a line, or '' when it can."""
        from . import accounts

        if decl.log_error:
            return f"{decl.log_error}, so the log's place is unknown"
        if accounts.is_owner(who, op):
            return ""
        if who.euid == 0:
            log_path = self.log_path(decl)
            missing = [p for p in (log_path, reader.witness_path(log_path), log_path + ".lock") if not os.path.isfile(p)]
            if not missing:
                return ""
            return f"{os.path.basename(missing[0])} does not exist, and another account never creates a file in the storm"
        return f"account {who.name} cannot write the storm of {op.name}"

    def writing(self, req: Request, decl: config.Declaration, owner_ids: tuple[int, int] | None) -> ContextManager[None]:
        """flock on the log's lock file, signals deferred while it is held
        (``log.lock``); another account never creates the lock file."""
        from .log import lock

        return lock.held(self.log_path(decl), self.wait, may_create=owner_ids is None)

    def read(self, decl: config.Declaration) -> logread.LogRead:
        """The reader's reading of the log, from its checkpoint when that is sound."""
        _known(decl)
        return reader.read(self.log_path(decl))

    def snapshot(self, log: logread.LogRead, at: str | None = None) -> Snapshot:
        """queue.txt, the ledgers and the markers, read now. A queue.txt
        that is gone is not an empty storm: ``UnknownOrder`` (exit 3)."""
        queue = queuefile.read(os.path.join(self.root, "queue.txt"))
        if not queue.exists:
            raise UnknownOrder(queuefile.missing(self.root))
        led = ledger.read(self.root)
        if not led.unattended and self.declaration().runner.unattended:  # the file, or the declared key
            led = replace(led, unattended=True)
        return Snapshot({lane.slug: lane for lane in queue.lanes}, led, log.state, at or wall.now(),
                        ledger.leased_results(self.root, led, log.state), queue.skipped,
                        (ledger.changed(os.path.join(self.root, "queue.txt")),
                         ledger.changed(os.path.join(self.root, ledger.INTEGRATED))))

    def append(self, log: logread.LogRead, bodies: list[dict[str, Any]], at: str, by: str,
               owner_ids: tuple[int, int] | None) -> list[dict[str, Any]]:
        """One whole write, fsync, then the witness (``log.writer``)."""
        from .log import writer

        return writer.append(log, bodies, at, by, owner_ids)

    def serve(self, req: Request, holder: str | None = None) -> None:
        """None: a directory storm's requests are planned here, under its flock."""
        return None

    def effects(self, decl: config.Declaration) -> Files:
        from .effects import Files

        return Files(self.root, self.log_path(decl))

    def decided(self, decl: config.Declaration, view: View, skipped: tuple[Skipped, ...]) -> list[str]:
        """As the owner, and only when there is something to mark or say,
        under the writers' lock waited for half a second at most."""
        from .effects import news, tell

        log_path = self.log_path(decl)
        if not (news(view, skipped, log_path) or view.to_block):
            return []
        from . import accounts

        who = accounts.caller(self.env)
        op = accounts.owner(self.root)
        if not accounts.is_owner(who, op):
            return [f"next: {who.name} is not the storm's owner ({op.name}), so blocked lanes are not marked and progress.log is not written"]
        from .log.lock import held

        try:
            with held(log_path, 0.5, may_create=True):
                return tell(self.root, view, skipped, wall.now(), log_path)
        except Busy:  # another writer is at work; the next call catches up
            return ["next: the storm is busy, so blocked lanes were not marked this time"]
        except (OSError, RecordFailed) as exc:
            return [f"next: side effects skipped: {exc}"]

    def history(self, each: Callable[[bytes, dict[str, Any]], None], decl: config.Declaration | None = None) -> logread.LogRead:
        """The reader, from the first line, never from the checkpoint."""
        decl = decl or self.declaration()
        _known(decl)
        return reader.read(self.log_path(decl), use_checkpoint=False, each=each)

    def verify(self, progress: Callable[[int], None] | None = None):
        """The log, its witness and its checkpoint (``log.audit``)."""
        from .log import audit

        decl = self.declaration()
        _known(decl)
        return audit.audit(self.log_path(decl), progress)

    def changes(self, every: bool = False) -> Changes:
        """inotify on the storm's directories, else a poll of its files
        (``changes``): every change, ``every`` or not."""
        from .changes import Changes

        return Changes(self)


def _known(decl: config.Declaration) -> None:
    """Raise ``UnknownOrder`` when storm.toml hides the log's place."""
    if decl.log_error:
        raise UnknownOrder(f"the priority order is unknown: {decl.log_error}; fix storm.toml so the log can be found")


"""A directory storm's own doctor checks (``Directory.doctor``, the
``Upkeep``'s): ``gather`` reads the storm (the edge: files, stats, the
clock); ``diagnose`` turns what it read into findings (plain data, no
I/O; ``core.checkup`` holds what both stores find, and the severities)."""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass

from ... import wall
from ...core import config, logread, queuetext
from ...core.checkup import ERROR, WARNING, Finding, cycle_findings, declaration_findings, runner_findings, starving_findings
from ...core.errors import StormError, StormUnreadable
from ...core.lane import Snapshot
from ...core.names import quote
from . import accounts, declared, ledger, queuefile
from .accounts import Owner
from .log import reader

@dataclass(frozen=True)
class Entry:
    """A storm file as ``lstat`` saw it; ``shared`` files (progress.log,
    which every account appends to) are judged by their owner only."""

    rel: str
    path: str
    st: os.stat_result
    shared: bool = False


@dataclass(frozen=True)
class Facts:
    """Everything doctor read, at ``now`` (seconds since the epoch)."""

    root: str
    owner: Owner
    entries: tuple[Entry, ...]
    declaration: config.Declaration
    log_rel: str
    log: logread.LogRead | None
    log_error: str | None
    queue: queuetext.QueueFile | None
    unreadable: tuple[tuple[str, str], ...]  # (file, why)
    stray: tuple[str, ...]
    running: tuple[tuple[str, float], ...]  # (slug, marker mtime)
    now: float
    #: the storm as the log folds it (runs, leases) with the ledgers and
    #: queue.txt, at ``now``; None when the log or a file could not be read
    snapshot: Snapshot | None = None
    #: the storm's directory is on a file system mounted read-only
    read_only: bool = False
    #: the log's lines that hold a password (a ``migrate`` line an earlier
    #: release wrote with the URL's password in it)
    passwords: tuple[int, ...] = ()

    def diagnose(self, running_hours: float) -> list[Finding]:
        return diagnose(self, running_hours)


def _sh(path: str) -> str:
    return shlex.quote(path)


def _exposure(entry: Entry, op: Owner) -> Finding | None:
    """The ``exposed`` finding of one file, or None when it is sound."""
    if stat.S_ISLNK(entry.st.st_mode):
        return Finding(ERROR, "link", entry.rel, "is a symbolic link; storm-queue refuses to read or write through it",
                       f"replace the link with the file itself: {_sh(entry.path)}")
    found = accounts.exposure(entry.st, op)
    if entry.shared:
        found = [words for words in found if not words.startswith("writable")]
    if not found:
        return None
    fixes = []
    if entry.st.st_uid != op.uid:
        fixes.append(f"chown {_sh(op.name)} {_sh(entry.path)}")
    if not entry.shared and entry.st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        fixes.append(f"chmod go-w {_sh(entry.path)}")
    return Finding(ERROR, "exposed", entry.rel,
                   "; ".join(found) + ": another account could forge what the lanes do",
                   "; ".join(fixes))


def _owner_cannot_write(entry: Entry, op: Owner) -> bool:
    """The operator's own file or directory without the owner's write
    permission (a directory needs search too). A file of another account is
    the ``exposed`` finding's; root writes whatever its mode."""
    if op.uid == 0 or entry.st.st_uid != op.uid or stat.S_ISLNK(entry.st.st_mode):
        return False
    need = stat.S_IWUSR | (stat.S_IXUSR if stat.S_ISDIR(entry.st.st_mode) else 0)
    return entry.st.st_mode & need != need


def _unwritable(facts: Facts) -> list[Finding]:
    """What storm-queue writes that the storm's owner cannot: the storm's
    directory and the log's, the log and its lock (every request), and
    ``queue.txt`` (``push``); or a storm on a file system mounted read-only."""
    op = facts.owner
    if facts.read_only:
        return [Finding(ERROR, "unwritable", ".", "is on a file system mounted read-only: every request is refused "
                        "(storm_unwritable) and nothing is recorded", f"remount it read-write, or move the storm: {_sh(facts.root)}")]
    log_dir = os.path.dirname(facts.log_rel) or "."
    every = "every request is refused (storm_unwritable) and nothing is recorded"
    written = {".": every, log_dir: every, facts.log_rel: every, facts.log_rel + ".lock": every,
               "queue.txt": "push cannot append a lane to it (storm_unwritable)"}
    out = []
    for entry in facts.entries:
        if entry.rel in written and _owner_cannot_write(entry, op):
            is_dir = stat.S_ISDIR(entry.st.st_mode)
            out.append(Finding(ERROR, "unwritable", entry.rel,
                               f"the storm's owner {op.name} cannot write this {'directory' if is_dir else 'file'} "
                               f"(mode {stat.filemode(entry.st.st_mode)}): {written[entry.rel]}",
                               f"chmod {'u+wx' if is_dir else 'u+w'} {_sh(entry.path)}"))
    return out


def diagnose(facts: Facts, running_hours: float) -> list[Finding]:
    """Every finding, in the order: files (forgeable, then unwritable),
    declaration, log, queue.txt, stray slugs, running lanes. Pure: reads
    nothing but ``facts``."""
    out: list[Finding] = []
    for entry in facts.entries:
        finding = _exposure(entry, facts.owner)
        if finding:
            out.append(finding)
    out += _unwritable(facts)
    for rel, why in facts.unreadable:
        out.append(Finding(ERROR, "unreadable", rel, why, "make it a readable regular file of the operator's"))
    out += declaration_findings(facts.declaration, "storm.toml", "fix storm.toml (storm.toml.example documents every key)")
    if facts.log_error:
        from ...core.logread import OLD_FORMAT

        out.append(Finding(ERROR, "unknown_order", facts.log_rel, facts.log_error,
                           "take it over, keeping its order: storm-queue adopt --reason TEXT" if OLD_FORMAT in facts.log_error
                           else "restore the log and its witness from a backup, or keep the lines that verify from line 1: "
                           "storm-queue reset --keep-intact --reason TEXT"))
    moved = facts.log.state.moved_to if facts.log is not None else ""
    if moved:
        from ...roots import shown

        out.append(Finding(ERROR, "moved", facts.log_rel,
                           f"this storm moved to {shown(moved)} (the log's last line, a migrate, says so): its lanes "
                           "run there; here next and claim exit 3 and every request is refused, and list, why and "
                           "watch show the storm as it was when it moved",
                           f"point the runners and the operator at it: --root {shown(moved)} (or STORM_QUEUE_ROOT); "
                           "keep this directory as the record of the storm before the move"))
    for seq in facts.passwords:
        out.append(Finding(ERROR, "password_recorded", f"{facts.log_rel}:{seq}",
                           f"line {seq} records a database password (the URL a migrate moved the storm to, written by "
                           "an earlier release); the log is append-only, so the password stays readable to whoever "
                           "reads the log",
                           "change that role's password on the server (ALTER ROLE ... PASSWORD), and keep passwords "
                           "in .pgpass, PGPASSFILE or a service file, never in a URL"))
    log = facts.log
    if log is not None and log.torn:
        out.append(Finding(WARNING, "torn_tail", facts.log_rel,
                           f"the log ends in {log.torn} bytes of a write never acknowledged",
                           "nothing to do by hand: the next request keeps them in a side file and records a repair"))
    if log is not None and log.witness is not None and log.length > log.witness.length:
        out.append(Finding(WARNING, "witness_behind", facts.log_rel,
                           f"the witness records {log.witness.seq} line(s), the log holds {log.seq} that chain correctly "
                           "(a write stopped before it was acknowledged)",
                           "nothing to do by hand: the next request re-witnesses them"))
    if facts.queue is not None and not facts.queue.exists:
        out.append(Finding(ERROR, "queue_missing", "queue.txt", "does not exist, so the storm's lanes are unknown: "
                           "next, claim and list answer exit 3 (an empty storm has an empty queue.txt)",
                           "restore it from a backup or version control; for a storm with no lanes: touch queue.txt"))
    if facts.queue is not None:
        for s in facts.queue.skipped:
            out.append(Finding(WARNING, "skipped_line", f"queue.txt:{s.line}", f"{quote(s.text)} is skipped: {s.why}",
                               "correct or delete the line (SLUG ISSUE [DEPS])"))
    for slug in facts.stray:
        out.append(Finding(WARNING, "stray", slug, "is prioritised, but queue.txt no longer carries it; it never runs",
                           f"add its line back to queue.txt, or: storm-queue unbump {slug}"))
    for slug, since in facts.running:
        hours = (facts.now - since) / 3600
        if hours > running_hours:
            marker = os.path.join(facts.root, ledger.LANES, slug, ledger.MARKS, ledger.RUNNING)
            out.append(Finding(WARNING, "long_running", slug,
                               f"has been marked running for {hours:.1f} hours (threshold {running_hours:g})",
                               f"check its runner; if it is dead, remove {_sh(marker)}"))
    if facts.snapshot is not None:
        out += cycle_findings(facts.snapshot) + runner_findings(facts.snapshot, facts.declaration.runner.attempts)
        decl = facts.declaration
        if decl.starving_after is not None:
            out += starving_findings(facts.snapshot, decl.starving_after, facts.now)
    return out


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _storm_files(root: str, log_path: str) -> list[tuple[str, bool]]:
    """The storm's own files and directories (absolute path, shared?)."""
    paths = [(root, False)]
    log_dir = os.path.dirname(log_path)
    if log_dir != root:
        paths.append((log_dir, False))
    names = ["queue.txt", "storm.toml", ledger.INTEGRATED, ledger.ABANDONED, ledger.UNATTENDED]
    paths += [(os.path.join(root, n), False) for n in names]
    from .log.checkpoint import checkpoint_path

    paths += [(p, False) for p in (log_path, reader.witness_path(log_path), log_path + ".lock",
                                  ledger.SaidOnce(log_path).path, checkpoint_path(log_path))]
    paths.append((os.path.join(root, ledger.PROGRESS), True))
    lanes = os.path.join(root, ledger.LANES)
    paths.append((lanes, False))
    try:
        with os.scandir(lanes) as found:
            lane_dirs = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in found
                               if e.is_dir(follow_symlinks=False) or e.is_symlink())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        lane_dirs = []
    for name, is_dir in lane_dirs:
        paths.append((os.path.join(lanes, name), False))
        if is_dir:  # a link is reported as one; nothing is read through it
            marks = os.path.join(lanes, name, ledger.MARKS)
            paths += [(marks, False), (os.path.join(marks, ledger.RESULT), False),
                      (os.path.join(marks, ledger.RUNNING), False)]
    return paths


def gather(root: str, now: float | None = None) -> Facts:
    """Read the storm at ``root`` for ``diagnose``; never writes, never takes
    the lock, and turns what it cannot read into facts, not errors; a root
    the caller may not enter is ``StormUnreadable``."""
    if not os.access(root, os.R_OK | os.X_OK):
        raise StormUnreadable(f"{quote(root)} cannot be read (permission denied); run doctor as the storm's owner")
    decl = declared.load(root)
    op = accounts.owner(root)
    log_path = os.path.join(root, decl.log)
    entries = []
    for path, shared in _storm_files(root, log_path):
        st = _lstat(path)
        if st is not None:
            entries.append(Entry(os.path.relpath(path, root), path, st, shared))
    unreadable: list[tuple[str, str]] = []
    log = log_error = None
    if not decl.log_error:
        try:
            log = reader.read(log_path)
        except StormError as exc:
            log_error = str(exc)
    queue = led = None
    try:
        queue = queuefile.read(os.path.join(root, "queue.txt"))
    except StormError as exc:
        unreadable.append(("queue.txt", str(exc)))
    try:
        led = ledger.read(root)
    except StormError as exc:
        unreadable.append(("ledgers", str(exc)))
    stray: tuple[str, ...] = ()
    snap = None
    t = wall.seconds() if now is None else now
    if queue is not None and led is not None and log is not None:
        from ...core.clock import stamp
        from ...core.resolver import resolve

        snap = Snapshot({lane.slug: lane for lane in queue.lanes}, led, log.state, stamp(t),
                        ledger.leased_results(root, led, log.state), (),
                        (ledger.changed(os.path.join(root, "queue.txt")), ledger.changed(os.path.join(root, ledger.INTEGRATED))))
        stray = resolve(snap).stray
    running = []
    if led is not None:
        for slug in sorted(set(led.running) - led.finished):
            if led.settled(slug):
                continue
            st = _lstat(os.path.join(root, ledger.LANES, slug, ledger.MARKS, ledger.RUNNING))
            if st is not None:
                running.append((slug, st.st_mtime))
    return Facts(root, op, tuple(entries), decl, os.path.relpath(log_path, root), log, log_error,
                 queue, tuple(unreadable), tuple(stray), tuple(running), t, snap, _read_only(root),
                 _recorded_passwords(log_path, log))


def _recorded_passwords(log_path: str, log: logread.LogRead | None) -> tuple[int, ...]:
    """The lines of the log that hold a password: only a ``migrate`` line
    can, and only the last one the state remembers is looked for (read
    again only when that one holds one)."""
    from ...roots import shown

    moved = log.state.moved_to if log is not None else ""
    if not moved or shown(moved) == moved:
        return ()
    found: list[int] = []

    def each(line: bytes, event: dict) -> None:
        to = event.get("to")
        if event.get("action") == "migrate" and isinstance(to, str) and shown(to) != to:
            found.append(event["seq"])

    try:
        reader.read(log_path, use_checkpoint=False, each=each)
    except StormError:
        return ()
    return tuple(found)


def _read_only(root: str) -> bool:
    try:
        return bool(os.statvfs(root).f_flag & os.ST_RDONLY)
    except OSError:
        return False



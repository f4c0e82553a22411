"""Who asks a directory storm, and who its operator is: the only module
that asks the operating system for uids and account names. The grant
itself is the core's (``core.authority.decide``)."""

from __future__ import annotations

import os

from ...core.authority import LANE_ENV, Verdict, decide
from ...core.config import Declaration
from ...core.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


@dataclass(frozen=True)
class Caller:
    uid: int
    euid: int
    name: str
    lane: str | None  # the value of STORM_QUEUE_LANE, when present at all


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int
    name: str
    what: str  # the file the ownership was read from


def account_name(uid: int) -> str:
    """The account's name from the password database (its number if it has none)."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def caller(env: Mapping[str, str]) -> Caller:
    uid, euid = os.getuid(), os.geteuid()
    return Caller(uid, euid, account_name(euid), env.get(LANE_ENV))


def owner(root: str) -> Owner:
    """The operator: the owner of ``queue.txt``, or of the root without one
    (or when the caller may not look inside the root)."""
    path = os.path.join(root, "queue.txt")
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, PermissionError):
        path = root
        st = os.stat(root)
    return Owner(st.st_uid, st.st_gid, account_name(st.st_uid), path)


def exposure(st: os.stat_result, op: Owner) -> list[str]:
    """What makes a storm file untrustworthy: an owner other than the
    operator, or write permission for group or others (anyone who can write
    it can forge what the lane does). Empty when the file is sound."""
    import stat

    found = []
    if st.st_uid != op.uid:
        found.append(f"owned by {account_name(st.st_uid)}, not by the operator {op.name}")
    if st.st_mode & stat.S_IWGRP:
        found.append("writable by its group")
    if st.st_mode & stat.S_IWOTH:
        found.append("writable by others")
    return found


def is_owner(who: Caller, op: Owner) -> bool:
    """Both the real and the effective uid are the operator's."""
    return who.uid == op.uid and who.euid == op.uid


def judge(who: Caller, op: Owner, decl: Declaration, source: str | None, operator_only: bool = False,
          verb: str | None = None) -> Verdict:
    """Decide whether ``who`` may make the request ``verb``, and name the principal."""
    return decide(who.lane, is_owner(who, op), who.name, op.name,
                  f"who owns {os.path.basename(op.what) or op.what}", decl, source, operator_only,
                  exposure(decl.stat, op) if decl.stat is not None else [], verb)

"""Who is asking, and may they change the lane. The only module that asks
the operating system for uids and account names."""

from __future__ import annotations

import os

from ..core.config import Declaration
from ..core.jsoncodec import dumps
from ..core.lane import Refusal
from ..core.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

LANE_ENV = "STORM_QUEUE_LANE"



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


@dataclass(frozen=True)
class Verdict:
    by: str
    refusal: Refusal | None

    @property
    def admitted(self) -> bool:
        return self.refusal is None


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


def judge(who: Caller, op: Owner, decl: Declaration, source: str | None, operator_only: bool = False) -> Verdict:
    """Decide whether ``who`` may change the lane, and name the principal."""
    return decide(who.lane, is_owner(who, op), who.name, op.name,
                  f"who owns {os.path.basename(op.what) or op.what}", decl, source, operator_only,
                  exposure(decl.stat, op) if decl.stat is not None else [])


def decide(lane: str | None, is_operator: bool, name: str, operator: str, whose: str, decl: Declaration,
           source: str | None, operator_only: bool = False, exposed: list[str] | None = None) -> Verdict:
    """The grant, whatever the store: a lane process is refused, then anyone
    but the operator (``whose`` says what makes ``operator`` the operator),
    then a source the declaration does not admit. ``exposed`` says what
    makes the declaration untrustworthy (empty: nothing)."""
    if lane is not None:
        return Verdict(
            "lane:" + dumps(lane),
            Refusal("lane_process", f"a lane process (it carries {LANE_ENV}) may not change the priority lane"),
        )
    if not is_operator:
        return Verdict(
            f"account:{name}",
            Refusal(
                "not_operator",
                f"only the operator ({operator}, {whose}) "
                "or a source the operator declares may change the priority lane",
            ),
        )
    by = f"source:{source}" if source is not None else f"operator:{operator}"
    if decl.error:
        return Verdict(by, Refusal("declaration_unreadable", f"{decl.error}; fix storm.toml, then ask again"))
    if source is not None:
        if exposed:
            return Verdict(by, Refusal(
                "declaration_untrusted",
                f"storm.toml is {' and '.join(exposed)}, so it is not the operator's declaration and no source it "
                "lists is admitted; the operator can make it theirs and not writable by others "
                "(chown, then chmod go-w storm.toml)"))
        if operator_only:
            return Verdict(by, Refusal("operator_only", "only the operator may do this; a source may not"))
        if source not in decl.sources:
            where = "storm.toml [priority] sources" if decl.present else "storm.toml (there is none)"
            return Verdict(by, Refusal("undeclared_source", f"source {source} is not declared in {where}; the operator may add it there"))
    return Verdict(by, None)

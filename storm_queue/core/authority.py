"""The grant, whatever the store: who may change the lane, and the name
of the principal a request is recorded under. Pure: the store says who
asks and who the operator is."""

from __future__ import annotations

from .config import Declaration
from .jsoncodec import dumps
from .lane import Refusal
from .records import dataclass

LANE_ENV = "STORM_QUEUE_LANE"


@dataclass(frozen=True)
class Verdict:
    by: str
    refusal: Refusal | None

    @property
    def admitted(self) -> bool:
        return self.refusal is None


@dataclass(frozen=True)
class Judged:
    """A store's judgement of the caller: the ``verdict`` (the principal a
    line is recorded under, and the refusal, if any), ``owner_ids`` (a
    directory's owner's uid and gid, for the files a request by another
    account makes; None: the caller is the owner), ``unrecordable`` (why
    this caller cannot record a line at all, '' when it can) and ``name``
    (the caller, as a message names it)."""

    verdict: Verdict
    owner_ids: tuple[int, int] | None
    unrecordable: str
    name: str


#: what a request would have done, as a refusal of it says (else: change the priority lane)
DOES = {"claim": "claim a lane", "renew": "renew a lease", "finish": "finish a lane", "recover": "take back leases",
        "release": "release a lease", "cancel": "cancel a lane",
        "reset": "reset the priority log", "settle": "settle a lane", "add": "add a lane", "schedule": "schedule a lane",
        "hold": "hold a lane", "unhold": "unhold a lane",
        "unpark": "unpark a lane", "halt": "halt the storm", "resume": "resume the storm", "adopt": "adopt a log",
        "declare": "declare the storm", "upgrade": "upgrade the storm", "grant": "admit a runner or a reader",
        "revoke": "end what a runner or a reader was admitted to"}


#: the requests no source may make: the operator's alone, whoever asks (``recover`` naming a lane is too:
#: its caller says so, ``operator_only``)
OPERATOR_ONLY = frozenset(("waive", "declare", "reset", "halt", "resume", "unpark", "adopt", "upgrade", "grant",
                           "revoke"))
#: every request a caller may be admitted to, as ``whoami`` lists them: a runner's, then the lane's order's, then
#: the operator's
REQUESTS = ("claim", "renew", "finish", "release", "recover", "bump", "unbump", "push", "add", "settle", "cancel",
            "schedule", "hold", "unhold", "unpark", "waive", "halt", "resume", "declare", "reset", "adopt", "upgrade", "grant", "revoke")


@dataclass(frozen=True)
class Principal:
    """Who asks, as the store judges them (``whoami``): ``by``, the
    principal their requests are recorded under; ``may``, the requests of
    ``REQUESTS`` the store's judgement admits, in that order; ``refusal``,
    why the first request it refuses is refused (None: it refuses none).
    It says nothing of what a request is refused for other than who asks
    (a database storm's ``adopt``, a directory's ``grant``)."""

    by: str
    may: tuple[str, ...]
    refusal: Refusal | None

    @property
    def operator(self) -> bool:
        """Whether it is the operator, asking as such (not as a source)."""
        return self.by.startswith("operator:")

    @property
    def settles(self) -> bool:
        """Whether it may settle a finished lane (the review): the operator, or a declared source."""
        return "settle" in self.may


def decide(lane: str | None, is_operator: bool, name: str, operator: str, whose: str, decl: Declaration,
           source: str | None, operator_only: bool = False, exposed: list[str] | None = None,
           verb: str | None = None) -> Verdict:
    """The grant, whatever the store: a lane process is refused, then anyone
    but the operator (``whose`` says what makes ``operator`` the operator),
    then a source the declaration does not admit (or any source, for a
    request ``operator_only`` or of ``OPERATOR_ONLY``). ``exposed`` says
    what makes the declaration untrustworthy (empty: nothing)."""
    operator_only = operator_only or verb in OPERATOR_ONLY
    if lane is not None:
        return Verdict(
            "lane:" + dumps(lane),
            Refusal("lane_process", f"a lane process (it carries {LANE_ENV}) may not "
                                    f"{DOES.get(verb or '', 'change the priority lane')}"),
        )
    if not is_operator:
        return Verdict(
            f"account:{name}",
            Refusal(
                "not_operator",
                f"only the operator ({operator}, {whose}) "
                f"or a source the operator declares may {DOES.get(verb or '', 'change the priority lane')}",
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

"""Exit codes, mapped here and nowhere else: every code a refused request
can carry, its exit code and what it means; the exit code of each typed
error (``ERRORS``), of a crash and of a signal; and what each exit code
means (``epilog``, for a command's help). A code is stable: scripts match on it. The table
in docs/exit-codes.md is written from this one list (``python -m
storm_queue.cli.reference --write``), and a test makes the tool produce each code."""

from __future__ import annotations

#: code -> (exit code, meaning); 1 is "not authorised", 2 "cannot be carried out as asked"
CODES: dict[str, tuple[int, str]] = {
    # authority (judged after shape, before any lookup)
    "lane_process": (1, "the caller carries `STORM_QUEUE_LANE`: a lane may not change the queue it runs in"),
    "not_operator": (1, "the caller's account (or role) does not own the storm; a runner role asked more than a runner may"),
    "declaration_unreadable": (1, "`storm.toml` cannot be read, `sources` is not a list of names, or `[runner]` is malformed"),
    "declaration_untrusted": (1, "a request that names a source, while `storm.toml` is owned by another account or writable by its group or others"),
    "undeclared_source": (1, "`--source NAME` is not in `[priority] sources`"),
    "operator_only": (1, "`reset`, `adopt`, `unpark`, `recover SLUG`, `waive`, `halt` or `resume` asked by a source"),
    # shape (judged first)
    "invalid_slug": (2, "the slug is not a name"),
    "invalid_dependency": (2, "a dependency is not a name"),
    "invalid_source": (2, "the source is not a name"),
    "invalid_holder": (2, "`claim --holder` is not a name"),
    "invalid_issue": (2, "the issue is not ASCII digits (at most 200) or `-`"),
    "invalid_key": (2, "`--key` is not 1 to 200 letters, digits or `._:@/+=-`"),
    "invalid_time": (2, "`--not-before` is not `now`, `+N[smhd]`, a date or RFC 3339 with a zone"),
    "invalid_token": (2, "the token is not a positive whole number (the Python API; the command line checks it as usage)"),
    "invalid_ledger": (2, "`settle` into a ledger other than `integrated` or `abandoned` (the Python API; the command line checks it as usage)"),
    "invalid_result": (2, "the result is neither `ok` nor `failed` (the Python API; the command line checks it as usage)"),
    "blank_reason": (2, "`reset`, `adopt`, `unpark`, `waive`, `halt`, `resume`, `hold`, `unhold`, `cancel` and `recover --force` need `--reason TEXT`"),
    "lease_ttl_out_of_range": (2, "`--ttl` is outside `[runner] ttl_min`..`ttl_max`"),
    "lease_age_exceeded": (2, "the lease would live past `[runner] max_lease_age` from its claim"),
    # lookups (judged under the lock, against the log and the storm)
    "idempotency_conflict": (2, "`--key` was used before by the same principal for a different request"),
    "unknown_slug": (2, "`queue.txt` carries no such lane (push it instead); for `settle --from`, a slug the batch names; for `hold`, the lane to hold"),
    "reason_too_long": (2, "a `--reason` longer than 4,096 characters (it is not recorded)"),
    "note_too_long": (2, "a `finish --note` longer than 4,096 characters (it is not recorded)"),
    "not_carried": (2, "on a database storm: text holding a NUL or that is not Unicode, a name, key, source, holder or "
                       "`STORM_QUEUE_LANE` over 4,096 characters, a token that is not a whole number, or a token or "
                       "TTL of more than 4,300 digits; never recorded"),
    "unknown_role": (2, "`grant`/`revoke` name a role the database server does not know"),
    "invalid_kind": (2, "`grant`/`revoke` take `runner` or `reader`"),
    "operator_role": (2, "`grant` names the storm's operator role, which may do everything a runner or reader may"),
    "dependency_abandoned": (2, "a dependency is abandoned, so it can never finish"),
    "dependency_unknown": (2, "a dependency is unknown to `queue.txt` and the ledgers (and, for `add --from`, to the batch)"),
    "duplicate_slug": (2, "`add --from`: a slug the batch lists twice, or one already queued; `settle --from`: a slug listed twice"),
    "empty_batch": (2, "`add --from` or `settle --from` of a file with no lane in it (only blank lines and comments, or nothing)"),
    "not_finished": (2, "`settle --from`: a lane of the batch that is not finished (it has not run, or runs now)"),
    "lane_settled": (2, "`settle --from`: a lane of the batch that is settled already; `hold` of a settled lane"),
    "dependency_cycle": (2, "the dependencies form a cycle"),
    "needed_by_named": (2, "`unbump` of a lane a named lane needs"),
    "not_prioritised": (2, "`unbump` of a lane that is not in the priority lane"),
    "issue_mismatch": (2, "`push` of a queued slug with another issue"),
    "deps_mismatch": (2, "`push` of a queued slug with other dependencies"),
    "log_readable": (2, "`reset` while the log replays"),
    "stale_fence": (2, "`renew`, `finish` or `release` with a token that is not the live lease's (absent, older, newer, expired, released or recovered)"),
    "not_holder": (1, "a runner role's `renew`, `finish` or `release` of a live lease another principal took (its token is no proof: the log shows it)"),
    "lane_cancelled": (2, "`renew`, `finish` or `release` with the token of a lease that `cancel` revoked: stop the lane's work"),
    "lease_live": (2, "`recover SLUG` while its lease is live, without `--force`"),
    "marker_running": (2, "`recover SLUG` of a lane running under a marker with no lease, without `--force`: a runner that takes no leases may be running it"),
    "not_running": (2, "`recover SLUG` of a lane that is not running"),
    "lane_running": (2, "`settle` (one lane, or a batch) of a lane holding a live lease, without `--force`"),
    "not_quarantined": (2, "`unpark` of a lane that is not quarantined"),
    "not_a_dependency": (2, "`waive SLUG DEP` where SLUG's line does not name DEP as a dependency"),
    "reorder_conflict": (5, "a database storm's transaction met a serialization failure or deadlock: nothing changed, a retry is safe"),
    # the disk
    "storm_unwritable": (2, "the storm's owner cannot write its files (a read-only directory, log, witness or lock); never recorded"),
}

#: the refusals of authority (exit 1)
AUTHORITY = frozenset(code for code, (exit_code, _) in CODES.items() if exit_code == 1)


def exit_code(code: str | None) -> int:
    """The exit code of a request's outcome: 0 done, 1 not authorised, 2 refused."""
    return 0 if code is None else CODES[code][0]


def table() -> str:
    """The documentation's table of codes (docs/exit-codes.md)."""
    rows = ["| code | exit | meaning |", "|---|---|---|"]
    rows += [f"| `{code}` | {exit_code} | {meaning} |" for code, (exit_code, meaning) in CODES.items()]
    return "\n".join(rows)


#: what each exit code means, as a command's help says it
MEANINGS = {
    0: "done (a recorded no-op too)",
    1: "refused: not authorised",
    2: "refused: cannot be carried out as asked; or a usage error",
    3: "the priority order is unknown: the log cannot be replayed",
    4: "crashed, or the record or the answer could not be written",
    5: "busy: nothing changed, a retry is safe (the lock was held for longer than --wait, or the database cannot be reached)",
    6: "the lease is live still (lease): when --wait ran out, or at once without --wait",
}

#: ``lease``'s exit code for a lease that is live still (0: it has ended, and the answer says how)
LEASE_LIVE = 6


def epilog(*codes: int | tuple[int, str]) -> str:
    """A command's help epilog: exactly the exit codes it can give, each
    with its meaning (``(code, words)`` says it in the command's own words)."""
    lines = ["\b", "Exit codes:"]
    for code in codes:
        num, words = code if isinstance(code, tuple) else (code, MEANINGS[code])
        lines.append(f"  {num}  {words}")
    return "\n".join(lines)


#: the exit code of each typed error (``core.errors``), by class name
ERRORS = {
    "StormError": 4,  # a crash, or a record that could not be written
    "RecordFailed": 4,
    "OutputFailed": 4,  # stdout could not be written: the answer was not all printed
    "UnknownOrder": 3,
    "NoStorm": 2,
    "StormUnreadable": 2,
    "NotHere": 2,
    "InitRefused": 2,
    "BadArgument": 2,
    "Busy": 5,
    "Unreachable": 5,  # a database that cannot be reached, or dropped the connection before the request was sent
}
#: an error storm-queue did not expect: a bug
CRASHED = 4


def interrupted(signum: int) -> int:
    """The exit code of a command ended by signal ``signum``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + signum

"""bench/database.py's long_lived figures as markdown, for ``--out FILE``
(written between the markers below, the rest of FILE kept)."""

from __future__ import annotations

import os
import platform
import time

from verify import put_section

BEGIN, END = "<!-- bench/database.py: begin -->", "<!-- bench/database.py: end -->"


def _jobs(c: dict) -> str:
    return f"{c['jobs_per_s']:,.0f}" if "jobs_per_s" in c else "not measured"


def _peer(contenders: dict, peer: str, names: tuple[str, str]) -> tuple[str, str]:
    """The peer's name with its version, and its two contenders' jobs/s."""
    first = contenders.get(names[0], {})
    version = ".".join(first["version"].split(".")[:2]) if "version" in first else None
    figures = " / ".join(_jobs(contenders.get(n, {})) for n in names)
    if version is None:
        return peer, f"not measured: {first.get('unavailable', 'not run')}"
    return f"{peer} {version}", figures


def table(long: dict) -> str:
    """The contenders' table and the pinned ratios."""
    c, n = long["contenders"], long["runners"]
    procrastinate, p_figures = _peer(c, "procrastinate", ("procrastinate_8proc", "procrastinate_1proc_c8"))
    pgqueuer, q_figures = _peer(c, "pgqueuer", ("pgqueuer_batch1", "pgqueuer_batch10"))
    rows = [
        ("contender", "jobs/s", "strict order", "fencing, chained record"),
        (f"storm-queue's database store (bench/database.py, {n} long-lived runners)",
         f"{long['storm_lanes_per_s']:,.0f}", "yes", "yes"),
        (f"{procrastinate}, {n} processes / 1 process with concurrency {n}", p_figures, "no / yes", "no"),
        (f"{pgqueuer}, batch_size 1 / 10", q_figures, "no", "no"),
        ("bare `UPDATE … FOR UPDATE SKIP LOCKED` claim, then finish", _jobs(c["bare_floor"]), "no", "no"),
        ("one hash-chained log in total order under one advisory lock, one round trip per request (plpgsql)",
         _jobs(c["chain_floor"]), "yes", "yes"),
    ]
    idle = long["ratios"].get("storm_idle_over_storm")
    if idle is not None:
        rows.insert(2, (f"the same, with {idle['waiters']} idle `claim --wait` processes attached",
                        _jobs(c[f"storm_idle_{idle['waiters']}"]), "yes", "yes"))
    out = ["| " + " | ".join(r) + " |" for r in rows]
    out.insert(1, "|---|---:|---|---|")
    out += ["", "| ratio (median of the rounds' ratios) | measured | goal | met |", "|---|---:|---:|---|"]
    for key, label in (("storm_over_chain_floor", "storm-queue / the chained floor"),
                       ("storm_over_procrastinate_8proc", f"storm-queue / procrastinate, {n} processes")):
        r = long["ratios"][key]
        met = "not measured" if r["met"] is None else "yes" if r["met"] else "**no**"
        shown = "" if r["measured"] is None else f"{r['measured']:.2f}"
        out.append(f"| {label} | {shown} | ≥ {r['goal']:g} | {met} |")
    if idle is not None:
        met = "yes" if idle["met"] else "**no**"
        out.append(f"| storm-queue with {idle['waiters']} idle waiters / without | {idle['measured']:.2f} | "
                   f"≥ {idle['goal']:g} | {met} |")
    return "\n".join(out) + "\n"


def section(long: dict, argv: list[str], started: float, load: tuple[float, float]) -> str:
    """The figures with when, where and how they were measured."""
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(started))
    took = (time.time() - started) / 60
    rounds = "one round" if long["rounds"] == 1 else f"{long['rounds']} interleaved rounds"
    checks = ("yes" if long["claimed_once_in_run_order"] and long["finished_once"] and long["verify"] == "sound"
              else "**no**")
    return "\n".join([
        BEGIN,
        f"Measured {when} UTC on this machine ({os.cpu_count()} cores shared with other work, load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end; Linux {platform.release()}, Python "
        f"{platform.python_version()}), by:",
        "",
        "    python bench/database.py " + " ".join(argv),
        "",
        f"which took {took:.1f} minutes: {rounds} of {long['lanes']:,} lanes (jobs) each, "
        f"on one throwaway server unless `--url` says otherwise. Every lane was claimed once in run order, "
        f"finished once, and `verify` was sound in every round: {checks}.",
        "",
        table(long),
        END,
        "",
    ])


def write(path: str, long: dict, argv: list[str], started: float, load: tuple[float, float]) -> None:
    from pathlib import Path

    put_section(Path(path), section(long, argv, started, load), BEGIN, END)

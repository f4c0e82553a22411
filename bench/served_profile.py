"""Where a served lane's time goes on the server: one long-lived runner
(one ``Storm``, one connection) claims and finishes LANES lanes of a
storm declaring ``[runner] unattended = true`` on a throwaway server
with ``pg_stat_statements`` (``track = all``: the statements inside the
server's functions too) and ``track_functions = all``; prints, per lane,
the client's time, each server function's total and self time, and the
statements that cost the most, as JSON.

    python bench/served_profile.py [--lanes 1000] [--held 7] [--then-claim] [--untracked]

``--held N`` first claims N lanes under other holders (leases held, as
in the 8-runner bench) and keeps them. ``--then-claim`` loops one
``finish --then-claim`` a lane (as the bench's runners do) instead of a
claim and a finish. ``--untracked`` turns the statistics off, for the
client's time and the top statements' alone (tracking every call costs time of its own). Nothing
is asserted: a profile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from tests.pgserver import PgServer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int, default=1000)
    ap.add_argument("--held", type=int, default=7)
    ap.add_argument("--then-claim", action="store_true")
    ap.add_argument("--untracked", action="store_true")
    args = ap.parse_args()
    tracking = ({"track_functions": "none", "pg_stat_statements.track": "top"} if args.untracked
                else {"track_functions": "all", "pg_stat_statements.track": "all"})
    server = PgServer(settings={"shared_preload_libraries": "pg_stat_statements", **tracking, "fsync": "off"}).start()
    try:
        print(json.dumps(profile(server, args.lanes, args.held, args.then_claim), indent=2))
    finally:
        server.stop()


def profile(server: PgServer, lanes: int, held: int, then_claim: bool) -> dict:
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres import driver

    role = server.create_role("bench_op")
    server.create_database("bench", owner=role)
    url = server.url("bench", role)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "storm_queue"]
    subprocess.run([*cli, "init", url], check=True, capture_output=True, env=env)
    toml = Path(tempfile.mkdtemp()) / "storm.toml"
    toml.write_text(f"[runner]\nslots = {held + 1}\nunattended = true\n")
    subprocess.run([*cli, "declare", str(toml), "--root", url], check=True, capture_output=True, env=env)
    with driver.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO storm_queue.lane (slug, issue) VALUES (%s, %s)",
                        [(f"l{i:05d}", str(i)) for i in range(lanes + held)])
    storm = Storm.find(url)
    for i in range(held):
        assert storm.claim(holder=f"other-{i}").decision.startswith("run")
    with server.admin("bench") as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        admin.execute("SELECT pg_stat_statements_reset(), pg_stat_reset()")
    began = time.perf_counter()
    if then_claim:
        d = storm.claim(holder="runner").decision.split()
        for _ in range(lanes):
            assert d[0] == "run", d
            done = storm.finish(d[1], int(d[3]), "ok", then_claim=True, holder="runner")
            d = done.claim.decision.split()
    else:
        for _ in range(lanes):
            d = storm.claim(holder="runner").decision.split()
            assert d[0] == "run", d
            assert storm.finish(d[1], int(d[3]), "ok").outcome == "done"
    client_ms = (time.perf_counter() - began) * 1000
    storm.close()
    time.sleep(0.6)  # the statistics collector's flush (PGSTAT_MIN_INTERVAL: 0.5 s)
    with server.admin("bench") as admin:
        functions = admin.execute(
            "SELECT funcname, calls, round((total_time / %s)::numeric, 4), round((self_time / %s)::numeric, 4) "
            "FROM pg_stat_user_functions WHERE schemaname = 'storm_queue' ORDER BY total_time DESC LIMIT 40",
            (lanes, lanes)).fetchall()
        statements = admin.execute(
            "SELECT toplevel, calls, round((total_exec_time / %s)::numeric, 4), "
            "round((total_plan_time / %s)::numeric, 4), regexp_replace(left(query, 160), '\\s+', ' ', 'g') "
            "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'bench') "
            "ORDER BY total_exec_time DESC LIMIT 15", (lanes, lanes)).fetchall()
    return {"lanes": lanes, "held": held, "then_claim": then_claim, "client_ms_per_lane": round(client_ms / lanes, 3),
            "functions_ms_per_lane": [{"function": f, "calls": c, "total": float(t), "self": float(s)}
                                      for f, c, t, s in functions],
            "statements_ms_per_lane": [{"toplevel": top, "calls": c, "exec": float(e), "plan": float(p), "query": q}
                                       for top, c, e, p, q in statements]}


if __name__ == "__main__":
    main()

"""What a fixed search_path on the server's smallest helpers costs a served
claim (issue 31, item 1: every function in sql/functions/ carries
``SET search_path = pg_catalog, pg_temp``, so the server no longer inlines
``json_str``, ``stamp`` and ``result_token`` as it did their SQL-standard
bodies before, at c073d25):

    python bench/pinned.py [--lanes 300] [--rounds 5]

Two storms on one throwaway server (tests/pgserver.py), both made by this
storm-queue; in the second, the three helpers are put back as c073d25 made
them (no SET clause: inlined). Each round, in turn on each storm (who goes first alternating), the
operator claims then finishes ok LANES lanes through the library (the
claim, finish and fold served by the server: one call each). Prints the
median time per claim + finish of each, and their ratio, measured in the
same run; every round checks that each lane was claimed once, in order.
No figure is asserted."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: the three helpers as c073d25 defined them (migrations/0009.sql then): SQL-standard bodies, no SET clause
INLINED = (
    """CREATE OR REPLACE FUNCTION storm_queue.json_str(p text) RETURNS text LANGUAGE sql IMMUTABLE
RETURN CASE WHEN p ~ '[^ -~]|["\\\\]' THEN storm_queue.json_str_escaped(p) ELSE '"' || p || '"' END""",
    """CREATE OR REPLACE FUNCTION storm_queue.stamp(p_t double precision) RETURNS text LANGUAGE sql STABLE
RETURN to_char(to_timestamp(floor(p_t) + (round((p_t - floor(p_t)) * 1000000.0::double precision) = 1000000)::integer)
               AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || '.' || lpad((round((p_t - floor(p_t)) * 1000000.0::double precision)::bigint % 1000000)::text, 6, '0') || 'Z'""",
    """CREATE OR REPLACE FUNCTION storm_queue.result_token(p_body jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE
RETURN CASE WHEN jsonb_typeof(p_body->'token') = 'number' AND (p_body->>'token') ~ '^[0-9]+$'
                 AND (p_body->>'token')::numeric > 0 THEN (p_body->>'token')::numeric END""",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=300, help="lanes claimed and finished per storm per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.connect import create
    from tests.pgserver import PgServer

    server = PgServer(settings={"fsync": "off"}).start()
    try:
        urls = {}
        for kind in ("pinned", "inlined"):
            role = server.create_role(f"op_{kind}")
            server.create_database(f"storm_{kind}", owner=role)
            urls[kind] = server.url(f"storm_{kind}", role)
            create(urls[kind])
        from storm_queue.store.postgres import driver

        with driver.connect(urls["inlined"]) as conn:
            conn.execute("SET search_path = pg_catalog, pg_temp")
            for sql in INLINED:
                conn.execute(sql)
        toml = os.path.join(server.dir, "storm.toml")
        with open(toml, "w") as f:
            f.write("[runner]\nunattended = true\nslots = 1000\n")
        per: dict[str, list[float]] = {k: [] for k in urls}
        for r in range(args.rounds):
            for kind, url in (list(urls.items()) if r % 2 == 0 else list(urls.items())[::-1]):  # (alternating who goes first)
                storm = Storm.find(url)
                if r == 0:
                    storm.declare(toml).check()
                slugs = [f"r{r}-{i}" for i in range(args.lanes)]
                for i, slug in enumerate(slugs):
                    storm.add(slug, str(i + 1)).check()
                started = time.perf_counter()
                for slug in slugs:
                    lease = storm.claim(holder="bench").check()
                    assert lease.slug == slug, (lease.slug, slug)
                    storm.finish(slug, lease.token, "ok").check()
                per[kind].append((time.perf_counter() - started) / args.lanes * 1000)
                storm.store.close()
        med = {k: statistics.median(v) for k, v in per.items()}
        print(json.dumps({"lanes": args.lanes, "rounds": args.rounds,
                          "claim_finish_ms": {k: round(v, 3) for k, v in med.items()},
                          "pinned_over_inlined": round(med["pinned"] / med["inlined"], 3),
                          "each_round_ms": {k: [round(x, 3) for x in v] for k, v in per.items()}}, indent=1))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

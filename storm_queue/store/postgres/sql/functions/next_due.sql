-- core/runs.py next_due: the first moment after p_now at which time alone
-- changes what the storm decides (a lease expires, a schedule comes due),
-- of the leases' expiries and the schedules p_times; NULL when none is
-- after p_now. (serve_claim gives it those of storm_queue.watch.)
-- (plpgsql, whose plan a session keeps: an SQL function with a subquery is
-- never inlined, and is planned again at each call)
CREATE OR REPLACE FUNCTION storm_queue.next_due(p_times text[], p_now text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT min(t COLLATE "C") FROM unnest(p_times) t WHERE t COLLATE "C" > p_now COLLATE "C");
END
$$;

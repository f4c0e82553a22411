-- core/resolver.py decided's finished lanes, in run order (in_run_order):
-- every lane of the queue with a result row, neither settled nor a sound
-- row's foreign result (a result row whose token is not the live lease's),
-- the priority lane's places first, then queue order.
CREATE OR REPLACE FUNCTION storm_queue.finished_in_run_order() RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY(
        SELECT l.slug FROM storm_queue.lane l
        JOIN storm_queue.result x ON x.slug = l.slug
        LEFT JOIN storm_queue.priority p ON p.slug = l.slug
        LEFT JOIN storm_queue.run u ON u.slug = l.slug
        WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
          AND storm_queue.lane_sound(l.slug, l.issue, l.deps)
          AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
        ORDER BY p.place IS NULL, p.place, l.pos)
$$;

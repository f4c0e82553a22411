-- The mark of the queue walk (runs_at.open_from) when the priority lane
-- named the lane and the queue was not walked: the position of the first
-- lane from p_from that is neither settled, finished, leased,
-- quarantined nor held (each lane's rows by key, a window of lanes at a time); NULL
-- when there is none.
CREATE OR REPLACE FUNCTION storm_queue.open_mark(p_from bigint) RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rec record;
    v_from bigint := p_from;
    v_last bigint;
BEGIN
    LOOP
        v_last := NULL;
        FOR rec IN SELECT l.slug, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from ORDER BY l.pos LIMIT 64 LOOP
            v_last := rec.pos;
            IF NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = rec.slug)
               AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug)
               AND NOT EXISTS (SELECT 1 FROM storm_queue.run u WHERE u.slug = rec.slug
                               AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL
                                    OR u.held_seq IS NOT NULL)) THEN
                RETURN rec.pos;
            END IF;
        END LOOP;
        IF v_last IS NULL THEN
            RETURN NULL;
        END IF;
        v_from := v_last + 1;
    END LOOP;
END
$$;

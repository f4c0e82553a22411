-- core/resolver.py decided, its walk through the priority lane (the lanes
-- bumped, in their places): the first lane ready at p_at, passing over what
-- is settled, finished (a result row), leased, quarantined, held (its
-- dependants wait) or not sound (lane_sound); the lanes met before it that
-- are blocked on an abandoned dependency (and those dependencies,
-- space-separated, in gones).
CREATE OR REPLACE FUNCTION storm_queue.walk_priority(p_at text, OUT ready text, OUT issue text, OUT blocked text[],
                                                     OUT gones text[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rec record;
    v_gone text[];
    v_slug text;
BEGIN
    blocked := '{}';
    gones := '{}';
    FOR v_slug IN SELECT p.slug FROM storm_queue.priority p ORDER BY p.place LOOP
        -- one lane at a time, by its keys: a join of the whole queue would be planned (tables never analysed) as
        -- a scan of every lane and run at every claim
        SELECT l.slug, l.issue, l.deps, u.not_before INTO rec
        FROM storm_queue.lane l
        LEFT JOIN storm_queue.run u ON u.slug = l.slug
        WHERE l.slug = v_slug
          AND storm_queue.lane_sound(l.slug, l.issue, l.deps)
          AND (SELECT true FROM storm_queue.settled s WHERE s.slug = l.slug) IS NULL
          AND (SELECT true FROM storm_queue.result x WHERE x.slug = l.slug) IS NULL
          AND u.lease_token IS NULL AND u.quarantined IS NULL AND u.held_seq IS NULL;
        CONTINUE WHEN NOT FOUND;
        v_gone := storm_queue.serve_waits(rec.slug, rec.deps, rec.not_before, p_at);
        IF v_gone IS NULL THEN
            ready := rec.slug;
            issue := rec.issue;
            RETURN;
        ELSIF cardinality(v_gone) > 0 THEN
            blocked := blocked || rec.slug;
            gones := gones || array_to_string(v_gone, ' ');
        END IF;
    END LOOP;
END
$$;

-- core/resolver.py decided, its walk through the priority lane (the lanes
-- bumped, in their places) from the place p_from (runs_at.prio_from): the
-- first lane ready at p_at, passing over what is settled, finished (a
-- result row), leased, quarantined, held (its dependants wait) or not
-- sound (lane_sound); the lanes met before it that are blocked on an
-- abandoned dependency (and those dependencies, space-separated, in
-- gones); and the mark: the place of the first lane the walk could not
-- pass until a row changes or time passes (neither settled, finished,
-- leased, quarantined, held nor later: scheduled after p_at and naming no
-- dependency), else the place after the last it passed (NULL: it met no
-- lane); with the later lanes it passed, the earliest time one is
-- scheduled (later_until) and the first one's place (later_back).
CREATE OR REPLACE FUNCTION storm_queue.walk_priority(p_at text, p_from bigint, OUT ready text, OUT issue text,
                                                     OUT blocked text[], OUT gones text[], OUT mark bigint,
                                                     OUT later_until text, OUT later_back bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rec record;
    v_gone text[];
    v_slug text;
    v_place bigint;
BEGIN
    blocked := '{}';
    gones := '{}';
    FOR v_slug, v_place IN SELECT p.slug, p.place FROM storm_queue.priority p WHERE p.place >= p_from ORDER BY p.place LOOP
        -- one lane at a time, by its keys: a join of the whole queue would be planned (tables never analysed) as
        -- a scan of every lane and run at every claim
        SELECT l.slug IS NOT NULL AS queued, l.issue, l.deps, u.not_before, u.held_seq IS NOT NULL AS held,
               (SELECT true FROM storm_queue.settled s WHERE s.slug = v_slug) IS NOT NULL
               OR (SELECT true FROM storm_queue.result x WHERE x.slug = v_slug) IS NOT NULL AS done,
               coalesce(u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL, false) AS taken
        INTO rec
        FROM (SELECT 1) one
        LEFT JOIN storm_queue.lane l ON l.slug = v_slug
        LEFT JOIN storm_queue.run u ON u.slug = v_slug;
        IF mark IS NULL AND (rec.not_before COLLATE "C" > p_at COLLATE "C" AND cardinality(rec.deps) = 0) THEN
            later_until := least(later_until, rec.not_before COLLATE "C");
            later_back := coalesce(later_back, v_place);
        ELSIF mark IS NULL AND NOT (rec.done OR rec.taken OR rec.held) THEN  -- (unhold moves it back: run_open)
            mark := v_place;
        END IF;
        CONTINUE WHEN NOT rec.queued OR rec.done OR rec.taken OR rec.held
                      OR NOT storm_queue.lane_sound(v_slug, rec.issue, rec.deps);
        v_gone := storm_queue.serve_waits(v_slug, rec.deps, rec.not_before, p_at);
        IF v_gone IS NULL THEN
            ready := v_slug;
            issue := rec.issue;
            RETURN;
        ELSIF cardinality(v_gone) > 0 THEN
            blocked := blocked || v_slug;
            gones := gones || array_to_string(v_gone, ' ');
        END IF;
    END LOOP;
    IF mark IS NULL AND v_place IS NOT NULL THEN
        mark := v_place + 1;
    END IF;
END
$$;

-- core/resolver.py decided, its walk in queue order (the lanes' positions
-- from p_from, runs_at.open_from, a window of lanes at a time by pos's
-- index) after the priority lane named none: the first lane ready at p_at,
-- passing over what is bumped (walked before), settled, finished, leased,
-- quarantined, held, not sound or scheduled later; the lanes met before it
-- that are blocked on an abandoned dependency (and those dependencies, in
-- gones); and the mark (open_mark): the first lane the walk could not pass
-- until a row changes or time passes (one neither settled, finished,
-- leased, quarantined, held nor later: scheduled after p_at and naming no
-- dependency, so neither ready nor blocked). The later lanes the mark
-- passed: the earliest time one is scheduled (later_until) and the first
-- one's position (later_back), where the mark goes back at that time
-- (decided). Past the mark, the window's query passes later lanes itself.
CREATE OR REPLACE FUNCTION storm_queue.walk_queue(p_at text, p_from bigint, OUT ready text, OUT issue text,
                                                  OUT blocked text[], OUT gones text[], OUT open_mark bigint,
                                                  OUT later_until text, OUT later_back bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rec record;
    v_gone text[];
    v_from bigint := p_from;
    v_last bigint;
BEGIN
    blocked := '{}';
    gones := '{}';
    WHILE ready IS NULL AND v_from IS NOT NULL LOOP
        v_last := NULL;
        FOR rec IN
            SELECT w.*,
                   NOT w.later AND ((SELECT true FROM storm_queue.settled s WHERE s.slug = w.slug) IS NOT NULL
                                    OR (SELECT true FROM storm_queue.result x WHERE x.slug = w.slug) IS NOT NULL) AS done,
                   (SELECT true FROM storm_queue.priority p WHERE p.slug = w.slug) IS NOT NULL AS prio,
                   storm_queue.lane_sound(w.slug, w.issue, w.deps) IS TRUE AS sound
            FROM (SELECT l.slug, l.issue, l.deps, l.pos, u.not_before, u.held_seq IS NOT NULL AS held,
                         u.lease_token IS NULL AND u.quarantined IS NULL AS free,
                         (u.not_before COLLATE "C" > p_at COLLATE "C" AND cardinality(l.deps) = 0) IS TRUE AS later
                  FROM storm_queue.lane l
                  LEFT JOIN LATERAL (SELECT * FROM storm_queue.run u WHERE u.slug = l.slug LIMIT 1) u ON true  -- by its key
                  WHERE l.pos >= v_from
                    AND (open_mark IS NULL OR (u.not_before COLLATE "C" > p_at COLLATE "C" AND cardinality(l.deps) = 0)
                                              IS NOT TRUE)
                  ORDER BY l.pos LIMIT 64) w
            ORDER BY w.pos
        LOOP
            v_last := rec.pos;
            IF open_mark IS NULL AND rec.later THEN
                later_until := least(later_until, rec.not_before COLLATE "C");
                later_back := coalesce(later_back, rec.pos);
            ELSIF open_mark IS NULL AND NOT rec.done AND rec.free IS NOT FALSE AND NOT rec.held THEN  -- (unhold: run_open)
                open_mark := rec.pos;
            END IF;
            CONTINUE WHEN rec.later OR rec.free IS FALSE OR rec.prio OR rec.done OR NOT rec.sound OR rec.held;
            v_gone := storm_queue.serve_waits(rec.slug, rec.deps, rec.not_before, p_at);
            IF v_gone IS NULL THEN
                ready := rec.slug;
                issue := rec.issue;
                EXIT;
            ELSIF cardinality(v_gone) > 0 THEN
                blocked := blocked || rec.slug;
                gones := gones || array_to_string(v_gone, ' ');
            END IF;
        END LOOP;
        v_from := v_last + 1;
    END LOOP;
END
$$;

-- core/resolver.py decided, its walk: the run order (the priority lane, then
-- queue order from runs_at.open_from) up to the first ready lane at p_at,
-- passing over what is settled, finished (a result row), leased or
-- quarantined, a lane the operator holds (hold: its dependants wait), and a
-- lane row that is not sound (lane_sound: skipped, as a bad queue.txt line
-- is); the lanes met before it that are blocked on an abandoned dependency
-- (and those dependencies, space-separated). The mark (open_from) moves
-- past the lanes now settled, finished, leased or quarantined, each passed
-- over once, not at every claim; it stops at a held lane (unhold moves no mark).
CREATE OR REPLACE FUNCTION storm_queue.decided(p_at text, OUT ready text, OUT issue text, OUT blocked text[], OUT gones text[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h storm_queue.runs_at;
    rec record;
    v_gone text[];
    v_slug text;
    v_from bigint;
    v_last bigint;
    v_open bigint;
    v_walked boolean;
BEGIN
    blocked := '{}';
    gones := '{}';
    SELECT * INTO h FROM storm_queue.runs_at;
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
            EXIT;
        ELSIF cardinality(v_gone) > 0 THEN
            blocked := blocked || rec.slug;
            gones := gones || array_to_string(v_gone, ' ');
        END IF;
    END LOOP;
    v_from := h.open_from;
    v_walked := ready IS NULL;
    WHILE ready IS NULL AND v_from IS NOT NULL LOOP  -- queue order, a window of lanes at a time (by pos's index)
        v_last := NULL;
        FOR rec IN
            SELECT w.slug, w.issue, w.deps, w.pos, u.not_before, u.lease_token IS NULL AND u.quarantined IS NULL AS free,
                   (SELECT true FROM storm_queue.settled s WHERE s.slug = w.slug) IS NOT NULL
                   OR (SELECT true FROM storm_queue.result x WHERE x.slug = w.slug) IS NOT NULL AS done,
                   (SELECT true FROM storm_queue.priority p WHERE p.slug = w.slug) IS NOT NULL AS prio,
                   storm_queue.lane_sound(w.slug, w.issue, w.deps) IS TRUE AS sound, u.held_seq IS NOT NULL AS held
            FROM (SELECT l.slug, l.issue, l.deps, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from
                  ORDER BY l.pos LIMIT 64) w
            LEFT JOIN LATERAL (SELECT * FROM storm_queue.run u WHERE u.slug = w.slug LIMIT 1) u ON true  -- by its key
            ORDER BY w.pos
        LOOP
            v_last := rec.pos;
            IF v_open IS NULL AND NOT rec.done AND rec.free IS NOT FALSE THEN  -- the mark: the first lane it cannot pass
                v_open := rec.pos;
            END IF;
            CONTINUE WHEN rec.free IS FALSE OR rec.prio OR rec.done OR NOT rec.sound OR rec.held;
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
    IF NOT v_walked THEN  -- the priority lane named the lane: the mark is walked for (each lane's rows by key)
        v_from := h.open_from;
        LOOP
            v_last := NULL;
            FOR rec IN SELECT l.slug, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from ORDER BY l.pos LIMIT 64 LOOP
                v_last := rec.pos;
                IF NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = rec.slug)
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug)
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.run u WHERE u.slug = rec.slug
                                   AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL)) THEN
                    v_open := rec.pos;
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN v_open IS NOT NULL OR v_last IS NULL;
            v_from := v_last + 1;
        END LOOP;
    END IF;
    IF v_open IS DISTINCT FROM h.open_from AND v_open IS NOT NULL THEN
        PERFORM set_config('storm_queue.folding', 'on', true);
        UPDATE storm_queue.runs_at SET open_from = v_open;
    END IF;
END
$$;

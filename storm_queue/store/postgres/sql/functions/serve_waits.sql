-- core/resolver.py _state for a lane not settled, finished, held or
-- quarantined: NULL when it is ready at p_now; else the abandoned
-- dependencies it is blocked on (not waived, in its line's order), or none
-- when it waits on a dependency not integrated or on its schedule.
CREATE OR REPLACE FUNCTION storm_queue.serve_waits(p_slug text, p_deps text[], p_not_before text, p_now text) RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_gone text[];
BEGIN
    IF cardinality(p_deps) > 0 THEN
        v_gone := ARRAY(SELECT d.dep FROM unnest(p_deps) WITH ORDINALITY AS d(dep, n)
                        WHERE NOT EXISTS (SELECT 1 FROM storm_queue.waiver w WHERE w.slug = p_slug AND w.dep = d.dep)
                          AND EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = d.dep AND s.ledger = 'abandoned')
                        ORDER BY d.n);
        IF cardinality(v_gone) > 0 THEN
            RETURN v_gone;
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_deps) AS d(dep)
                   WHERE NOT EXISTS (SELECT 1 FROM storm_queue.waiver w WHERE w.slug = p_slug AND w.dep = d.dep)
                     AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = d.dep AND s.ledger = 'integrated')) THEN
            RETURN '{}';
        END IF;
    END IF;
    IF p_not_before IS NOT NULL AND p_not_before COLLATE "C" > p_now COLLATE "C" THEN
        RETURN '{}';
    END IF;
    RETURN NULL;
END
$$;

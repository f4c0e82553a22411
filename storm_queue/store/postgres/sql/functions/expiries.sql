-- core/runs.py expiries, in the fold's order of runs: an expire for every
-- lease past its expiry at p_at (and a quarantine when it spent the last
-- of p_budget attempts, unless settled or finished), and a quarantine for
-- every lane not held that spent its attempts (unless settled, finished,
-- gone from the queue, or its last attempt finished ok), each one a row of
-- storm_queue.watch: the lines' actions and their other fields.
CREATE OR REPLACE FUNCTION storm_queue.expiries(p_at text, p_budget bigint, OUT actions text[], OUT rests text[],
                                           OUT slugs text[])
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rec record;
BEGIN
    actions := '{}';
    rests := '{}';
    slugs := '{}';
    IF NOT EXISTS (SELECT 1 FROM storm_queue.watch u
                   WHERE (u.lease_token IS NOT NULL AND u.expires COLLATE "C" <= p_at COLLATE "C")
                      OR (u.lease_token IS NULL AND u.quarantined IS NULL AND u.attempts >= p_budget
                          AND u.last_end IS DISTINCT FROM 'ok'
                          AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE l.slug = u.slug))) THEN
        RETURN;  -- (asked once, opening no cursor)
    END IF;
    FOR rec IN SELECT u.*, EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = u.slug)
                          OR EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = u.slug) AS done
               FROM storm_queue.watch u
               WHERE (u.lease_token IS NOT NULL AND u.expires COLLATE "C" <= p_at COLLATE "C")
                  OR (u.lease_token IS NULL AND u.quarantined IS NULL AND u.attempts >= p_budget
                      AND u.last_end IS DISTINCT FROM 'ok' AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE l.slug = u.slug))
               ORDER BY u.since LOOP
        IF rec.lease_token IS NOT NULL THEN
            actions := actions || 'expire'::text;
            rests := rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"token":' || rec.lease_token
                               || ',"expired":' || storm_queue.json_str(rec.expires));
            slugs := slugs || rec.slug;
            IF rec.quarantined IS NULL AND rec.attempts >= p_budget AND NOT rec.done THEN
                actions := actions || 'quarantine'::text;
                rests := rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"attempts":' || rec.attempts
                                   || ',"budget":' || p_budget);
                slugs := slugs || rec.slug;
            END IF;
        ELSIF NOT rec.done THEN
            actions := actions || 'quarantine'::text;
            rests := rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"attempts":' || rec.attempts
                               || ',"budget":' || p_budget);
            slugs := slugs || rec.slug;
        END IF;
    END LOOP;
END
$$;

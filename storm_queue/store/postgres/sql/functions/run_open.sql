-- A lane whose lease ended or whose quarantine was lifted (and that is
-- neither held nor quarantined now), whose hold ended, whose schedule
-- changed, or whose run row went, and that is neither settled nor
-- finished, can be claimed again: the marks go back to it (to the start
-- for a TRUNCATE).
CREATE OR REPLACE FUNCTION storm_queue.run_open() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE storm_queue.runs_at SET open_from = -9223372036854775808, prio_from = -9223372036854775808,
                                      later_until = NULL, open_back = NULL, prio_back = NULL
        WHERE open_from <> -9223372036854775808 OR prio_from <> -9223372036854775808;
    ELSIF NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = OLD.slug)
          AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = OLD.slug) THEN
        UPDATE storm_queue.runs_at a SET open_from = l.pos
        FROM storm_queue.lane l
        WHERE l.slug = OLD.slug AND l.pos < a.open_from;
        UPDATE storm_queue.runs_at a SET prio_from = p.place
        FROM storm_queue.priority p
        WHERE p.slug = OLD.slug AND p.place < a.prio_from;
    END IF;
    RETURN NULL;
END
$$;

-- core/fold.py Fold._shift: the lanes an event moved join the end of the
-- priority lane (each keeping its place if it has one), the lanes it removed leave it
CREATE OR REPLACE FUNCTION storm_queue.fold_shift(e jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_slug text;
BEGIN
    IF jsonb_typeof(e->'moved') = 'array' THEN
        FOR v_slug IN SELECT value FROM jsonb_array_elements_text(e->'moved') WITH ORDINALITY ORDER BY ordinality LOOP
            INSERT INTO storm_queue.priority (slug, place)
            VALUES (v_slug, coalesce((SELECT max(place) FROM storm_queue.priority), 0) + 1)
            ON CONFLICT (slug) DO NOTHING;
        END LOOP;
    END IF;
    IF jsonb_typeof(e->'removed') = 'array' THEN
        DELETE FROM storm_queue.priority WHERE slug IN (SELECT jsonb_array_elements_text(e->'removed'));
    END IF;
END
$$;

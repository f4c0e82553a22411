--
-- An adopt's lane (core/framing._rows_ok): a list of objects with exactly
-- the fields slug, named, by, at, action, for and line, of their kinds, the
-- slugs (and each row's "for") names, no slug twice
CREATE OR REPLACE FUNCTION storm_queue.lane_rows_sound(p json) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN json_typeof(p) = 'array'
           AND NOT EXISTS (
               SELECT 1 FROM json_array_elements(p) r(x)
               WHERE json_typeof(r.x) <> 'object'
                  OR (SELECT array_agg(k COLLATE "C" ORDER BY k COLLATE "C") FROM json_object_keys(r.x) k)
                     IS DISTINCT FROM ARRAY['action', 'at', 'by', 'for', 'line', 'named', 'slug']
                  OR json_typeof(r.x->'slug') <> 'string' OR json_typeof(r.x->'named') <> 'boolean'
                  OR json_typeof(r.x->'by') <> 'string' OR json_typeof(r.x->'at') <> 'string'
                  OR json_typeof(r.x->'action') <> 'string' OR json_typeof(r.x->'for') <> 'string'
                  OR (r.x->'line')::text !~ '^-?(0|[1-9][0-9]{0,14})$'
                  OR NOT storm_queue.is_name(r.x->>'slug') OR NOT storm_queue.is_name(r.x->>'for'))
           AND (SELECT count(*) = count(DISTINCT r.x->>'slug') FROM json_array_elements(p) r(x));
END
$$;

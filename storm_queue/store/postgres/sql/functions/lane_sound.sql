-- A lane row a claim may lease and next may print, as store/postgres/rows.py
-- reads one (a queue.txt line's rules): its slug a name, its issue ASCII
-- digits or '-', its dependencies a list (one dimension, no NULL) of names.
-- A row written by hand that breaks them is skipped and reported, never leased.
CREATE OR REPLACE FUNCTION storm_queue.lane_sound(p_slug text, p_issue text, p_deps text[]) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN CASE WHEN p_deps IS NULL OR coalesce(array_ndims(p_deps), 1) <> 1 THEN false
                    ELSE storm_queue.is_name(p_slug)
                         AND (p_issue = '-' OR (length(p_issue) <= 200 AND p_issue COLLATE "C" ~ '^[0-9]+$'))
                         AND array_position(p_deps, NULL) IS NULL
                         AND (cardinality(p_deps) = 0
                              OR (array_to_string(p_deps, ' ') COLLATE "C"
                                  ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,199}( [A-Za-z0-9][A-Za-z0-9._-]{0,199})*$'
                                  AND strpos(array_to_string(p_deps, ' '), '..') = 0)) END;
END
$$;

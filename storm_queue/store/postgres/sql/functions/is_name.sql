-- core/names.is_name: at most 200 ASCII letters, digits, '.', '_' and '-',
-- starting with a letter or digit, without '..'
CREATE OR REPLACE FUNCTION storm_queue.is_name(p text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN length(p) <= 200 AND p COLLATE "C" ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$' AND strpos(p, '..') = 0;
END
$$;

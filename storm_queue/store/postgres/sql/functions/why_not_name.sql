-- core/names.why_not_name: why p is not a name, in words
CREATE OR REPLACE FUNCTION storm_queue.why_not_name(p text) RETURNS text LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN CASE WHEN p = '' THEN 'it is empty'
                    WHEN length(p) > 200 THEN 'it is longer than 200 characters'
                    WHEN strpos(p, '..') > 0 THEN 'it contains ''..'''
                    ELSE 'a name is letters, digits, ''.'', ''_'' and ''-'', starting with a letter or digit' END;
END
$$;

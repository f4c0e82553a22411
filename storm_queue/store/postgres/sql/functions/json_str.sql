-- A text as a JSON string exactly as core/jsoncodec.dumps writes it: as it
-- is when it needs no escape, else by json_str_escaped.
CREATE OR REPLACE FUNCTION storm_queue.json_str(p text) RETURNS text LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN CASE WHEN p ~ '[^ -~]|["\\]' THEN storm_queue.json_str_escaped(p) ELSE '"' || p || '"' END;
END
$$;

-- A text as a JSON string exactly as Python's json encoder writes it with
-- ensure_ascii (core/jsoncodec.dumps): " and \ escaped, \n \r \t \b \f by
-- name, every other character outside space..~ as \uXXXX (lowercase hex; a
-- character past U+FFFF as its surrogate pair).
CREATE OR REPLACE FUNCTION storm_queue.json_str_escaped(p text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_out text := '"';
    v_c text;
    v_n integer;
BEGIN
    IF p !~ '[^ -~]|["\\]' THEN
        RETURN '"' || p || '"';
    END IF;
    FOR i IN 1..length(p) LOOP
        v_c := substr(p, i, 1);
        v_n := ascii(v_c);
        v_out := v_out || CASE
            WHEN v_c = '"' THEN '\"'
            WHEN v_c = '\' THEN '\\'
            WHEN v_n = 10 THEN '\n'
            WHEN v_n = 13 THEN '\r'
            WHEN v_n = 9 THEN '\t'
            WHEN v_n = 8 THEN '\b'
            WHEN v_n = 12 THEN '\f'
            WHEN v_n BETWEEN 32 AND 126 THEN v_c
            WHEN v_n < 65536 THEN '\u' || lpad(to_hex(v_n), 4, '0')
            ELSE '\u' || to_hex(55296 + ((v_n - 65536) >> 10)) || '\u' || to_hex(56320 + ((v_n - 65536) & 1023))
        END;
    END LOOP;
    RETURN v_out || '"';
END
$$;

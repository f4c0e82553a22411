-- core/names.quote: p escaped (a backslash doubled, a character Python does
-- not call printable as \xNN, \uNNNN or \UNNNNNNNN) and in double quotes (a
-- double quote escaped), outside text as data in a refusal's words
CREATE OR REPLACE FUNCTION storm_queue.quoted(p text) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_out text := '';
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
            WHEN v_c = '\' THEN '\\'
            WHEN v_c = '"' THEN '\"'
            WHEN v_n BETWEEN 32 AND 126 THEN v_c
            WHEN v_n >= 128 AND NOT EXISTS (
                SELECT 1 FROM (SELECT u.hi FROM storm_queue.unprintable u WHERE u.lo <= v_n ORDER BY u.lo DESC LIMIT 1) x
                WHERE x.hi >= v_n) THEN v_c
            WHEN v_n < 256 THEN '\x' || lpad(to_hex(v_n), 2, '0')
            WHEN v_n < 65536 THEN '\u' || lpad(to_hex(v_n), 4, '0')
            ELSE '\U' || lpad(to_hex(v_n), 8, '0')
        END;
    END LOOP;
    RETURN '"' || v_out || '"';
END
$$;

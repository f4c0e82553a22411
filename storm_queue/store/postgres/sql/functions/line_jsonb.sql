-- A line of the log as jsonb (jsonb holds no NUL: a \u0000 escape, which no
-- field the server folds may hold, is read as U+FFFD; an escaped backslash
-- before it is kept as it is)
CREATE OR REPLACE FUNCTION storm_queue.line_jsonb(p_line bytea) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_text text := convert_from(p_line, 'UTF8');
BEGIN
    IF strpos(v_text, '\u0000') > 0 THEN
        v_text := replace(replace(v_text, '\\', '\u005c'), '\u0000', '\ufffd');
    END IF;
    RETURN v_text::jsonb;
END
$$;

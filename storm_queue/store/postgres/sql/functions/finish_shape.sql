-- The shape refusal of a finish (service/finishing.py finish): its slug,
-- source and token (serve_shape), a result neither ok nor failed, a note
-- over 4,096 characters; or NULLs.
CREATE OR REPLACE FUNCTION storm_queue.finish_shape(p_slug text, p_source text, p_token numeric, p_result text,
                                                    p_note text, OUT code text, OUT message text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT s.code, s.message INTO code, message FROM storm_queue.serve_shape(p_slug, p_source, p_token) s;
    IF code IS NULL AND p_result NOT IN ('ok', 'failed') THEN
        code := 'invalid_result';
        message := 'result ' || storm_queue.quoted(p_result) || ' is neither ok nor failed';
    ELSIF code IS NULL AND length(p_note) > 4096 THEN
        code := 'note_too_long';
        message := 'a note of ' || to_char(length(p_note), 'FM999,999,999,999') || ' characters is longer than 4,096: '
            || 'shorten it (a note says how the lane ended; keep the rest in the lane''s own output)';
    END IF;
END
$$;

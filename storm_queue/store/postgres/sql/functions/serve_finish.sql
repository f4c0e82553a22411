-- finish (core/runs.py plan_finish): end the live lease on p_slug held under
-- p_token with p_result (ok: the lane's result row, finished, awaiting
-- review; failed: claimable again, or quarantined once its attempts are
-- spent), with p_note (at most 4,096 characters, else note_too_long); or
-- record why not.
CREATE OR REPLACE FUNCTION storm_queue.serve_finish(p_slug text, p_token numeric, p_result text, p_note text, p_reason text,
                                         p_key text, p_lane text, p_source text, p_wait_ms integer, p_ask text)
RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    b record;
    s record;
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) IS DISTINCT FROM 0 OR p_result IS NULL OR length(p_result) > 4096 THEN
        RAISE EXCEPTION 'a finish names its lane, a token in a whole number and a result' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.finish_shape(p_slug, p_source, p_token, p_result, p_note);
    SELECT * INTO b FROM storm_queue.serve_start('finish', p_slug, p_reason, p_key, p_lane, p_source,
        p_token || ', ' || storm_queue.json_str(p_result) || ', ' || coalesce(storm_queue.json_str(p_note), 'null'),
        s.code, s.message, NULL, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    RETURN storm_queue.serve_finished(b.at, b.who, b.policy, b.reason, b.key, b.fingerprint, p_slug, p_token, p_result,
                                      p_note, p_ask);
END
$$;

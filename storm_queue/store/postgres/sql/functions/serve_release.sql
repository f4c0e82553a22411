-- release (core/runs.py plan_release): the holder gives its live lease on
-- p_slug back: the lane may be claimed again at once, the attempt stays
-- spent (one that spent the last attempt quarantines the lane); or record
-- why not.
CREATE OR REPLACE FUNCTION storm_queue.serve_release(p_slug text, p_token numeric, p_reason text, p_key text, p_lane text,
                                          p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    b record;
    s record;
    f record;
    d record;
    r storm_queue.run;
    v_budget bigint;
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) IS DISTINCT FROM 0 THEN
        RAISE EXCEPTION 'a release names its lane and a token in a whole number' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, p_token);
    SELECT * INTO b FROM storm_queue.serve_start('release', p_slug, p_reason, p_key, p_lane, p_source, p_token::text,
        s.code, s.message, NULL, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'release', b.at, b.who);
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(b.at, b.who, 'release', p_slug, f.code, f.message, true, b.reason, b.key,
                                         b.fingerprint, p_ask);
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    SELECT * INTO d FROM storm_queue.serve_ended(r, b.at, b.who, 'release',
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"holder":' || storm_queue.json_str(r.holder),
        storm_queue.carried(b.reason, b.key, b.fingerprint), 'released', v_budget, 0, b.key, b.fingerprint, p_ask);
    RETURN jsonb_build_object('outcome', 'done', 'token', p_token, 'line', d.lines[1], 'message', CASE WHEN d.parked
        THEN p_slug || ' is quarantined: released (token ' || p_token || ') after ' || r.attempts || ' attempts'
        ELSE 'released ' || p_slug || ' (token ' || p_token || '); it may be claimed again (attempt ' || r.attempts
             || ' of ' || v_budget || ' spent)' END);
END
$$;

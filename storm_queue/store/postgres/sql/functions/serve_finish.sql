-- finish (core/runs.py plan_finish): end the live lease on p_slug held under
-- p_token with p_result (ok: the lane's result row, finished, awaiting
-- review; failed: claimable again, or quarantined once its attempts are
-- spent), with p_note (at most 4,096 characters, else note_too_long); or
-- record why not.
CREATE OR REPLACE FUNCTION storm_queue.serve_finish(p_slug text, p_token numeric, p_result text, p_note text, p_reason text,
                                         p_key text, p_lane text, p_source text, p_wait_ms integer, p_ask text)
RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    s record;
    f record;
    d record;
    r storm_queue.run;
    v_budget bigint;
    v_words text;
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) > 0 OR p_result IS NULL OR length(p_result) > 4096 THEN
        RAISE EXCEPTION 'a finish names its lane, a token in a whole number and a result' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, p_token);
    IF s.code IS NULL AND p_result NOT IN ('ok', 'failed') THEN
        s.code := 'invalid_result';
        s.message := 'result ' || storm_queue.quoted(p_result) || ' is neither ok nor failed';
    ELSIF s.code IS NULL AND length(p_note) > 4096 THEN
        s.code := 'note_too_long';
        s.message := 'a note of ' || to_char(length(p_note), 'FM999,999,999,999') || ' characters is longer than 4,096: '
            || 'shorten it (a note says how the lane ended; keep the rest in the lane''s own output)';
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('finish', p_slug, p_reason, p_key, p_lane, p_source,
        p_token || ', ' || storm_queue.json_str(p_result) || ', ' || coalesce(storm_queue.json_str(p_note), 'null'),
        s.code, s.message, NULL, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'finish', b.at, b.who);
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(b.at, b.who, 'finish', p_slug, f.code, f.message, true, b.reason, b.key,
                                         b.fingerprint, p_ask);
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    IF p_result = 'ok' THEN  -- core/ledgers.finished_result, before its line (as the request path writes it)
        INSERT INTO storm_queue.result (slug, body)
        VALUES (p_slug, jsonb_build_object('completed', true, 'status', 'ok', 'token', p_token, 'holder', r.holder,
                                           'note', p_note, 'at', b.at))
        ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    SELECT * INTO d FROM storm_queue.serve_ended(r, b.at, b.who, 'finish',
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"result":' || storm_queue.json_str(p_result)
        || coalesce(',"note":' || storm_queue.json_str(p_note), ''), storm_queue.carried(b.reason, b.key, b.fingerprint),
        p_result, v_budget, CASE WHEN p_result = 'failed' THEN storm_queue.backoff(b.policy, r.attempts) ELSE 0 END,
        b.key, b.fingerprint, p_ask);
    IF p_result = 'ok' THEN
        v_words := p_slug || ' finished ok (token ' || p_token || '); it awaits review';
    ELSIF d.parked THEN
        v_words := p_slug || ' failed (token ' || p_token || ') and is quarantined after ' || r.attempts || ' attempts';
    ELSE
        v_words := p_slug || ' failed (token ' || p_token || '); attempt ' || r.attempts || ' of ' || v_budget
            || ', it will be claimed again' || coalesce(' after ' || d.not_before, '');
    END IF;
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'token', p_token, 'line', d.lines[1]);
END
$$;

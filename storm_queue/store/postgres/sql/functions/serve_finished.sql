-- A finish admitted by serve_start (at p_at, by p_who, under p_policy,
-- carrying p_reason, p_key and p_fingerprint; core/runs.py plan_finish):
-- the lease's fence (serve_fence: refused, recorded, when p_token is not the
-- live lease's), the result row of an ok (before its line, as the request
-- path writes result.json first), the lines that end the lease
-- (serve_ended) and the answer's words. serve_finish's, and
-- serve_finish_claim's before its claim.
CREATE OR REPLACE FUNCTION storm_queue.serve_finished(p_at text, p_who text, p_policy jsonb, p_reason text, p_key text,
                                                      p_fingerprint text, p_slug text, p_token numeric, p_result text,
                                                      p_note text, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
    d record;
    r storm_queue.run;
    v_budget bigint := (p_policy->>'attempts')::bigint;
    v_words text;
BEGIN
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'finish', p_at, p_who);
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(p_at, p_who, 'finish', p_slug, f.code, f.message, true, p_reason, p_key,
                                         p_fingerprint, p_ask);
    END IF;
    IF p_result = 'ok' THEN  -- core/ledgers.finished_result, before its line (as the request path writes it)
        INSERT INTO storm_queue.result (slug, body)
        VALUES (p_slug, jsonb_build_object('completed', true, 'status', 'ok', 'token', p_token, 'holder', r.holder,
                                           'note', p_note, 'at', p_at))
        ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    SELECT * INTO d FROM storm_queue.serve_ended(r, p_at, p_who, 'finish',
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"result":' || storm_queue.json_str(p_result)
        || coalesce(',"note":' || storm_queue.json_str(p_note), ''), storm_queue.carried(p_reason, p_key, p_fingerprint),
        p_result, v_budget, CASE WHEN p_result = 'failed' THEN storm_queue.backoff(p_policy, r.attempts) ELSE 0 END,
        p_key, p_fingerprint, p_ask);
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

-- finish --then-claim (service/finishing.py finish, then_claim): one request,
-- one transaction under the storm's lock: the finish (serve_finished), then,
-- unless it was refused, the claim for p_holder (NULL: p_default_holder)
-- and p_ttl (NULL: the declared TTL) on the storm after it
-- (serve_claimed), its lines right after the finish's. The finish's line
-- carries the request's reason and key; a claim that leases carries
-- KEY/then-claim (core/runs.py then_key) and the fingerprint of the claim
-- alone, so the pair asked again repeats the finish (serve_start's answer,
-- returned as it is) and its client then asks the claim under that key.
-- A refused finish answers its refusal alone. Returns {finish, claim}.
CREATE OR REPLACE FUNCTION storm_queue.serve_finish_claim(p_slug text, p_token numeric, p_result text, p_note text,
    p_holder text, p_default_holder text, p_ttl numeric, p_reason text, p_key text, p_lane text, p_source text,
    p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    b record;
    s record;
    f jsonb;
    v_holder text := coalesce(p_holder, p_default_holder);
    v_claim_args text := coalesce(storm_queue.json_str(p_holder), 'null') || ', ' || coalesce(p_ttl::text, 'null');
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) IS DISTINCT FROM 0 OR p_result IS NULL OR length(p_result) > 4096
       OR v_holder IS NULL OR length(v_holder) > 4096 OR (p_ttl IS NOT NULL AND scale(p_ttl) IS DISTINCT FROM 0) THEN
        RAISE EXCEPTION 'a finish then claim names its lane, a token in a whole number, a result, its holder and a TTL '
            'in whole seconds' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.finish_shape(p_slug, p_source, p_token, p_result, p_note);
    IF s.code IS NULL AND length(p_key) BETWEEN 190 AND 200 AND p_key COLLATE "C" ~ '^[A-Za-z0-9._:@/+=-]+$' THEN
        s.code := 'invalid_key';
        s.message := 'key ' || storm_queue.quoted(p_key) || ' is longer than 189 characters: a finish --then-claim keys '
            || 'its claim ' || storm_queue.quoted(p_key || '/then-claim') || ', of at most 200';
    ELSIF s.code IS NULL AND NOT storm_queue.is_name(v_holder) THEN
        s.code := 'invalid_holder';
        s.message := 'holder ' || storm_queue.quoted(v_holder) || ' is not a name: ' || storm_queue.why_not_name(v_holder);
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('finish', p_slug, p_reason, p_key, p_lane, p_source,
        p_token || ', ' || storm_queue.json_str(p_result) || ', ' || coalesce(storm_queue.json_str(p_note), 'null')
        || ', ' || v_claim_args, s.code, s.message, p_ttl, true, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    f := storm_queue.serve_finished(b.at, b.who, b.policy, b.reason, b.key, b.fingerprint, p_slug, p_token, p_result,
                                    p_note, p_ask);
    IF f->>'outcome' = 'refused' THEN
        RETURN f;
    END IF;
    RETURN jsonb_build_object('finish', f, 'claim', storm_queue.serve_claimed(b.at, b.who, b.t, b.policy, v_holder,
        coalesce(p_ttl, (b.policy->>'ttl')::numeric)::integer, NULL, b.key || '/then-claim',
        CASE WHEN b.key IS NOT NULL THEN storm_queue.fingerprint('claim', NULL, NULL, p_source, v_claim_args) END, p_ask));
END
$$;

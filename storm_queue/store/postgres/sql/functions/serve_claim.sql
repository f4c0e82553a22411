-- claim (service/leases.py claim, core/runs.py plan_claim): p_holder, the
-- holder asked for (NULL: p_default_holder, the client's own name for
-- itself; the request's fingerprint has NULL), p_ttl (NULL: the declared
-- TTL). Take back every orphaned lease (and quarantine what spent its
-- attempts), then decide as core/resolver.py decided does, walking the run
-- order only to the first ready lane; lease it to the holder under the next
-- fencing token when a slot is free and no halt is in force, and mark
-- blocked the lanes met before it. The claim itself, once serve_start admitted it,
-- is serve_claimed's. Returns the decision, the lease, the
-- halt met, the last line written and the lanes marked blocked.
CREATE OR REPLACE FUNCTION storm_queue.serve_claim(p_holder text, p_default_holder text, p_ttl numeric, p_reason text, p_key text,
                                        p_lane text, p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    b record;
    v_holder text := coalesce(p_holder, p_default_holder);
    v_code text;
    v_message text;
BEGIN
    IF v_holder IS NULL OR length(v_holder) > 4096 OR (p_ttl IS NOT NULL AND scale(p_ttl) IS DISTINCT FROM 0) THEN
        RAISE EXCEPTION 'a claim names its holder, of at most 4,096 characters, and a TTL in whole seconds'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT x.code, x.message INTO v_code, v_message FROM storm_queue.serve_shape(NULL, p_source, NULL) x;
    IF v_code IS NULL AND NOT storm_queue.is_name(v_holder) THEN
        v_code := 'invalid_holder';
        v_message := 'holder ' || storm_queue.quoted(v_holder) || ' is not a name: ' || storm_queue.why_not_name(v_holder);
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('claim', NULL, p_reason, p_key, p_lane, p_source,
        coalesce(storm_queue.json_str(p_holder), 'null') || ', ' || coalesce(p_ttl::text, 'null'),
        v_code, v_message, p_ttl, true, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    RETURN storm_queue.serve_claimed(b.at, b.who, b.t, b.policy, v_holder,  -- (the TTL within the window: serve_start)
        coalesce(p_ttl, (b.policy->>'ttl')::numeric)::integer, b.reason, b.key, b.fingerprint, p_ask);
END
$$;

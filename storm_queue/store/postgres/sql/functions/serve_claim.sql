-- claim (service/leases.py claim, core/runs.py plan_claim): p_holder, the
-- holder asked for (NULL: p_default_holder, the client's own name for
-- itself; the request's fingerprint has NULL), p_ttl (NULL: the declared
-- TTL). Take back every orphaned lease (and quarantine what spent its
-- attempts), then decide as core/resolver.py decided does, walking the run
-- order only to the first ready lane; lease it to the holder under the next
-- fencing token when a slot is free and no halt is in force, and mark
-- blocked the lanes met before it. Each step is a function named after its
-- Python twin (expiries, decided, next_due, claim_decision, serve_lease),
-- held to it by tests/database/test_twins.py. Returns the decision, the lease, the
-- halt met, the last line written and the lanes marked blocked.
CREATE OR REPLACE FUNCTION storm_queue.serve_claim(p_holder text, p_default_holder text, p_ttl numeric, p_reason text, p_key text,
                                        p_lane text, p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    w record;
    e record;
    h storm_queue.runs_at;
    v_holder text := coalesce(p_holder, p_default_holder);
    v_code text;
    v_message text;
    v_lines text[] := '{}';
    v_decision text;
    v_due text;
    v_token bigint;
    v_expires text;
    v_line text;
BEGIN
    IF v_holder IS NULL OR length(v_holder) > 4096 OR scale(p_ttl) > 0 THEN
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
    SELECT * INTO e FROM storm_queue.expiries(b.at, (b.policy->>'attempts')::bigint);
    IF cardinality(e.actions) > 0 THEN  -- folded at once (the trigger): what follows decides on the storm after them
        v_lines := storm_queue.serve_append(b.at, b.who, e.actions, e.rests, false, NULL, NULL, NULL, p_ask);
    END IF;
    SELECT * INTO w FROM storm_queue.decided(b.at);
    SELECT * INTO h FROM storm_queue.runs_at;
    v_due := storm_queue.next_due(ARRAY(SELECT expires FROM storm_queue.watch WHERE lease_token IS NOT NULL
                                        UNION ALL SELECT not_before FROM storm_queue.watch WHERE not_before IS NOT NULL), b.at);
    v_decision := storm_queue.claim_decision(w.ready, w.issue, b.policy, h.halt_seq IS NOT NULL);
    IF v_decision LIKE 'run %' THEN  -- (within the declared TTL window: serve_start refused it else)
        SELECT x.token, x.expires, x.line INTO v_token, v_expires, v_line
        FROM storm_queue.serve_lease(w.ready, w.issue, v_holder, coalesce(p_ttl, (b.policy->>'ttl')::numeric)::integer,
            h.token_floor, b.t, b.at, b.who, b.reason, b.key, b.fingerprint, p_ask) x;
        v_lines := v_lines || v_line;
        v_decision := v_decision || ' ' || v_token;
    END IF;
    PERFORM storm_queue.serve_mark_blocked(w.blocked, w.gones, b.at);
    RETURN jsonb_build_object(
        'outcome', 'done', 'decision', v_decision, 'slug', CASE WHEN v_token IS NOT NULL THEN w.ready END,
        'token', v_token, 'expires', v_expires, 'at', b.at, 'by', b.who, 'due', v_due,
        'halt', CASE WHEN h.halt_seq IS NOT NULL THEN jsonb_build_object(
            'seq', h.halt_seq, 'at', h.halt_at, 'by', h.halt_by, 'reason', h.halt_reason) END,
        'line', v_lines[cardinality(v_lines)], 'blocked', to_jsonb(w.blocked));
END
$$;

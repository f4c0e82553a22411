-- A claim admitted by serve_start (at p_at, the storm's time p_t, by
-- p_who, under p_policy), as core/runs.py plan_claim plans one: every
-- orphaned lease taken back (and what spent its attempts quarantined:
-- expiries), then the decision on the storm after them (decided,
-- claim_decision), the decided lane leased to p_holder for p_ttl seconds
-- when it runs (serve_lease; its line carries p_reason, p_key and
-- p_fingerprint) and the lanes met before it marked blocked. Each step is
-- a function named after its Python twin, held to it by
-- tests/database/test_twins.py. The answer: the decision, the lease, the
-- halt met, the moment time alone changes the decision (next_due), the
-- last line written and the lanes marked blocked. serve_claim's, and
-- serve_finish_claim's after its finish.
CREATE OR REPLACE FUNCTION storm_queue.serve_claimed(p_at text, p_who text, p_t double precision, p_policy jsonb,
                                                     p_holder text, p_ttl integer, p_reason text, p_key text,
                                                     p_fingerprint text, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w record;
    e record;
    h storm_queue.runs_at;
    v_lines text[] := '{}';
    v_decision text;
    v_due text;
    v_token bigint;
    v_expires text;
    v_line text;
BEGIN
    SELECT * INTO e FROM storm_queue.expiries(p_at, (p_policy->>'attempts')::bigint);
    IF cardinality(e.actions) > 0 THEN  -- folded at once (the trigger): what follows decides on the storm after them
        v_lines := storm_queue.serve_append(p_at, p_who, e.actions, e.rests, false, NULL, NULL, NULL, p_ask);
    END IF;
    SELECT * INTO w FROM storm_queue.decided(p_at);
    SELECT * INTO h FROM storm_queue.runs_at;
    v_due := storm_queue.next_due(ARRAY(SELECT expires FROM storm_queue.watch WHERE lease_token IS NOT NULL
                                        UNION ALL SELECT not_before FROM storm_queue.watch WHERE not_before IS NOT NULL), p_at);
    v_decision := storm_queue.claim_decision(w.ready, w.issue, p_policy, h.halt_seq IS NOT NULL);
    IF v_decision LIKE 'run %' THEN
        SELECT x.token, x.expires, x.line INTO v_token, v_expires, v_line
        FROM storm_queue.serve_lease(w.ready, w.issue, p_holder, p_ttl, h.token_floor, p_t, p_at, p_who, p_reason, p_key,
                                     p_fingerprint, p_ask) x;
        v_lines := v_lines || v_line;
        v_decision := v_decision || ' ' || v_token;
    END IF;
    PERFORM storm_queue.serve_mark_blocked(w.blocked, w.gones, p_at);
    RETURN jsonb_build_object(
        'outcome', 'done', 'decision', v_decision, 'slug', CASE WHEN v_token IS NOT NULL THEN w.ready END,
        'token', v_token, 'expires', v_expires, 'at', p_at, 'by', p_who, 'due', v_due,
        'halt', CASE WHEN h.halt_seq IS NOT NULL THEN jsonb_build_object(
            'seq', h.halt_seq, 'at', h.halt_at, 'by', h.halt_by, 'reason', h.halt_reason) END,
        'line', v_lines[cardinality(v_lines)], 'blocked', to_jsonb(w.blocked));
END
$$;

-- recover without a lane (core/runs.py plan_recover, expiries): take back
-- every orphaned lease (and quarantine what spent its attempts). Naming a
-- lane (p_slug), and p_force with it, is the operator's: a runner's is
-- refused not_operator, recorded; the operator's takes its request path.
CREATE OR REPLACE FUNCTION storm_queue.serve_recover(p_slug text, p_force boolean, p_reason text, p_key text, p_lane text,
                                          p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    b record;
    s record;
    e record;
    v_lines text[];
    v_taken text[] := '{}';
    v_parked text[] := '{}';
    v_words text;
BEGIN
    IF coalesce(p_force, false) AND p_slug IS NULL THEN
        RAISE EXCEPTION 'recover --force names its lane' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_slug IS NOT NULL AND session_user = (SELECT operator FROM storm_queue.storm) THEN
        RETURN NULL;  -- the operator's recover SLUG (a marker, a live lease with --force): its request path
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, NULL);
    IF s.code IS NULL AND coalesce(p_force, false) AND btrim(coalesce(p_reason, ''), E' \t\n\r\x0b\x0c') = '' THEN
        s.code := 'blank_reason';
        s.message := 'recover --force needs --reason TEXT saying why the holder is gone';
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('recover', p_slug, p_reason, p_key, p_lane, p_source,
        CASE WHEN p_force THEN 'true' ELSE '' END, s.code, s.message, NULL, false, p_slug IS NOT NULL, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO e FROM storm_queue.expiries(b.at, (b.policy->>'attempts')::bigint);
    IF cardinality(e.actions) = 0 THEN
        RETURN jsonb_build_object('outcome', 'noop', 'message', 'no orphaned lease to take back', 'line', NULL,
                                  'by', b.who);
    END IF;
    e.rests[1] := e.rests[1] || storm_queue.carried(b.reason, b.key, b.fingerprint);
    v_lines := storm_queue.serve_append(b.at, b.who, e.actions, e.rests, false, 1, b.key, b.fingerprint, p_ask);
    FOR i IN 1..cardinality(e.actions) LOOP
        IF e.actions[i] = 'expire' THEN
            v_taken := v_taken || e.slugs[i];
        ELSE
            v_parked := v_parked || e.slugs[i];
        END IF;
    END LOOP;
    v_words := CASE WHEN cardinality(v_taken) > 0 THEN 'took back ' || array_to_string(v_taken, ' ')
                    ELSE 'no orphaned lease to take back' END
        || CASE WHEN cardinality(v_parked) > 0 THEN '; quarantined ' || array_to_string(v_parked, ' ') ELSE '' END;
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'line', v_lines[1]);
END
$$;

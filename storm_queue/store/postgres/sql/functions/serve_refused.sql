-- A refusal's line (service/passage._refused_body and _carry) recorded, and
-- the answer: outcome refused, its code, its message, the line.
CREATE OR REPLACE FUNCTION storm_queue.serve_refused(p_at text, p_by text, p_verb text, p_slug text, p_code text, p_message text,
                                          p_authorised boolean, p_reason text, p_key text, p_fingerprint text,
                                          p_ask text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lines text[];
BEGIN
    v_lines := storm_queue.serve_append(p_at, p_by, ARRAY['refused'], ARRAY[
        ',"requested":' || storm_queue.json_str(p_verb) || ',"slug":' || coalesce(storm_queue.json_str(p_slug), 'null')
        || ',"code":' || storm_queue.json_str(p_code) || ',"message":' || storm_queue.json_str(p_message)
        || ',"authorised":' || CASE WHEN p_authorised THEN 'true' ELSE 'false' END
        || storm_queue.carried(p_reason, p_key, p_fingerprint)], false, 1, p_key, p_fingerprint, p_ask);
    RETURN jsonb_build_object('outcome', 'refused', 'code', p_code, 'message', p_message, 'line', v_lines[1]);
END
$$;

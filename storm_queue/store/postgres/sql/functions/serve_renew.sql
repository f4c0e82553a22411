-- renew (core/runs.py plan_renew): extend the live lease on p_slug held
-- under p_token by p_ttl (NULL: the TTL it was claimed or last renewed with,
-- else the declared one) from now, within max_lease_age of its claim; or
-- record why not.
CREATE OR REPLACE FUNCTION storm_queue.serve_renew(p_slug text, p_token numeric, p_ttl numeric, p_reason text, p_key text,
                                        p_lane text, p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    b record;
    s record;
    f record;
    r storm_queue.run;
    v_ttl numeric;
    v_limit double precision;
    v_expires text;
    v_lines text[];
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) IS DISTINCT FROM 0
       OR (p_ttl IS NOT NULL AND scale(p_ttl) IS DISTINCT FROM 0) THEN
        RAISE EXCEPTION 'a renew names its lane, and a token and TTL in whole numbers' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, p_token);
    SELECT * INTO b FROM storm_queue.serve_start('renew', p_slug, p_reason, p_key, p_lane, p_source,
        p_token || ', ' || coalesce(p_ttl::text, 'null'), s.code, s.message, p_ttl, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'renew', b.at, b.who);
    IF f.code IS NULL THEN
        v_ttl := coalesce(p_ttl, nullif(r.ttl, 0), (b.policy->>'ttl')::numeric);
        SELECT * INTO f FROM storm_queue.serve_ttl_refusal(b.policy, v_ttl);
    END IF;
    IF f.code IS NULL THEN
        v_limit := storm_queue.stamp_seconds(r.claimed) + (b.policy->>'max_lease_age')::bigint;
        IF b.t + v_ttl > v_limit THEN
            f.code := 'lease_age_exceeded';
            f.message := 'the lease on ' || p_slug || ' was claimed at ' || r.claimed || ' and may not be renewed past '
                || storm_queue.stamp(v_limit) || ' (storm.toml [runner] max_lease_age ' || (b.policy->>'max_lease_age')
                || ' s); finish the lane, or ask for a shorter TTL';
        END IF;
    END IF;
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(b.at, b.who, 'renew', p_slug, f.code, f.message, true, b.reason, b.key,
                                         b.fingerprint, p_ask);
    END IF;
    v_expires := storm_queue.stamp(b.t + v_ttl);
    v_lines := storm_queue.serve_append(b.at, b.who, ARRAY['renew'], ARRAY[
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"ttl":' || v_ttl
        || ',"expires":' || storm_queue.json_str(v_expires) || storm_queue.carried(b.reason, b.key, b.fingerprint)],
        true, 1, b.key, b.fingerprint, p_ask);
    UPDATE storm_queue.run SET expires = v_expires, ttl = v_ttl WHERE slug = p_slug;  -- folded: the live lease renewed
    RETURN jsonb_build_object('outcome', 'done', 'message',
        'renewed ' || p_slug || ' token ' || p_token || ' until ' || v_expires,
        'token', p_token, 'expires', v_expires, 'line', v_lines[1]);
END
$$;

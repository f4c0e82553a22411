-- core/runs.py _fence: why a runner's token does not hold the live lease on
-- the lane for p_by (not_holder: a runner role's, of a lease another
-- principal took; stale_fence, or lane_cancelled), or NULLs when it does.
CREATE OR REPLACE FUNCTION storm_queue.serve_fence(r storm_queue.run, p_slug text, p_token numeric, p_verb text, p_now text,
                                        p_by text, OUT code text, OUT message text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_why text;
BEGIN
    IF r.lease_token = p_token AND r.expires COLLATE "C" > p_now COLLATE "C" THEN
        IF p_by LIKE 'runner:%' AND r.lease_by IS DISTINCT FROM p_by THEN
            code := 'not_holder';
            message := 'the lease on ' || p_slug || ' (token ' || p_token || ') was taken by ' || r.lease_by || ', not '
                || p_by || ': a runner role may ' || p_verb || ' only a lease it took itself';
        END IF;
        RETURN;
    END IF;
    IF r.cancelled_at IS NOT NULL AND p_token = ANY (r.cancelled_tokens) THEN
        code := 'lane_cancelled';
        message := p_slug || ' was cancelled by ' || r.cancelled_by || ' at ' || r.cancelled_at
            || coalesce(' (' || nullif(r.cancelled_reason, '') || ')', '') || ', which revoked the lease of token '
            || p_token || '; a runner may not ' || p_verb || ' it: stop its work (the lane is settled abandoned)';
        RETURN;
    END IF;
    IF r.lease_token IS NULL THEN
        v_why := p_slug || ' holds no lease'
            || CASE WHEN coalesce(r.token, 0) <> 0 THEN ' (its last token was ' || r.token || ')' ELSE '' END;
    ELSIF r.lease_token <> p_token THEN
        v_why := 'token ' || p_token || ' is ' || CASE WHEN p_token < r.lease_token THEN 'older' ELSE 'newer' END
            || ' than the live lease''s token ' || r.lease_token || ' on ' || p_slug;
    ELSE
        v_why := 'the lease of token ' || p_token || ' on ' || p_slug || ' expired at ' || r.expires;
    END IF;
    code := 'stale_fence';
    message := v_why || '; a runner that lost its lease may not ' || p_verb || ' the lane: stop its work and claim again';
END
$$;

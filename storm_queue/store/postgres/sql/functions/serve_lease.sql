-- core/runs.py plan_claim's lease: the decided lane p_slug (p_issue)
-- leased to p_holder for p_ttl seconds at the storm's time p_t (p_at) under
-- the next fencing token above the storm's floor p_floor (lease), its claim
-- line appended by p_who with the request's reason, key and fingerprint
-- (the key bound to it) and folded at once (fold_claim, as fold_line folds
-- the line). The token, the lease's expiry and the line.
CREATE OR REPLACE FUNCTION storm_queue.serve_lease(p_slug text, p_issue text, p_holder text, p_ttl integer, p_floor bigint,
                                                   p_t double precision, p_at text, p_who text, p_reason text, p_key text,
                                                   p_fingerprint text, p_ask text,
                                                   OUT token bigint, OUT expires text, OUT line text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r storm_queue.run;
    v_attempt integer;
BEGIN
    SELECT * INTO r FROM storm_queue.run u WHERE u.slug = p_slug;
    SELECT x.token, x.attempt, x.expires INTO token, v_attempt, expires
    FROM storm_queue.lease(r.token, r.attempts, p_floor, p_t, p_ttl) x;
    line := (storm_queue.serve_append(p_at, p_who, ARRAY['claim'], ARRAY[
        ',"slug":' || storm_queue.json_str(p_slug) || ',"issue":' || storm_queue.json_str(p_issue)
        || ',"holder":' || storm_queue.json_str(p_holder) || ',"token":' || token || ',"ttl":' || p_ttl
        || ',"expires":' || storm_queue.json_str(expires) || ',"attempt":' || v_attempt
        || storm_queue.carried(p_reason, p_key, p_fingerprint)], true, 1, p_key, p_fingerprint, p_ask))[1];
    PERFORM storm_queue.fold_claim(p_slug, (SELECT s.seq FROM storm_queue.state s), token, p_holder, p_who, p_at,
                                   expires, p_ttl, v_attempt);
END
$$;

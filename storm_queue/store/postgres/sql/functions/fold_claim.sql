-- core/fold.py's fold of a claim line (Act "claim"), as fold_line folds it,
-- for a serving function that wrote the line itself: the lease (p_token to
-- p_holder, by the principal p_by, at p_at until p_expires, p_ttl), its
-- attempt, its token the lane's last; p_seq the line's, when the lane's
-- run is new (the fold's order of runs).
CREATE OR REPLACE FUNCTION storm_queue.fold_claim(p_slug text, p_seq bigint, p_token bigint, p_holder text, p_by text,
                                                  p_at text, p_expires text, p_ttl integer, p_attempt integer) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO storm_queue.run AS u (slug, since, token, holder, lease_token, lease_by, claimed, expires, ttl,
                                      attempts, last_token)
    VALUES (p_slug, p_seq, p_token, p_holder, p_token, p_by, p_at, p_expires, p_ttl, p_attempt, p_token)
    ON CONFLICT (slug) DO UPDATE SET token = greatest(u.token, EXCLUDED.token), holder = EXCLUDED.holder,
        lease_token = EXCLUDED.lease_token, lease_by = EXCLUDED.lease_by, claimed = EXCLUDED.claimed,
        expires = EXCLUDED.expires, ttl = EXCLUDED.ttl, attempts = EXCLUDED.attempts,
        last_token = EXCLUDED.last_token, last_end = NULL;
END
$$;

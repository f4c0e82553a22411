-- core/fold.py Fold._run: what a line folds into its lane's run (a row of
-- storm_queue.run, made at p_seq, its line, when the lane has none): a
-- claim's lease, attempt and token; the live lease renewed or ended
-- (fold_lease); a quarantine and its end (unpark: the attempts begin
-- again); a schedule; a hold (p_seq: its line) and its end.
CREATE OR REPLACE FUNCTION storm_queue.fold_run(e jsonb, p_seq bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_action text := e->>'action';
    v_token bigint := (e->>'token')::bigint;
    r storm_queue.run%ROWTYPE;
BEGIN
    SELECT * INTO r FROM storm_queue.run WHERE slug = e->>'slug';
    IF NOT FOUND THEN
        SELECT e->>'slug', p_seq, 0, 0, '{}' INTO r.slug, r.since, r.token, r.attempts, r.cancelled_tokens;
    END IF;
    CASE v_action
    WHEN 'claim' THEN
        r.token := greatest(r.token, v_token);
        r.holder := e->>'holder';
        r.lease_token := v_token;
        r.lease_by := e->>'by';
        r.claimed := e->>'at';
        r.expires := e->>'expires';
        r.ttl := (e->>'ttl')::integer;
        r.attempts := r.attempts + 1;
        r.last_token := v_token;
        r.last_end := NULL;
    WHEN 'renew', 'finish', 'expire', 'recover', 'release', 'cancel' THEN
        r := storm_queue.fold_lease(r, e);
    WHEN 'quarantine' THEN
        r.quarantined := e->>'at';
    WHEN 'unpark' THEN
        r.quarantined := NULL;
        r.attempts := 0;
    WHEN 'schedule' THEN
        r.not_before := e->>'not_before';
    WHEN 'hold' THEN
        SELECT p_seq, e->>'at', e->>'by', e->>'reason' INTO r.held_seq, r.held_at, r.held_by, r.held_reason;
    WHEN 'unhold' THEN
        SELECT NULL, NULL, NULL, NULL INTO r.held_seq, r.held_at, r.held_by, r.held_reason;
    END CASE;
    INSERT INTO storm_queue.run VALUES (r.*)
    ON CONFLICT (slug) DO UPDATE SET token = EXCLUDED.token, holder = EXCLUDED.holder,
        lease_token = EXCLUDED.lease_token, lease_by = EXCLUDED.lease_by, claimed = EXCLUDED.claimed,
        expires = EXCLUDED.expires, ttl = EXCLUDED.ttl, attempts = EXCLUDED.attempts,
        last_token = EXCLUDED.last_token, last_end = EXCLUDED.last_end, quarantined = EXCLUDED.quarantined,
        not_before = EXCLUDED.not_before, cancelled_at = EXCLUDED.cancelled_at, cancelled_by = EXCLUDED.cancelled_by,
        cancelled_reason = EXCLUDED.cancelled_reason, cancelled_tokens = EXCLUDED.cancelled_tokens,
        held_seq = EXCLUDED.held_seq, held_at = EXCLUDED.held_at, held_by = EXCLUDED.held_by,
        held_reason = EXCLUDED.held_reason;
END
$$;

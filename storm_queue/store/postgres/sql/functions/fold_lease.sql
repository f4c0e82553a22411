-- core/fold.py Fold._run, a renew or a lease's end (finish, expire,
-- recover, release, cancel) folded into the run r: the token it presents
-- raises the run's; a cancel that is not a no-op records who cancelled,
-- when and why; when it presents the live lease's token, a renew moves the
-- expiry and an end ends the lease and the attempt it began (its end:
-- the finish's result, expired, recovered, released, cancelled: a cancelled
-- token is kept); a failed finish's backoff schedules the lane. The run.
CREATE OR REPLACE FUNCTION storm_queue.fold_lease(r storm_queue.run, e jsonb) RETURNS storm_queue.run
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_action text := e->>'action';
    v_token bigint := (e->>'token')::bigint;
BEGIN
    r.token := greatest(r.token, v_token);
    IF v_action = 'cancel' AND coalesce(e->>'noop', '') = '' THEN
        SELECT e->>'at', e->>'by', e->>'reason' INTO r.cancelled_at, r.cancelled_by, r.cancelled_reason;
    END IF;
    IF r.lease_token = v_token AND v_action = 'renew' THEN
        r.expires := e->>'expires';
        r.ttl := (e->>'ttl')::integer;
    ELSIF r.lease_token = v_token THEN
        IF r.last_token = v_token AND r.last_end IS NULL THEN
            r.last_end := CASE v_action WHEN 'finish' THEN e->>'result' WHEN 'expire' THEN 'expired'
                          WHEN 'release' THEN 'released' WHEN 'cancel' THEN 'cancelled' ELSE 'recovered' END;
            IF v_action = 'cancel' THEN
                r.cancelled_tokens := r.cancelled_tokens || v_token;
            END IF;
        END IF;
        SELECT NULL, NULL, NULL, NULL, NULL, NULL INTO r.holder, r.lease_token, r.lease_by, r.claimed, r.expires, r.ttl;
    END IF;
    IF v_action = 'finish' AND e ? 'not_before' THEN  -- the storm's backoff after a failed attempt
        r.not_before := e->>'not_before';
    END IF;
    RETURN r;
END
$$;

-- The lines that end the live lease of r (p_action: finish, release) and
-- their fold (core/runs.py _ended): the line (its fields p_rest, then a
-- finish's backoff, then p_tail: the reason, key and fingerprint), then a
-- quarantine when it spent the lane's last attempt and the lane has not
-- finished (p_end not ok, neither settled nor with a result row); the lease
-- goes, the attempt ends (p_end). A failure that does not quarantine, under
-- p_backoff seconds (storm_queue.backoff: 0, none), carries not_before, the
-- lane's schedule (core/runs.py plan_finish). Returns the lines, whether it
-- quarantined, and the schedule it set.
CREATE OR REPLACE FUNCTION storm_queue.serve_ended(r storm_queue.run, p_at text, p_by text, p_action text, p_rest text, p_tail text,
                                        p_end text, p_budget bigint, p_backoff bigint, p_key text, p_fingerprint text,
                                        p_ask text, OUT lines text[], OUT parked boolean, OUT not_before text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_actions text[] := ARRAY[p_action];
    v_rests text[];
BEGIN
    parked := r.quarantined IS NULL AND r.attempts >= p_budget AND p_end <> 'ok'
        AND NOT EXISTS (SELECT 1 FROM storm_queue.settled WHERE slug = r.slug)
        AND NOT EXISTS (SELECT 1 FROM storm_queue.result WHERE slug = r.slug);
    IF NOT parked AND p_backoff > 0 THEN
        not_before := storm_queue.stamp(storm_queue.stamp_seconds(p_at) + p_backoff);
    END IF;
    v_rests := ARRAY[p_rest || coalesce(',"not_before":' || storm_queue.json_str(not_before), '') || p_tail];
    IF parked THEN
        v_actions := v_actions || 'quarantine'::text;
        v_rests := v_rests || (',"slug":' || storm_queue.json_str(r.slug) || ',"attempts":' || r.attempts
            || ',"budget":' || p_budget);
    END IF;
    lines := storm_queue.serve_append(p_at, p_by, v_actions, v_rests, true, 1, p_key, p_fingerprint, p_ask);
    -- its lines folded, as fold_line folds them: the live lease's attempt ends, the lease goes (and the
    -- quarantine, or the backoff's schedule)
    PERFORM set_config('storm_queue.folding', 'on', true);
    UPDATE storm_queue.run
    SET last_end = CASE WHEN last_token = r.lease_token AND last_end IS NULL THEN p_end ELSE last_end END,
        holder = NULL, lease_token = NULL, lease_by = NULL, claimed = NULL, expires = NULL, ttl = NULL,
        quarantined = CASE WHEN parked THEN p_at ELSE quarantined END,
        not_before = coalesce(serve_ended.not_before, run.not_before)
    WHERE slug = r.slug;
END
$$;

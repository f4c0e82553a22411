-- One line of the log folded into storm_queue.run, runs_at, priority,
-- waiver and keyed, as core/fold.py Fold.step folds it, reading the line's
-- checked jsonb (line_jsonb), never a pattern over its text: its key
-- (fold_keys), the priority lane's shift (fold_shift), then, unless it is a
-- no-op, what it changes of the storm (fold_storm: a waiver, an adopted
-- lane, a schedule given by a push or bump, a reset's floor, a halt and its
-- end) or of its lane's run (fold_run: the runner actions, a quarantine and
-- its end, a schedule, a hold and its end).
CREATE OR REPLACE FUNCTION storm_queue.fold_line(e jsonb, p_seq bigint, p_line bytea) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_action text := e->>'action';
BEGIN
    PERFORM storm_queue.fold_keys(e->>'by', e->>'key', e->>'fingerprint', p_seq, e->>'at', p_line);
    IF v_action IN ('push', 'bump', 'unbump', 'waive') THEN
        PERFORM storm_queue.fold_shift(e);
    END IF;
    IF v_action IN ('push', 'bump', 'unbump', 'waive', 'adopt', 'halt', 'resume', 'hold', 'unhold')
       AND coalesce(e->>'noop', '') <> '' THEN
        RETURN;
    ELSIF v_action IN ('push', 'bump', 'waive', 'adopt', 'reset', 'halt', 'resume') THEN
        PERFORM storm_queue.fold_storm(e, p_seq);
    ELSIF v_action IN ('claim', 'renew', 'finish', 'expire', 'recover', 'release', 'cancel', 'quarantine', 'unpark',
                       'schedule', 'hold', 'unhold') THEN
        PERFORM storm_queue.fold_run(e, p_seq);
    END IF;
END
$$;

-- Re-derive the tables the fold keeps from the log, line by line (the
-- operator's `storm-queue upgrade URL`, recorded, when the server no longer
-- decides by them): returns how many lines were folded.
CREATE OR REPLACE FUNCTION storm_queue.rederive() RETURNS bigint LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_line bytea;
    v_count bigint := 0;
BEGIN
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    PERFORM set_config('storm_queue.folding', 'on', true);
    DELETE FROM storm_queue.run;
    DELETE FROM storm_queue.watch;
    DELETE FROM storm_queue.priority;
    DELETE FROM storm_queue.waiver;
    DELETE FROM storm_queue.keyed;
    UPDATE storm_queue.runs_at SET token_floor = 0, halt_seq = NULL, halt_at = NULL, halt_by = NULL, halt_reason = NULL,
        open_from = -9223372036854775808, prio_from = -9223372036854775808, keys_day = '',
        later_until = NULL, open_back = NULL, prio_back = NULL;
    FOR v_seq, v_line IN SELECT e.seq, e.line FROM storm_queue.event e ORDER BY e.seq LOOP
        PERFORM storm_queue.fold_line(storm_queue.line_jsonb(v_line), v_seq, v_line);
        v_count := v_count + 1;
    END LOOP;
    UPDATE storm_queue.storm SET withdrawn = NULL;
    RETURN v_count;
END
$$;

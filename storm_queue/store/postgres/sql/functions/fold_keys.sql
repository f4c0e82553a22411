--
-- core/fold.py Fold.step's keys: the keys bound more than KEY_DAYS (7) days
-- before a line's day are forgotten at the first line of a later day (while
-- any is kept), then the line's key, if it has one, binds it (the first
-- line under a key does). Every fold below notes, for the rest of its
-- transaction, that the tables it writes are written by the fold
-- (storm_queue.folding: see derived_written).
CREATE OR REPLACE FUNCTION storm_queue.fold_keys(p_by text, p_key text, p_fingerprint text, p_seq bigint, p_at text, p_line bytea)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_day text := left(p_at, 10);
BEGIN
    PERFORM set_config('storm_queue.folding', 'on', true);
    IF v_day COLLATE "C" > (SELECT a.keys_day FROM storm_queue.runs_at a) COLLATE "C"
       AND EXISTS (SELECT 1 FROM storm_queue.keyed) THEN  -- (a day: the insert check holds every at to a stamp)
        DELETE FROM storm_queue.keyed k WHERE k.day COLLATE "C" < to_char(v_day::date - 7, 'YYYY-MM-DD') COLLATE "C";
        UPDATE storm_queue.runs_at SET keys_day = v_day;
    END IF;
    IF p_key IS NOT NULL THEN
        INSERT INTO storm_queue.keyed (by, key, fingerprint, seq, day, line)
        VALUES (p_by, p_key, coalesce(p_fingerprint, ''), p_seq, v_day, p_line)
        ON CONFLICT DO NOTHING;
    END IF;
END
$$;

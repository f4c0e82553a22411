-- The priority lane written (a bump's lanes joining its end, an unbump's
-- leaving it, a re-derivation): its mark (runs_at.prio_from) goes back to
-- its start, since a place may be given again after the mark. Its own
-- work, not the derived tables': the fold's flag is set for the write
-- alone, and a hand edit of the lane is still told (derived_written).
CREATE OR REPLACE FUNCTION storm_queue.priority_again() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_was text := current_setting('storm_queue.folding', true);
BEGIN
    PERFORM set_config('storm_queue.folding', 'on', true);
    UPDATE storm_queue.runs_at SET prio_from = -9223372036854775808 WHERE prio_from <> -9223372036854775808;
    PERFORM set_config('storm_queue.folding', coalesce(v_was, ''), true);
    RETURN NULL;
END
$$;

-- core/fold.py Fold.step, what a line that is not a no-op changes of the
-- storm as a whole (fold_line gives it these): a waiver and its end
-- (_waive), the lane an adopt takes over (_adopt), the schedule a push or
-- bump gives its lane (not_before), a reset's token floor, the operator's
-- halt (p_seq: its line) and its end.
CREATE OR REPLACE FUNCTION storm_queue.fold_storm(e jsonb, p_seq bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    CASE e->>'action'
    WHEN 'waive' THEN
        IF (e->'undo')::boolean THEN
            DELETE FROM storm_queue.waiver WHERE slug = e->>'slug' AND dep = e->>'dep';
        ELSE
            INSERT INTO storm_queue.waiver (slug, dep) VALUES (e->>'slug', e->>'dep') ON CONFLICT DO NOTHING;
        END IF;
    WHEN 'adopt' THEN
        DELETE FROM storm_queue.priority;
        INSERT INTO storm_queue.priority (slug, place)
        SELECT a.item->>'slug', a.n FROM jsonb_array_elements(e->'lane') WITH ORDINALITY AS a(item, n);
    WHEN 'push', 'bump' THEN
        IF e ? 'not_before' THEN
            INSERT INTO storm_queue.run (slug, since, not_before) VALUES (e->>'slug', p_seq, e->>'not_before')
            ON CONFLICT (slug) DO UPDATE SET not_before = EXCLUDED.not_before;
        END IF;
    WHEN 'reset' THEN
        UPDATE storm_queue.runs_at SET token_floor = greatest(token_floor, coalesce((e->>'abandons')::bigint, 0));
    WHEN 'halt' THEN
        UPDATE storm_queue.runs_at
        SET halt_seq = p_seq, halt_at = e->>'at', halt_by = e->>'by', halt_reason = e->>'reason';
    WHEN 'resume' THEN
        UPDATE storm_queue.runs_at SET halt_seq = NULL, halt_at = NULL, halt_by = NULL, halt_reason = NULL;
    END CASE;
END
$$;

-- core/resolver.py decided, its walk in run order: the priority lane
-- (walk_priority), then, when it named no lane, queue order from the mark
-- (walk_queue), up to the first lane ready at p_at; the lanes met before it
-- that are blocked on an abandoned dependency (and those dependencies,
-- space-separated). The mark (runs_at.open_from) moves past the lanes now
-- settled, finished, leased or quarantined, each passed over once, not at
-- every claim; it stops at a held lane (unhold moves no mark).
CREATE OR REPLACE FUNCTION storm_queue.decided(p_at text, OUT ready text, OUT issue text, OUT blocked text[], OUT gones text[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h storm_queue.runs_at;
    q record;
    v_open bigint;
BEGIN
    SELECT * INTO h FROM storm_queue.runs_at;
    SELECT * INTO ready, issue, blocked, gones FROM storm_queue.walk_priority(p_at);
    IF ready IS NULL THEN
        SELECT * INTO q FROM storm_queue.walk_queue(p_at, h.open_from);
        ready := q.ready;
        issue := q.issue;
        blocked := blocked || q.blocked;
        gones := gones || q.gones;
        v_open := q.open_mark;
    ELSE
        v_open := storm_queue.open_mark(h.open_from);
    END IF;
    IF v_open IS DISTINCT FROM h.open_from AND v_open IS NOT NULL THEN
        PERFORM set_config('storm_queue.folding', 'on', true);
        UPDATE storm_queue.runs_at SET open_from = v_open;
    END IF;
END
$$;

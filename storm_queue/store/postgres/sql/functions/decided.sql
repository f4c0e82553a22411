-- core/resolver.py decided, its walk in run order: the priority lane
-- (walk_priority) from its mark, then, when it named no lane, queue order
-- from the queue's mark (walk_queue), up to the first lane ready at p_at;
-- the lanes met before it that are blocked on an abandoned dependency (and
-- those dependencies, space-separated). The marks (runs_at.prio_from,
-- open_from) move past the lanes now settled, finished, leased,
-- quarantined or held, each passed over once, not at every claim (what
-- makes one of them claimable again moves them back: run_open, open_again,
-- priority_again).
CREATE OR REPLACE FUNCTION storm_queue.decided(p_at text, OUT ready text, OUT issue text, OUT blocked text[], OUT gones text[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h storm_queue.runs_at;
    q record;
    v_open bigint;
    v_prio bigint;
BEGIN
    SELECT * INTO h FROM storm_queue.runs_at;
    SELECT w.ready, w.issue, w.blocked, w.gones, w.mark INTO ready, issue, blocked, gones, v_prio
    FROM storm_queue.walk_priority(p_at, h.prio_from) w;
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
    v_open := coalesce(v_open, h.open_from);
    v_prio := coalesce(v_prio, h.prio_from);
    IF v_open <> h.open_from OR v_prio <> h.prio_from THEN
        PERFORM set_config('storm_queue.folding', 'on', true);
        UPDATE storm_queue.runs_at SET open_from = v_open, prio_from = v_prio;
    END IF;
END
$$;

-- core/resolver.py decided, its walk in run order: the priority lane
-- (walk_priority) from its mark, then, when it named no lane, queue order
-- from the queue's mark (walk_queue), up to the first lane ready at p_at;
-- the lanes met before it that are blocked on an abandoned dependency (and
-- those dependencies, space-separated). The marks (runs_at.prio_from,
-- open_from) move past the lanes now settled, finished, leased,
-- quarantined, held or scheduled later (naming no dependency), each passed
-- over once, not at every claim (what makes one of them claimable again
-- moves them back: run_open, open_again, priority_again; and at the
-- earliest time a lane passed for its schedule comes due, runs_at.later_until,
-- each mark goes back to the first lane it passed so, open_back and prio_back).
CREATE OR REPLACE FUNCTION storm_queue.decided(p_at text, OUT ready text, OUT issue text, OUT blocked text[], OUT gones text[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h storm_queue.runs_at;
    g storm_queue.runs_at;
    p record;
    q record;
BEGIN
    SELECT * INTO h FROM storm_queue.runs_at;
    g := h;
    IF p_at COLLATE "C" >= h.later_until COLLATE "C" THEN  -- a lane passed for its schedule is due: walk it again
        g.open_from := least(h.open_from, h.open_back);
        g.prio_from := least(h.prio_from, h.prio_back);
        g.later_until := NULL;
        g.open_back := NULL;
        g.prio_back := NULL;
    END IF;
    SELECT * INTO p FROM storm_queue.walk_priority(p_at, g.prio_from);
    ready := p.ready;
    issue := p.issue;
    blocked := p.blocked;
    gones := p.gones;
    g.prio_from := coalesce(p.mark, g.prio_from);
    g.later_until := least(g.later_until, p.later_until COLLATE "C");
    g.prio_back := least(g.prio_back, p.later_back);
    IF ready IS NULL THEN
        SELECT * INTO q FROM storm_queue.walk_queue(p_at, g.open_from);
        ready := q.ready;
        issue := q.issue;
        blocked := blocked || q.blocked;
        gones := gones || q.gones;
        g.open_from := coalesce(q.open_mark, g.open_from);
        g.later_until := least(g.later_until, q.later_until COLLATE "C");
        g.open_back := least(g.open_back, q.later_back);
    ELSE
        g.open_from := coalesce(storm_queue.open_mark(g.open_from), g.open_from);
    END IF;
    IF g IS DISTINCT FROM h THEN
        PERFORM set_config('storm_queue.folding', 'on', true);
        UPDATE storm_queue.runs_at SET open_from = g.open_from, prio_from = g.prio_from, later_until = g.later_until,
                                      open_back = g.open_back, prio_back = g.prio_back;
    END IF;
END
$$;

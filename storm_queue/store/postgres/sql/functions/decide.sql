-- core/resolver.py decide: the one decision line for the lanes in run
-- order, given as what the walk found: p_finished, the finished lanes in
-- run order; p_ready and p_issue, the first ready lane (NULL: none);
-- p_pending, whether any lane is left that is neither settled nor ready.
-- While halted: halted. Finished lanes while attended: review them. Else
-- run the ready lane; else wait (naming the finished) while any lane is
-- left; else empty.
CREATE OR REPLACE FUNCTION storm_queue.decide(p_finished text[], p_ready text, p_issue text, p_pending boolean,
                                              p_unattended boolean, p_halted boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN CASE WHEN p_halted THEN 'halted'
                    WHEN cardinality(p_finished) > 0 AND NOT p_unattended
                        THEN 'review ' || array_to_string(p_finished, ' ')
                    WHEN p_ready IS NOT NULL THEN 'run ' || p_ready || ' ' || p_issue
                    WHEN cardinality(p_finished) > 0 OR p_pending THEN array_to_string('{wait}'::text[] || p_finished, ' ')
                    ELSE 'empty' END;
END
$$;

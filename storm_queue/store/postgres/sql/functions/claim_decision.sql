-- core/runs.py plan_claim's decision, on the storm after its expiries
-- (expiries): core/resolver.py decide on the walk's first ready lane
-- p_ready (p_issue; decided) and the finished lanes in run order (read only
-- when the decision may name them), p_halted: the operator's halt in force;
-- a run decision becomes wait, naming the finished lanes, when every one of
-- p_policy's slots is held (_all_held: the lanes holding a live lease). The
-- caller leases the lane a run decision names (serve_lease).
CREATE OR REPLACE FUNCTION storm_queue.claim_decision(p_ready text, p_issue text, p_policy jsonb, p_halted boolean)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_unattended boolean := (p_policy->>'unattended')::boolean;
    v_full boolean := (SELECT count(*) FROM storm_queue.watch WHERE lease_token IS NOT NULL)
                      >= (p_policy->>'slots')::bigint;
    v_finished text[];
    v_decision text;
BEGIN
    IF NOT v_unattended OR p_ready IS NULL OR v_full THEN
        v_finished := storm_queue.finished_in_run_order();
    END IF;
    v_decision := storm_queue.decide(v_finished, p_ready, p_issue,
        p_ready IS NULL AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE storm_queue.lane_sound(l.slug, l.issue, l.deps)
                                    AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug)),
        v_unattended, p_halted);
    IF v_decision LIKE 'run %' AND v_full THEN
        RETURN array_to_string('{wait}'::text[] || v_finished, ' ');
    END IF;
    RETURN v_decision;
END
$$;

-- The seconds a lane whose p_attempts-th attempt (since its last unpark)
-- just failed waits before it is claimed again, as core/runs.py backoff:
-- retry_delay doubled for each attempt before it (at most 30 doublings:
-- past any retry_max), at most retry_max; 0 when retry_delay is 0.
CREATE OR REPLACE FUNCTION storm_queue.backoff(p_policy jsonb, p_attempts integer) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN CASE WHEN coalesce((p_policy->>'retry_delay')::bigint, 0) <= 0 THEN 0::bigint
                    ELSE least(coalesce((p_policy->>'retry_max')::bigint, 600),
                               (p_policy->>'retry_delay')::bigint << least(greatest(p_attempts - 1, 0), 30))
               END;
END
$$;

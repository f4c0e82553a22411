-- core/runs.py lease: the lease a claim takes on a lane whose run holds
-- p_token (its last fencing token) and p_attempts, under the storm's token
-- floor p_floor, at the POSIX time p_t for p_ttl seconds: the next token,
-- the attempt it begins and when it expires (clock.stamp).
CREATE OR REPLACE FUNCTION storm_queue.lease(p_token bigint, p_attempts integer, p_floor bigint, p_t double precision,
                                             p_ttl integer, OUT token bigint, OUT attempt integer, OUT expires text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN  -- (plpgsql, whose plan a session keeps: an SQL function of a record is planned again at each call)
    SELECT greatest(coalesce(p_token, 0), p_floor) + 1, coalesce(p_attempts, 0) + 1, storm_queue.stamp(p_t + p_ttl)
    INTO token, attempt, expires;
END
$$;

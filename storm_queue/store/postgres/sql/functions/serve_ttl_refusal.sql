-- core/runs.py ttl_refusal: the code and words refusing a TTL outside the
-- declared window, or NULLs.
CREATE OR REPLACE FUNCTION storm_queue.serve_ttl_refusal(p_runner jsonb, p_ttl numeric, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT p_ttl BETWEEN (p_runner->>'ttl_min')::bigint AND (p_runner->>'ttl_max')::bigint THEN
        code := 'lease_ttl_out_of_range';
        message := 'a lease TTL of ' || p_ttl || ' s is outside storm.toml [runner] ttl_min..ttl_max ('
            || (p_runner->>'ttl_min') || '..' || (p_runner->>'ttl_max') || ' s); ask for a TTL in that range';
    ELSIF p_ttl > (p_runner->>'max_lease_age')::bigint THEN
        code := 'lease_age_exceeded';
        message := 'a lease TTL of ' || p_ttl || ' s is longer than storm.toml [runner] max_lease_age ('
            || (p_runner->>'max_lease_age') || ' s); ask for a shorter TTL';
    END IF;
END
$$;

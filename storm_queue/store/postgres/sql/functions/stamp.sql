-- The stamp of the POSIX time p_t, as core/clock.stamp makes it (UTC,
-- microseconds rounded half to even, as Python's round and float8's round).
CREATE OR REPLACE FUNCTION storm_queue.stamp(p_t double precision) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN to_char(to_timestamp(floor(p_t) + (round((p_t - floor(p_t)) * 1000000.0::double precision) = 1000000)::integer)
                       AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
            || '.' || lpad((round((p_t - floor(p_t)) * 1000000.0::double precision)::bigint % 1000000)::text, 6, '0') || 'Z';
END
$$;

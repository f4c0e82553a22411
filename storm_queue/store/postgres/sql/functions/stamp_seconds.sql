-- The POSIX time of a stamp, as core/clock.seconds gives it (the whole
-- microseconds over a million, as one correctly rounded division).
CREATE OR REPLACE FUNCTION storm_queue.stamp_seconds(p_stamp text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (extract(epoch FROM (p_stamp::timestamptz)) * 1000000)::bigint::double precision / 1000000.0::double precision;
END
$$;

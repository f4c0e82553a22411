-- The storm's time now, in POSIX seconds (core/clock.stamp's argument):
-- the server's clock, moved as storm_queue.clock says.
CREATE OR REPLACE FUNCTION storm_queue.clock_now() RETURNS double precision LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN extract(epoch FROM coalesce((SELECT coalesce(c.fixed, clock_timestamp() + c.ahead) FROM storm_queue.clock c),
                                       clock_timestamp()))::double precision;
END
$$;

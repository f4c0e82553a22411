-- A table the fold keeps written other than by a fold (the flag a fold sets
-- for its transaction is not set: a hand edit, as the operator or a
-- superuser) no longer speaks for the log: the server stops deciding by it
-- (storm.withdrawn says why) until an upgrade re-derives it (rederive).
CREATE OR REPLACE FUNCTION storm_queue.derived_written() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('storm_queue.folding', true) IS DISTINCT FROM 'on' THEN
        UPDATE storm_queue.storm
        SET withdrawn = coalesce(withdrawn, 'storm_queue.' || TG_TABLE_NAME || ' was written other than by the fold ('
                                            || TG_OP || ' by role ' || session_user || ')');
    END IF;
    RETURN NULL;
END
$$;

-- history changes only by appending, even for the operator
CREATE OR REPLACE FUNCTION storm_queue.append_only() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'storm_queue.event is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- A line of the log edited or deleted (only a session that disabled
-- event_append_only can): the server no longer decides by what it folded
CREATE OR REPLACE FUNCTION storm_queue.event_edited() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE storm_queue.storm
    SET withdrawn = coalesce(withdrawn, 'a line of the log was edited or deleted (' || TG_OP || ' by role ' || session_user || ')');
    RETURN NULL;
END
$$;

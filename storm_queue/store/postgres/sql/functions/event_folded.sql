CREATE OR REPLACE FUNCTION storm_queue.event_folded() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM storm_queue.fold_line(storm_queue.line_jsonb(NEW.line), NEW.seq, NEW.line);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION storm_queue.row_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    IF TG_OP = 'DELETE' OR TG_OP = 'TRUNCATE' OR (TG_OP = 'UPDATE' AND NEW.slug <> OLD.slug) THEN
        UPDATE storm_queue.state SET rows_gone = rows_gone + 1;
    END IF;
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        NEW.ver := nextval('storm_queue.row_ver'::regclass);
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;

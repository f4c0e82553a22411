-- Keep storm_queue.watch the run rows a claim must look at: a row is there,
-- as storm_queue.run holds it, exactly while it holds a lease, carries a
-- schedule, or ended its last attempt other than ok and is not quarantined.
CREATE OR REPLACE FUNCTION storm_queue.run_watched() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM storm_queue.watch;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.slug IS DISTINCT FROM NEW.slug) THEN
        DELETE FROM storm_queue.watch WHERE slug = OLD.slug;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN NULL;
    END IF;
    IF NEW.lease_token IS NOT NULL OR NEW.not_before IS NOT NULL
       OR (NEW.quarantined IS NULL AND NEW.attempts > 0 AND NEW.last_end IS DISTINCT FROM 'ok') THEN
        INSERT INTO storm_queue.watch (slug, since, lease_token, expires, quarantined, attempts, last_end, not_before)
        VALUES (NEW.slug, NEW.since, NEW.lease_token, NEW.expires, NEW.quarantined, NEW.attempts, NEW.last_end,
                NEW.not_before)
        ON CONFLICT (slug) DO UPDATE SET since = EXCLUDED.since, lease_token = EXCLUDED.lease_token,
            expires = EXCLUDED.expires, quarantined = EXCLUDED.quarantined, attempts = EXCLUDED.attempts,
            last_end = EXCLUDED.last_end, not_before = EXCLUDED.not_before;
    ELSIF TG_OP = 'UPDATE' THEN
        DELETE FROM storm_queue.watch WHERE slug = NEW.slug;
    END IF;
    RETURN NULL;
END
$$;

-- Version 17, from version 16: the priority lane's mark. A claim walked
-- the whole priority lane at every request, passing over each lane
-- finished (awaiting review), settled, leased or quarantined again: with
-- 1,400 such lanes bumped, a runner's finish --then-claim took 15 ms where
-- the first took 2. runs_at.prio_from is the place before which every
-- lane of the priority lane is one of those or held; a claim moves it on,
-- and a lane made claimable again (its lease ended, its quarantine or its
-- hold lifted, its result or settlement gone) or any write of the priority
-- lane moves it back. walk_priority takes the mark and gives the new one.
-- The queue's mark (open_from) passes held lanes too, and a hold ending
-- moves it back (run_open's trigger): one lane held at the head of the
-- queue made every claim walk every lane finished after it. (A storm made
-- at version 17 and told it is older, as tests do, has the column and the
-- trigger already: they are made again.)
SET LOCAL search_path = pg_catalog, pg_temp;
ALTER TABLE storm_queue.runs_at ADD COLUMN IF NOT EXISTS prio_from bigint NOT NULL DEFAULT -9223372036854775808;
DROP FUNCTION IF EXISTS storm_queue.walk_priority(text);
UPDATE storm_queue.version SET version = 17;

-- {functions}

-- a hold ending moves the marks back to its lane, as a lease ending does
DROP TRIGGER IF EXISTS run_open ON storm_queue.run;
CREATE TRIGGER run_open AFTER UPDATE ON storm_queue.run FOR EACH ROW
    WHEN ((NEW.lease_token IS NULL AND NEW.quarantined IS NULL AND (OLD.lease_token IS NOT NULL OR OLD.quarantined IS NOT NULL))
          OR (OLD.held_seq IS NOT NULL AND NEW.held_seq IS NULL) OR OLD.slug IS DISTINCT FROM NEW.slug)
    EXECUTE FUNCTION storm_queue.run_open();

-- the priority lane's mark moved back to its start by any write of it
DROP TRIGGER IF EXISTS priority_open ON storm_queue.priority;
CREATE TRIGGER priority_open AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.priority
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.priority_again();

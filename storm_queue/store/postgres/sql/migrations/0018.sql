-- Version 18, from version 17: the marks pass lanes scheduled later. One
-- lane scheduled for tomorrow at the head of the queue stopped the claim's
-- mark there, so every claim walked every lane finished after it: a
-- runner's finish --then-claim took 4 ms a lane at first and 15 ms after
-- 1,400 lanes. A lane scheduled after the claim's time that names no
-- dependency can be neither ready nor blocked; both marks now pass it,
-- runs_at.later_until keeps the earliest time a lane so passed is
-- scheduled, and at that time each mark goes back to the first lane it
-- passed so (open_back, prio_back). A schedule changed moves the marks
-- back to its lane (run_open's trigger). The functions a runner may call,
-- and announce_change, fix standard_conforming_strings for their call,
-- and take a token or TTL of NaN or Infinity for what no client asks.
-- (A storm made at version 18 and told it is older, as tests do, has the
-- columns and the trigger already: they are made again.)
SET LOCAL search_path = pg_catalog, pg_temp;
ALTER TABLE storm_queue.runs_at ADD COLUMN IF NOT EXISTS later_until text;
ALTER TABLE storm_queue.runs_at ADD COLUMN IF NOT EXISTS open_back bigint;
ALTER TABLE storm_queue.runs_at ADD COLUMN IF NOT EXISTS prio_back bigint;
UPDATE storm_queue.version SET version = 18;

-- {functions}

-- a schedule changed moves the marks back to its lane, as a lease ending does
DROP TRIGGER IF EXISTS run_open ON storm_queue.run;
CREATE TRIGGER run_open AFTER UPDATE ON storm_queue.run FOR EACH ROW
    WHEN ((NEW.lease_token IS NULL AND NEW.quarantined IS NULL AND (OLD.lease_token IS NOT NULL OR OLD.quarantined IS NOT NULL))
          OR (OLD.held_seq IS NOT NULL AND NEW.held_seq IS NULL) OR OLD.slug IS DISTINCT FROM NEW.slug
          OR OLD.not_before IS DISTINCT FROM NEW.not_before)
    EXECUTE FUNCTION storm_queue.run_open();

-- what the fold keeps of the log (the runs and their holds, the priority
-- lane and its mark, the waivers, the keys), folded from its lines as a
-- new storm folds each one written: the tree's fold_line writes every
-- column the migrations before made, so it runs here, after the last
-- table change (a storm from version 0 is folded for the first time; one
-- at 9 or 10 never recorded a hold, whose requests were refused there, and
-- one at 9 to 16 is folded again to the same rows)
SELECT storm_queue.rederive();

-- Version 12, from version 11: a runner finishes a lane and claims the next
-- in one request (issue 32, item 1: finish --then-claim), served by
-- functions/serve_finish_claim.sql; the upgrade grants it to every runner
-- role of the storm (store/postgres/version.py migrate). No table changes.
UPDATE storm_queue.version SET version = 12;

-- what the fold keeps of the log (the runs and their holds, the priority
-- lane, the waivers, the keys), folded from its lines as a new storm folds
-- each one written: the tree's fold_line writes every column the
-- migrations before made, so it runs here, after the last table change (a
-- storm from version 0 is folded for the first time; one at 9 or 10 never
-- recorded a hold, whose requests were refused there, and one at 9 to 11
-- is folded again to the same rows)
SELECT storm_queue.rederive();

-- Version 12, from version 11: a runner finishes a lane and claims the next
-- in one request (issue 32, item 1: finish --then-claim), served by
-- functions/serve_finish_claim.sql; the upgrade grants it to every runner
-- role of the storm (store/postgres/version.py migrate). No table changes.
UPDATE storm_queue.version SET version = 12;


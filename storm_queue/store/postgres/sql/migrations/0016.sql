-- Version 16, from version 15: a request of many lines commits in time
-- linear in its lines. No table or data changes. announce_change, fired at
-- commit for each line, asked of each whether a later line of its
-- transaction is a claim (reading each later line): an `add --from` of
-- 20,000 lanes took ten minutes to commit. It now returns at once when its
-- transaction has sent its one notice; this version number tells a storm
-- at 15 to take the tree's function.
UPDATE storm_queue.version SET version = 16;

-- {functions}

-- what the fold keeps of the log (the runs and their holds, the priority
-- lane, the waivers, the keys), folded from its lines as a new storm folds
-- each one written: the tree's fold_line writes every column the
-- migrations before made, so it runs here, after the last table change (a
-- storm from version 0 is folded for the first time; one at 9 or 10 never
-- recorded a hold, whose requests were refused there, and one at 9
-- to 15 is folded again to the same rows)
SELECT storm_queue.rederive();

-- Version 16, from version 15: a request of many lines commits in time
-- linear in its lines. No table or data changes. announce_change, fired at
-- commit for each line, asked of each whether a later line of its
-- transaction is a claim (reading each later line): an `add --from` of
-- 20,000 lanes took ten minutes to commit. It now returns at once when its
-- transaction has sent its one notice; this version number tells a storm
-- at 15 to take the tree's function.
UPDATE storm_queue.version SET version = 16;

-- {functions}

-- Version 10, from version 9: the server's code in one home (issue 31). No
-- table or data changes: every server function is now one file of
-- sql/functions/, each with a fixed search_path, applied again by this
-- upgrade (as by every upgrade), and a function the tree no longer defines
-- is dropped (queries.sql stale_functions). A storm at version 9 holds the
-- functions of migrations 0005 to 0009 as they were; this version number
-- tells it to take the tree's.
UPDATE storm_queue.version SET version = 10;

-- Version 14, from version 13: the server's work under the storm's lock cut
-- (issue 32, item 5): the small helpers are plpgsql (planned once a
-- session, where an SQL function under a fixed search_path is parsed and
-- planned at every call), the insert check reads a line's
-- fields in one query, and the head and the asked tokens are found by
-- their indexes whatever plan a session keeps; a line is announced when
-- its transaction commits (event_announced deferred), and not when that
-- transaction's claim left every slot held. No table changes: the
-- tree's functions are applied here, before the fold is re-derived by them.
SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE storm_queue.version SET version = 14;

DROP TRIGGER IF EXISTS event_announced ON storm_queue.event;
CREATE CONSTRAINT TRIGGER event_announced AFTER INSERT ON storm_queue.event DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();

-- {functions}

-- what the fold keeps of the log (the runs and their holds, the priority
-- lane, the waivers, the keys), folded from its lines as a new storm folds
-- each one written: the tree's fold_line writes every column the
-- migrations before made, so it runs here, after the last table change (a
-- storm from version 0 is folded for the first time; one at 9 or 10 never
-- recorded a hold, whose requests were refused there, and one at 9 to 12
-- is folded again to the same rows)
SELECT storm_queue.rederive();

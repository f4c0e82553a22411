-- Version 14, from version 13: the server's work under the storm's lock cut
-- (issue 32, item 5): the small helpers are plpgsql (planned once a
-- session, where an SQL function under a fixed search_path is parsed and
-- planned at every call), the insert check reads a line's
-- fields in one query, and the head and the asked tokens are found by
-- their indexes whatever plan a session keeps; a line is announced when
-- its transaction commits (event_announced deferred), and not when that
-- transaction's claim left every slot held. No table changes: the
-- tree's functions are applied here (the fold is re-derived by the last migration).
SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE storm_queue.version SET version = 14;

DROP TRIGGER IF EXISTS event_announced ON storm_queue.event;
CREATE CONSTRAINT TRIGGER event_announced AFTER INSERT ON storm_queue.event DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();

-- {functions}

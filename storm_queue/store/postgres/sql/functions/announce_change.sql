-- Version 3: a change to the storm is announced (issue 21, item 4). A
-- change to the state row (which every append moves to the log's new head)
-- or to a lane, settled or result row notifies the channel storm_queue;
-- the server delivers it when the writing transaction commits (once a
-- transaction), and never for one rolled back. A claim that waits for work
-- (claim --wait) LISTENs on that channel rather than polls. The triggers
-- fire for every writer: the operator's requests, a runner's through
-- runner_append, a hand-made row. (The state row rather than the event
-- table: nothing here locks the log's table, which an upgrade appends to.)
CREATE OR REPLACE FUNCTION storm_queue.announce_change()
RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('storm_queue', '');
    RETURN NULL;
END
$$;

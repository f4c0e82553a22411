-- Version 13, from version 12: a change is announced only when it may let a
-- lane be claimed, or end a lease (issue 32, item 2), and its notice is
-- signed (functions/announce_change.sql): the table of the notices (the
-- last number sent and the storm's key, random, made here), readable by
-- the roles already granted runner or reader; a line announces by its own trigger (the state row
-- no longer does: a renew moved it), and a result row only when updated
-- or deleted. Run again over its own result, it changes nothing.
CREATE TABLE IF NOT EXISTS storm_queue.notice (
    id integer PRIMARY KEY CHECK (id = 1),
    sent bigint NOT NULL DEFAULT 0,
    key bytea NOT NULL
);
INSERT INTO storm_queue.notice (id, key)
VALUES (1, decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))
ON CONFLICT DO NOTHING;

-- the roles that read the storm's tables (a runner's and a reader's grant gave them
-- every one), granted in the order they were granted the state table, as a grant
-- after this version grants them
DO $$
DECLARE
    v_role name;
BEGIN
    FOR v_role IN SELECT r.rolname
                  FROM pg_catalog.pg_class c, aclexplode(c.relacl) WITH ORDINALITY AS a, pg_catalog.pg_roles r
                  WHERE c.oid = 'storm_queue.state'::regclass AND a.privilege_type = 'SELECT'
                    AND a.grantee = r.oid AND a.grantee <> c.relowner
                  ORDER BY a.ordinality LOOP
        EXECUTE format('GRANT SELECT ON storm_queue.notice TO %I', v_role);
    END LOOP;
END
$$;

DROP TRIGGER IF EXISTS state_announced ON storm_queue.state;
DROP TRIGGER IF EXISTS result_announced ON storm_queue.result;
DROP TRIGGER IF EXISTS event_announced ON storm_queue.event;
CREATE TRIGGER event_announced AFTER INSERT ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER result_announced AFTER UPDATE OR DELETE ON storm_queue.result
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();

UPDATE storm_queue.version SET version = 13;


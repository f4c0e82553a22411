-- A storm in PostgreSQL: one storm per database, everything in the schema
-- storm_queue, owned by the role that ran `storm-queue init URL` (the
-- operator). Nothing outside this schema is touched.
--
-- This is the schema as it was first made (version 0: storm-queue at
-- 5cbddde and before). migrations/0001.sql, 0002.sql, ... carry it to each
-- later version; a new storm is made by this file and every migration in
-- turn (queries.schema), so a new storm and an upgraded one are the same.

CREATE SCHEMA storm_queue;
REVOKE ALL ON SCHEMA storm_queue FROM PUBLIC;

-- the storm itself: who operates it and its declaration (storm.toml's text)
CREATE TABLE storm_queue.storm (
    id integer PRIMARY KEY CHECK (id = 1),
    operator text NOT NULL,
    created text NOT NULL,
    declaration text,
    declaration_sha256 text
);

-- the lanes, as queue.txt holds them on a directory storm; pos is their order
CREATE TABLE storm_queue.lane (
    slug text PRIMARY KEY,
    issue text NOT NULL,
    deps text[] NOT NULL DEFAULT '{}',
    pos bigserial UNIQUE,
    ver bigint NOT NULL DEFAULT 0
);

-- the settled ledgers (integrated.txt and abandoned.txt)
CREATE TABLE storm_queue.settled (
    slug text PRIMARY KEY,
    ledger text NOT NULL CHECK (ledger IN ('integrated', 'abandoned')),
    at text NOT NULL,
    ver bigint NOT NULL DEFAULT 0
);

-- what result.json says on a directory storm: a finished lane, or next's blocked mark
CREATE TABLE storm_queue.result (
    slug text PRIMARY KEY,
    body jsonb NOT NULL,
    ver bigint NOT NULL DEFAULT 0
);

-- the priority log: every line as the directory storm's priority.log holds it
CREATE TABLE storm_queue.event (
    seq bigint PRIMARY KEY,
    line bytea NOT NULL
);

-- the head of the log (seq, and the digest of its last line), moved by
-- every request; and the lane state the log folds to at line body_seq
-- (body_digest: that line's digest), rewritten once the head is 32 lines
-- past it: a command reads the body and folds the few lines after it,
-- never a replay of the log
CREATE TABLE storm_queue.state (
    id integer PRIMARY KEY CHECK (id = 1),
    seq bigint NOT NULL,
    digest text,
    body text NOT NULL,
    body_seq bigint NOT NULL,
    body_digest text,
    rows_gone bigint NOT NULL DEFAULT 0,
    CHECK (body_seq <= seq)
);

-- every change to a lane, settled or result row takes the storm's advisory
-- lock (so changes commit in the order of their ver, whoever makes them,
-- a request or a hand edit) and a new ver; a long-lived storm object reads
-- only the rows whose ver is past the last it saw. A row deleted, or its
-- slug changed, counts in state.rows_gone, and then every row is read again.
-- The lock's two keys are written once, in the statement lock_storm of
-- queries.sql: the mark lock_keys in braces below is filled in from there
-- when the schema is loaded (queries.schema).
CREATE SEQUENCE storm_queue.row_ver;
CREATE FUNCTION storm_queue.row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({lock_keys});
    IF TG_OP = 'DELETE' OR TG_OP = 'TRUNCATE' OR (TG_OP = 'UPDATE' AND NEW.slug <> OLD.slug) THEN
        UPDATE storm_queue.state SET rows_gone = rows_gone + 1;
    END IF;
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        NEW.ver := nextval('storm_queue.row_ver');
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER lane_ver BEFORE INSERT OR UPDATE OR DELETE ON storm_queue.lane
    FOR EACH ROW EXECUTE FUNCTION storm_queue.row_changed();
CREATE TRIGGER settled_ver BEFORE INSERT OR UPDATE OR DELETE ON storm_queue.settled
    FOR EACH ROW EXECUTE FUNCTION storm_queue.row_changed();
CREATE TRIGGER result_ver BEFORE INSERT OR UPDATE OR DELETE ON storm_queue.result
    FOR EACH ROW EXECUTE FUNCTION storm_queue.row_changed();
CREATE TRIGGER lane_gone AFTER TRUNCATE ON storm_queue.lane
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.row_changed();
CREATE TRIGGER settled_gone AFTER TRUNCATE ON storm_queue.settled
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.row_changed();
CREATE TRIGGER result_gone AFTER TRUNCATE ON storm_queue.result
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.row_changed();
CREATE INDEX lane_by_ver ON storm_queue.lane (ver);
CREATE INDEX settled_by_ver ON storm_queue.settled (ver);
CREATE INDEX result_by_ver ON storm_queue.result (ver);

-- history changes only by appending, even for the operator
CREATE FUNCTION storm_queue.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'storm_queue.event is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER event_append_only BEFORE UPDATE OR DELETE ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.append_only();
CREATE TRIGGER event_no_truncate BEFORE TRUNCATE ON storm_queue.event
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.append_only();

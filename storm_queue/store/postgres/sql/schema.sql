-- A storm in PostgreSQL, as `storm-queue init URL` makes it: one storm per
-- database, everything in the schema storm_queue, owned by the role that ran
-- init (the operator). Nothing outside this schema is touched.
--
-- This file is the CURRENT schema (tables, indexes, triggers, grants, the
-- rows every storm starts with): a new storm is made by it alone, never by
-- replaying the migrations. The server's functions are code, not state: one
-- file each in functions/, applied where the mark in braces below says
-- (queries.schema), and re-applied by every upgrade. migrations/NNNN.sql
-- carry an older storm's tables and data to this file's; a test holds a new
-- storm's catalog equal to upgraded ones' (tests/database/test_sql_home.py).
--
-- Every name is schema-qualified, and the script binds what it creates with
-- the search_path only pg_catalog (a function with an SQL-standard body is
-- bound when it is created, by OID).
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE SCHEMA storm_queue;
REVOKE ALL ON SCHEMA storm_queue FROM PUBLIC;

-- the version of this schema (the number of the last migration, filled in by queries.schema)
CREATE TABLE storm_queue.version (
    id integer PRIMARY KEY CHECK (id = 1),
    version integer NOT NULL
);
INSERT INTO storm_queue.version (id, version) VALUES (1, {schema_version});

-- the storm itself: who operates it and its declaration (storm.toml's text);
-- runner: the declaration's [runner] policy as JSON (core/config.Policy),
-- written by the Python that parsed it, and runner_for the sha256 of the
-- declaration text it was parsed from (NULL for none); withdrawn: why the
-- server no longer decides by its folded tables (NULL: it does): a table the
-- fold keeps written otherwise (by hand), a line of the log edited. A
-- runner's request is then answered "the order is unknown" (exit 3), the
-- operator's takes the Python path, until `storm-queue upgrade URL`
-- re-derives the tables from the log (storm_queue.rederive).
CREATE TABLE storm_queue.storm (
    id integer PRIMARY KEY CHECK (id = 1),
    operator text NOT NULL,
    created text NOT NULL,
    declaration text,
    declaration_sha256 text,
    runner jsonb,
    runner_for text,
    withdrawn text
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

-- the priority log: every line as the directory storm's priority.log holds it;
-- folded: written by a serving function that folded it itself (event_folded passes it over)
CREATE TABLE storm_queue.event (
    seq bigint PRIMARY KEY,
    line bytea NOT NULL,
    folded boolean NOT NULL DEFAULT false
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

-- every change to a lane, settled or result row takes the storm's lock (so
-- changes commit in the order of their ver, whoever makes them, a request or
-- a hand edit) and a new ver; a long-lived storm object reads only the rows
-- whose ver is past the last it saw. A row deleted, or its slug changed,
-- counts in state.rows_gone, and then every row is read again (row_changed).
CREATE SEQUENCE storm_queue.row_ver;
CREATE INDEX lane_by_ver ON storm_queue.lane (ver);
CREATE INDEX settled_by_ver ON storm_queue.settled (ver);
CREATE INDEX result_by_ver ON storm_queue.result (ver);

-- the notices of a change (functions/announce_change.sql): the number of the
-- last one sent, and the storm's key its payload is signed with, random,
-- made with the storm; its members read it (a waiter checks a notice by it)
CREATE TABLE storm_queue.notice (
    id integer PRIMARY KEY CHECK (id = 1),
    sent bigint NOT NULL DEFAULT 0,
    key bytea NOT NULL
);
INSERT INTO storm_queue.notice (id, key)
VALUES (1, decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- the roles the operator granted, and as what (storm-queue grant runner|reader ROLE)
CREATE TABLE storm_queue.member (
    role text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('runner', 'reader')),
    PRIMARY KEY (role, kind)
);

-- what runners have done with each lane, as core/fold.py folds the log's
-- lines into a Run (its history kept as the last attempt's token and end),
-- folded by the trigger below from every line any writer inserts
CREATE TABLE storm_queue.run (
    slug text PRIMARY KEY,
    since bigint NOT NULL,  -- the line that first named the lane: the fold's order of runs
    token bigint NOT NULL DEFAULT 0,
    holder text,
    lease_token bigint,
    lease_by text,
    claimed text,
    expires text,
    ttl integer,
    attempts integer NOT NULL DEFAULT 0,
    last_token bigint,
    last_end text,
    quarantined text,
    not_before text,
    -- the cancel that settled the lane abandoned (its time, principal, reason), and the tokens of the leases it revoked
    cancelled_at text,
    cancelled_by text,
    cancelled_reason text,
    cancelled_tokens bigint[] NOT NULL DEFAULT '{}',
    -- the hold in force (its line's seq, time, principal, reason; held_seq NULL: not held): never claimed while held
    held_seq bigint,
    held_at text,
    held_by text,
    held_reason text
);

-- what the fold keeps of the whole storm for runners: the token floor (a
-- reset's), and the operator's halt in force (its line's seq, time, principal
-- and reason; halt_seq NULL: none)
CREATE TABLE storm_queue.runs_at (
    id integer PRIMARY KEY CHECK (id = 1),
    token_floor bigint NOT NULL DEFAULT 0,
    halt_seq bigint,
    halt_at text,
    halt_by text,
    halt_reason text,
    -- every lane of the queue before this pos is settled, finished, leased, quarantined or held (a claim passes
    -- them over): moved on by claims, back by a row that makes a lane before it none of these
    open_from bigint NOT NULL DEFAULT -9223372036854775808,
    -- the day the idempotency keys were last forgotten (keyed)
    keys_day text NOT NULL DEFAULT '',
    -- every lane of the priority lane before this place is settled, finished, leased, quarantined or held (a
    -- claim passes them over): moved on by claims, back by a row that makes one of them none of these, or any write
    -- of priority
    prio_from bigint NOT NULL DEFAULT -9223372036854775808,
    -- the marks pass a lane scheduled later that names no dependency, until the earliest time one they passed is
    -- scheduled (NULL: they passed none); then each goes back to the first it passed (its position, its place)
    later_until text,
    open_back bigint,
    prio_back bigint
);
INSERT INTO storm_queue.runs_at (id) VALUES (1);

-- the priority lane as the log replays it (core/fold.py LaneState.lane):
-- each slug's place, in the order the lanes entered it
CREATE TABLE storm_queue.priority (
    slug text PRIMARY KEY,
    place bigint NOT NULL UNIQUE
);

-- the live waivers (LaneState.waivers): the lane, and the dependency it may run without
CREATE TABLE storm_queue.waiver (
    slug text NOT NULL,
    dep text NOT NULL,
    PRIMARY KEY (slug, dep)
);

-- a copy of the run rows that hold a lease, carry a schedule, or ended an
-- attempt other than ok without being quarantined (run_watched keeps it,
-- whoever writes storm_queue.run): the rows a claim's expiries, its next
-- moment and its slot count can name, so a claim never reads every run row
CREATE TABLE storm_queue.watch (
    slug text PRIMARY KEY,
    since bigint NOT NULL,
    lease_token bigint,
    expires text,
    quarantined text,
    attempts integer NOT NULL,
    last_end text,
    not_before text
);

-- == The storm's lock =====================================================
--
-- Every writer holds LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE to the
-- end of its transaction (queries.sql lock_storm, the row trigger, the
-- serving functions). It replaces the advisory lock of versions 1 to 8,
-- which any role that could connect could take (pg_advisory_lock is
-- PUBLIC) and so stop every write. This mode needs UPDATE, DELETE or
-- TRUNCATE on the table, which only its owner, the operator, holds: a
-- reader's or a runner's SELECT takes only ACCESS SHARE, which does not
-- conflict with it. pg_locks shows its holder (doctor names it).
CREATE TABLE storm_queue.lock (id integer PRIMARY KEY CHECK (id = 1));
INSERT INTO storm_queue.lock (id) VALUES (1);

-- the catch-up's own lock (served.catch_up: one process at a time rewrites
-- the state row's body), taken NOWAIT in the same mode for the same reason
CREATE TABLE storm_queue.catch_up (id integer PRIMARY KEY CHECK (id = 1));
INSERT INTO storm_queue.catch_up (id) VALUES (1);

-- == The server's clock ===================================================
--
-- Every runner request is timed by the server's clock (clock_timestamp(),
-- read once the storm's lock is held), never by a time its caller passes:
-- expiries, max_lease_age and schedules are judged on it. For tests, the
-- storm's clock may run ahead of the server's by ``ahead`` (a test moves it
-- as it moves its own process's clock), or stand still at ``fixed`` (two
-- storms held to the same time, byte for byte): a table only its owner,
-- the operator, may write (no role granted runner or reader reads it);
-- doctor warns while it is not the server's.
CREATE TABLE storm_queue.clock (
    id integer PRIMARY KEY CHECK (id = 1),
    ahead interval NOT NULL DEFAULT '0 seconds',
    fixed timestamptz
);
INSERT INTO storm_queue.clock (id) VALUES (1);

-- the idempotency keys in force, as core/fold.py keeps them (LaneState.keys):
-- the first line each principal made under each key, its fingerprint, and
-- the day of its line (a key is forgotten KEY_DAYS after, at the log's
-- first line of a later day: runs_at.keys_day is the day that last happened)
CREATE TABLE storm_queue.keyed (
    by text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    seq bigint NOT NULL,
    day text NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (by, key)
);
-- the code points Python's str.isprintable calls not printable (core/names.escape
-- writes them as escapes): ranges lo..hi from U+0080 on, written by the Python
-- that made or upgraded the storm, from its own Unicode tables (unicode.py)
CREATE TABLE storm_queue.unprintable (
    lo integer PRIMARY KEY,
    hi integer NOT NULL
);

-- what each served request that wrote lines was asked as (a token its client
-- drew) and the seq of its last line, kept for an hour: a client whose
-- connection broke during the call asks here whether its lines were written
CREATE TABLE storm_queue.asked (
    ask text PRIMARY KEY,
    seq bigint NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX asked_by_at ON storm_queue.asked (at);

-- the fields of each action, as core/framing.py's SCHEMA, OPTIONAL, OPTIONAL_OF
-- and NAMED name them (need: required, optional; named: its values must be
-- names), for the check every inserted line passes (line_refusal); a test holds
-- this table to framing.py's
CREATE TABLE storm_queue.line_field (
    action text NOT NULL,
    field text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('str', 'int', 'bool', 'list', 'str?', 'int?', 'object', 'lane rows')),
    need text NOT NULL CHECK (need IN ('required', 'optional')),
    named boolean NOT NULL DEFAULT false,
    PRIMARY KEY (action, field)
);
INSERT INTO storm_queue.line_field (action, field, kind, need, named) VALUES
    ('*', 'v', 'int', 'required', false), ('*', 'seq', 'int', 'required', false), ('*', 'at', 'str', 'required', false),
    ('*', 'action', 'str', 'required', false), ('*', 'by', 'str', 'required', false),
    ('*', 'reason', 'str', 'optional', false), ('*', 'noop', 'str', 'optional', false),
    ('*', 'key', 'str', 'optional', false), ('*', 'fingerprint', 'str', 'optional', false),
    ('*', 'note', 'str', 'optional', false), ('*', 'not_before', 'str?', 'optional', false),
    ('*', 'carried', 'list', 'optional', false),
    ('push', 'slug', 'str', 'required', true), ('push', 'issue', 'str', 'required', false),
    ('push', 'deps', 'list', 'required', true), ('push', 'moved', 'list', 'required', true),
    ('push', 'removed', 'list', 'required', true), ('push', 'appended', 'bool', 'required', false),
    ('bump', 'slug', 'str', 'required', true), ('bump', 'issue', 'str', 'required', false),
    ('bump', 'deps', 'list', 'required', true), ('bump', 'moved', 'list', 'required', true),
    ('bump', 'removed', 'list', 'required', true),
    ('unbump', 'slug', 'str', 'required', true), ('unbump', 'moved', 'list', 'required', true),
    ('unbump', 'removed', 'list', 'required', true),
    ('refused', 'requested', 'str', 'required', false), ('refused', 'slug', 'str?', 'required', false),
    ('refused', 'code', 'str', 'required', false), ('refused', 'message', 'str', 'required', false),
    ('refused', 'authorised', 'bool', 'required', false),
    ('reset', 'reason', 'str', 'required', false), ('reset', 'abandons', 'int', 'required', false),
    ('reset', 'abandoned', 'str?', 'optional', false), ('reset', 'kept', 'int', 'optional', false),
    ('reset', 'kept_digest', 'str?', 'optional', false), ('reset', 'lost', 'int', 'optional', false),
    ('repair', 'torn', 'int', 'required', false), ('repair', 'side', 'str', 'required', false),
    ('claim', 'slug', 'str', 'required', true), ('claim', 'issue', 'str', 'required', false),
    ('claim', 'holder', 'str', 'required', true), ('claim', 'token', 'int', 'required', false),
    ('claim', 'ttl', 'int', 'required', false), ('claim', 'expires', 'str', 'required', false),
    ('claim', 'attempt', 'int', 'required', false),
    ('renew', 'slug', 'str', 'required', true), ('renew', 'token', 'int', 'required', false),
    ('renew', 'ttl', 'int', 'required', false), ('renew', 'expires', 'str', 'required', false),
    ('finish', 'slug', 'str', 'required', true), ('finish', 'token', 'int', 'required', false),
    ('finish', 'result', 'str', 'required', false),
    ('expire', 'slug', 'str', 'required', true), ('expire', 'token', 'int', 'required', false),
    ('expire', 'expired', 'str', 'required', false),
    ('recover', 'slug', 'str', 'required', true), ('recover', 'token', 'int?', 'required', false),
    ('recover', 'marker', 'bool', 'required', false), ('recover', 'force', 'bool', 'optional', false),
    ('quarantine', 'slug', 'str', 'required', true), ('quarantine', 'attempts', 'int', 'required', false),
    ('quarantine', 'budget', 'int', 'required', false),
    ('unpark', 'slug', 'str', 'required', true), ('unpark', 'reason', 'str', 'required', false),
    ('schedule', 'slug', 'str', 'required', true), ('schedule', 'not_before', 'str?', 'required', false),
    ('init', 'storm', 'str', 'required', false), ('init', 'operator', 'str', 'required', false),
    ('declare', 'sha256', 'str', 'required', false), ('declare', 'declaration', 'object', 'required', false),
    ('add', 'slug', 'str', 'required', true), ('add', 'issue', 'str', 'required', false),
    ('add', 'deps', 'list', 'required', true), ('add', 'appended', 'bool', 'required', false),
    ('settle', 'slug', 'str', 'required', true), ('settle', 'ledger', 'str', 'required', false),
    ('migrate', 'to', 'str', 'required', false),
    ('adopt', 'name', 'str?', 'required', false), ('adopt', 'kept', 'str?', 'required', false),
    ('adopt', 'sha256', 'str?', 'required', false), ('adopt', 'bytes', 'int?', 'required', false),
    ('adopt', 'lines', 'int?', 'required', false), ('adopt', 'lane', 'lane rows', 'required', false),
    ('waive', 'slug', 'str', 'required', true), ('waive', 'dep', 'str', 'required', true),
    ('waive', 'undo', 'bool', 'required', false), ('waive', 'moved', 'list', 'required', true),
    ('waive', 'removed', 'list', 'required', true),
    ('halt', 'reason', 'str', 'required', false),
    ('resume', 'reason', 'str', 'required', false),
    ('upgrade', 'from', 'int', 'required', false), ('upgrade', 'to', 'int', 'required', false),
    ('upgrade', 'rederived', 'int', 'optional', false),
    ('grant', 'kind', 'str', 'required', false), ('grant', 'role', 'str', 'required', false),
    ('revoke', 'kind', 'str', 'required', false), ('revoke', 'role', 'str', 'required', false),
    ('release', 'slug', 'str', 'required', true), ('release', 'token', 'int', 'required', false),
    ('release', 'holder', 'str', 'required', true),
    ('cancel', 'slug', 'str', 'required', true), ('cancel', 'token', 'int?', 'required', false),
    ('hold', 'slug', 'str', 'required', true), ('hold', 'reason', 'str', 'required', false),
    ('unhold', 'slug', 'str', 'required', true), ('unhold', 'reason', 'str', 'required', false);

-- line_field compiled, one row an action (functions/line_checks.sql), for the
-- insert check's quick yes to a plain line (line_admitted); filled once the
-- functions are applied, below
CREATE TABLE storm_queue.line_check (
    action text PRIMARY KEY,
    test jsonpath NOT NULL,
    named text[] NOT NULL
);

-- == EXECUTE: nothing for PUBLIC ==========================================
--
-- A function is executable by PUBLIC unless revoked; a runner or reader
-- role holds USAGE on the schema, so it could call every helper and
-- trigger function directly. None is: the functions the operator creates
-- in this database are not PUBLIC's (ALTER DEFAULT PRIVILEGES ... IN SCHEMA
-- can only add to the global default, never take PUBLIC's EXECUTE away: the
-- default is the operator's in this database), and init and upgrade revoke
-- it again once the functions are applied (queries.sql revoke_public_execute).
-- A runner role is granted EXECUTE on its own serving functions alone
-- (queries.sql grant_runner_functions).
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- == The server's functions ===============================================
-- {functions}
INSERT INTO storm_queue.line_check (action, test, named) SELECT * FROM storm_queue.line_checks();

-- == Triggers ==============================================================
--
-- history changes only by appending, even for the operator; every line
-- inserted is checked (event_well_formed: a runner's line never reaches the
-- log but through a serving function) and folded (event_folded), unless its
-- writer folded it itself
CREATE TRIGGER event_append_only BEFORE UPDATE OR DELETE ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.append_only();
CREATE TRIGGER event_no_truncate BEFORE TRUNCATE ON storm_queue.event
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.append_only();
CREATE TRIGGER event_well_formed BEFORE INSERT ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.event_well_formed();
CREATE TRIGGER event_folded AFTER INSERT ON storm_queue.event
    FOR EACH ROW WHEN (NOT NEW.folded) EXECUTE FUNCTION storm_queue.event_folded();
CREATE TRIGGER event_edited AFTER UPDATE OR DELETE ON storm_queue.event
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.event_edited();

-- a new ver for every changed lane, settled or result row (row_changed)
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

-- a change that may let a lane be claimed is announced on the channel storm_queue (claim --wait,
-- lease --wait and serve listen): a line of the log but a claim, a renew, a refusal or a no-op, when
-- its transaction commits unless that transaction's claim left every slot held, and a hand edit of
-- the rows (announce_change)
CREATE CONSTRAINT TRIGGER event_announced AFTER INSERT ON storm_queue.event DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER lane_announced AFTER INSERT OR UPDATE OR DELETE ON storm_queue.lane
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER settled_announced AFTER INSERT OR UPDATE OR DELETE ON storm_queue.settled
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER result_announced AFTER UPDATE OR DELETE ON storm_queue.result
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();

-- the claim's mark (runs_at.open_from) moved back by a row that makes a lane before it open again
CREATE TRIGGER settled_open AFTER UPDATE OR DELETE ON storm_queue.settled
    FOR EACH ROW EXECUTE FUNCTION storm_queue.open_again();
CREATE TRIGGER result_open AFTER UPDATE OR DELETE ON storm_queue.result
    FOR EACH ROW EXECUTE FUNCTION storm_queue.open_again();
CREATE TRIGGER lane_open AFTER INSERT OR UPDATE ON storm_queue.lane
    FOR EACH ROW EXECUTE FUNCTION storm_queue.open_again();
CREATE TRIGGER settled_open_all AFTER TRUNCATE ON storm_queue.settled
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.open_again();
CREATE TRIGGER result_open_all AFTER TRUNCATE ON storm_queue.result
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.open_again();

-- the priority lane's mark (runs_at.prio_from) moved back to its start by any write of it
CREATE TRIGGER priority_open AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.priority
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.priority_again();

CREATE TRIGGER run_open AFTER UPDATE ON storm_queue.run FOR EACH ROW
    WHEN ((NEW.lease_token IS NULL AND NEW.quarantined IS NULL AND (OLD.lease_token IS NOT NULL OR OLD.quarantined IS NOT NULL))
          OR (OLD.held_seq IS NOT NULL AND NEW.held_seq IS NULL) OR OLD.slug IS DISTINCT FROM NEW.slug
          OR OLD.not_before IS DISTINCT FROM NEW.not_before)
    EXECUTE FUNCTION storm_queue.run_open();
CREATE TRIGGER run_open_gone AFTER DELETE ON storm_queue.run
    FOR EACH ROW EXECUTE FUNCTION storm_queue.run_open();
CREATE TRIGGER run_open_all AFTER TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.run_open();

-- the rows a claim watches, kept from storm_queue.run
CREATE TRIGGER run_watched AFTER INSERT OR UPDATE OR DELETE ON storm_queue.run
    FOR EACH ROW EXECUTE FUNCTION storm_queue.run_watched();
CREATE TRIGGER run_watched_all AFTER TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.run_watched();

-- a table the fold keeps, written other than by a fold, no longer speaks for the log (derived_written)
CREATE TRIGGER run_derived AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.derived_written();
CREATE TRIGGER runs_at_derived AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.runs_at
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.derived_written();
CREATE TRIGGER priority_derived AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.priority
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.derived_written();
CREATE TRIGGER waiver_derived AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.waiver
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.derived_written();
CREATE TRIGGER watch_derived AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.watch
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.derived_written();
CREATE TRIGGER keyed_derived AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON storm_queue.keyed
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.derived_written();

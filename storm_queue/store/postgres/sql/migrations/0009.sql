-- Version 9, from version 0 (the schema storm-queue at 5cbddde and before
-- made, which records no version): the tables and data of unreleased
-- versions 1 to 9 in one step (squashed while nothing was released; a storm
-- at 1 to 8, made by a development build, is refused by upgrade). Tables and
-- data only: the server's functions are applied where the mark in braces
-- below says (sql/functions/, as a new storm has them), and the triggers
-- that call them are made after it. What each table is for: sql/schema.sql.
SET LOCAL search_path = pg_catalog, pg_temp;

CREATE TABLE storm_queue.version (
    id integer PRIMARY KEY CHECK (id = 1),
    version integer NOT NULL
);
INSERT INTO storm_queue.version (id, version) VALUES (1, 9);

ALTER TABLE storm_queue.storm ADD COLUMN runner jsonb, ADD COLUMN runner_for text, ADD COLUMN withdrawn text;
ALTER TABLE storm_queue.event ADD COLUMN folded boolean NOT NULL DEFAULT false;

CREATE TABLE storm_queue.member (
    role text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('runner', 'reader')),
    PRIMARY KEY (role, kind)
);

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
    cancelled_tokens bigint[] NOT NULL DEFAULT '{}'
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
    -- every lane of the queue before this pos is settled or has a result row (a claim passes them over):
    -- moved on by claims, back to 0 by a row that makes a lane before it neither
    open_from bigint NOT NULL DEFAULT -9223372036854775808,
    -- the day the idempotency keys were last forgotten (keyed)
    keys_day text NOT NULL DEFAULT ''
);
INSERT INTO storm_queue.runs_at (id) VALUES (1);

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

CREATE TABLE storm_queue.lock (id integer PRIMARY KEY CHECK (id = 1));
INSERT INTO storm_queue.lock (id) VALUES (1);

-- the catch-up's own lock (served.catch_up: one process at a time rewrites
-- the state row's body), taken NOWAIT in the same mode for the same reason
CREATE TABLE storm_queue.catch_up (id integer PRIMARY KEY CHECK (id = 1));
INSERT INTO storm_queue.catch_up (id) VALUES (1);

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
    ('cancel', 'slug', 'str', 'required', true), ('cancel', 'token', 'int?', 'required', false);

ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- (what the fold keeps of the log is folded by the last migration, 0011.sql,
-- once every table the tree's fold_line writes has its columns)

-- {functions}

CREATE TRIGGER event_well_formed BEFORE INSERT ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.event_well_formed();
CREATE TRIGGER event_folded AFTER INSERT ON storm_queue.event
    FOR EACH ROW WHEN (NOT NEW.folded) EXECUTE FUNCTION storm_queue.event_folded();
CREATE TRIGGER event_edited AFTER UPDATE OR DELETE ON storm_queue.event
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.event_edited();
CREATE TRIGGER state_announced AFTER INSERT OR UPDATE ON storm_queue.state
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER lane_announced AFTER INSERT OR UPDATE OR DELETE ON storm_queue.lane
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER settled_announced AFTER INSERT OR UPDATE OR DELETE ON storm_queue.settled
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();
CREATE TRIGGER result_announced AFTER INSERT OR UPDATE OR DELETE ON storm_queue.result
    FOR EACH ROW EXECUTE FUNCTION storm_queue.announce_change();

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

CREATE TRIGGER run_open AFTER UPDATE ON storm_queue.run FOR EACH ROW
    WHEN ((NEW.lease_token IS NULL AND NEW.quarantined IS NULL AND (OLD.lease_token IS NOT NULL OR OLD.quarantined IS NOT NULL))
          OR OLD.slug IS DISTINCT FROM NEW.slug)
    EXECUTE FUNCTION storm_queue.run_open();
CREATE TRIGGER run_open_gone AFTER DELETE ON storm_queue.run
    FOR EACH ROW EXECUTE FUNCTION storm_queue.run_open();
CREATE TRIGGER run_open_all AFTER TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.run_open();

CREATE TRIGGER run_watched AFTER INSERT OR UPDATE OR DELETE ON storm_queue.run
    FOR EACH ROW EXECUTE FUNCTION storm_queue.run_watched();
CREATE TRIGGER run_watched_all AFTER TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.run_watched();

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

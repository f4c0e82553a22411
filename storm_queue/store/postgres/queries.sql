-- Every statement a database storm runs, by name (the schema it runs them
-- against is sql/schema.sql). queries.py reads this file once, on first use,
-- and a caller runs a statement by its name: conn.execute(q("insert_events"),
-- ([seq], [line])).
--
-- The layout: a statement follows a header line that holds only its name,
-- between "-- " and " --":
--
--     -- insert_events --
--
-- and runs to the next header. Comment lines (a line that starts with --)
-- and a final semicolon are not part of the statement. Parameters are
-- libpq/'s (%s, %(name)s); a {} is a piece composed in with str.format
-- (a quoted identifier, a whole number), for what a parameter cannot be.


-- == connecting and init (create) ===========================================

-- lock_storm --
-- the storm's lock, held to the end of the transaction: every writer takes
-- it first (from schema version 9, sql/schema.sql: a lock only the
-- operator, who owns the table, may take; the row trigger and the serving
-- functions take the same)
LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;

-- lock_storm_advisory --
-- the storm's lock before schema version 9 (an advisory lock, held to the
-- end of the transaction), which an upgrade from an earlier version takes
-- and those versions' row trigger and functions took, its two int4 keys
-- ('stor', 'mq') filled in from here where their migrations say {lock_keys}
-- (written here and nowhere else)
SELECT pg_advisory_xact_lock(1937010546, 28017);

-- fix_search_path --
-- every connection's first statement: no name a statement runs resolves in a schema another role may
-- CREATE in (a function there with a closer match for its arguments than pg_catalog's would win), whatever
-- the role's or the server's search_path (doctor reports such a schema on it: a hand edit in psql uses it)
SET search_path = pg_catalog, pg_temp;

-- session_user --
-- the caller, as the server authenticated it
SELECT session_user;

-- session_user_and_database --
SELECT session_user, current_database();

-- storm_exists --
-- a row when the database already holds a storm (its schema)
SELECT 1
FROM pg_namespace
WHERE nspname = 'storm_queue';

-- insert_storm --
-- the storm row of a new storm: its operator and when it was made
INSERT INTO storm_queue.storm (id, operator, created)
VALUES (1, %s, %s);

-- insert_state --
-- the state row of a new storm, before its first line: its head, and the state the log folds to there
INSERT INTO storm_queue.state (id, seq, digest, body, body_seq, body_digest)
VALUES (1, %s, %s, %s, %s, %s);

-- insert_events --
-- lines of the log in one statement, their seqs and lines as two arrays in seq order (a request's, init's first, a
-- batch migrate carries): the insert check (sql/functions/line_refusal.sql event_well_formed) refuses a line that is
-- not the head's next, well-formed, and moves the head to it, line by line
INSERT INTO storm_queue.event (seq, line)
SELECT x.seq, x.line FROM unnest(%s::bigint[], %s::bytea[]) WITH ORDINALITY AS x (seq, line, n)
ORDER BY x.n;

-- write_head --
-- a new storm's state row, once its lines are in: the head (as the insert check moved it, from schema
-- version 9), and the state the log folds to there as the body
UPDATE storm_queue.state
SET seq = %s, digest = %s, body = %s, body_seq = %s, body_digest = %s;

-- fill_unprintable --
-- the code points Python does not call printable (unicode.py), for the server's quoting of outside text
INSERT INTO storm_queue.unprintable (lo, hi)
SELECT * FROM unnest(%s::integer[], %s::integer[]);


-- == the request path =======================================================

-- set_lock_timeout --
-- how long this transaction waits for a lock, in milliseconds (composed:
-- SET takes no parameter)
SET LOCAL lock_timeout = {};

-- repeatable_read --
-- the current transaction reads one snapshot (and may take a lock)
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;

-- read_only_snapshot --
-- the current transaction reads one snapshot and writes nothing
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- read_head --
-- the log's head, the line the state row's body folds to, and how many rows went
SELECT seq, digest, body_seq, body_digest, rows_gone
FROM storm_queue.state;

-- move_head --
-- the log's new head (seq, and the digest of its last line), on a schema before version 9 (from it, each
-- line's insert check moves it)
UPDATE storm_queue.state
SET seq = %s, digest = %s;

-- read_state_body --
SELECT body
FROM storm_queue.state;

-- lines_after --
-- the log's lines after line %s, at most %s of them
SELECT seq, line
FROM storm_queue.event
WHERE seq > %s
ORDER BY seq
LIMIT %s;

-- lines_between --
-- the log's lines after line %s up to line %s
SELECT seq, line
FROM storm_queue.event
WHERE seq > %s AND seq <= %s
ORDER BY seq;

-- read_created --
-- when the storm was made (or migrated here)
SELECT created
FROM storm_queue.storm;

-- read_declaration --
-- the declaration's text, and the operator
SELECT declaration, operator
FROM storm_queue.storm;

-- read_operator --
SELECT operator
FROM storm_queue.storm;

-- read_declaration_sha256 --
SELECT declaration_sha256
FROM storm_queue.storm;

-- write_declaration --
-- what declare records: the file's text and its sha256
UPDATE storm_queue.storm
SET declaration = %s, declaration_sha256 = %s;

-- read_line --
-- one line of the log (whether a request whose connection broke committed)
SELECT line
FROM storm_queue.event
WHERE seq = %s;


-- == the lane, settled and result rows ======================================

-- rows_changed --
-- every lane, settled and result row whose ver is past %(v)s, by ver: a
-- lane's slug, issue, deps and pos; a settled row's slug and ledger; a
-- result's slug and the token a finish wrote there when it is a whole
-- number (jsonb keeps numbers as numerics: 1e0 is 1), as text, so no JSON
-- is parsed for it
SELECT 'l', slug, issue, deps, pos, ver
FROM storm_queue.lane
WHERE ver > %(v)s
UNION ALL
SELECT 's', slug, ledger, NULL, NULL, ver
FROM storm_queue.settled
WHERE ver > %(v)s
UNION ALL
SELECT 'r', slug, CASE WHEN jsonb_typeof(body -> 'token') = 'number' THEN body ->> 'token' END, NULL, NULL, ver
FROM storm_queue.result
WHERE ver > %(v)s
ORDER BY 6;

-- insert_lanes --
-- lanes in one statement, their slugs, issues and dependencies (each a JSON array of names) as three arrays in
-- queue.txt order (a lane's pos is its place)
INSERT INTO storm_queue.lane (slug, issue, deps)
SELECT x.slug, x.issue, ARRAY(SELECT jsonb_array_elements_text(x.deps))
FROM unnest(%s::text[], %s::text[], %s::jsonb[]) WITH ORDINALITY AS x (slug, issue, deps, n)
ORDER BY x.n;

-- insert_settled --
-- a lane integrated or abandoned
INSERT INTO storm_queue.settled (slug, ledger, at)
VALUES (%s, %s, %s);

-- write_result --
-- a finished lane's result, over any result (or blocked mark) before it
INSERT INTO storm_queue.result (slug, body)
VALUES (%s, %s)
ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body;

-- mark_blocked --
-- next's blocked mark, unless the lane already has a result
INSERT INTO storm_queue.result (slug, body)
VALUES (%s, %s)
ON CONFLICT (slug) DO NOTHING;

-- read_result --
SELECT body
FROM storm_queue.result
WHERE slug = %s;

-- delete_result --
DELETE FROM storm_queue.result
WHERE slug = %s;


-- == the log, read whole (history, verify) ==================================

-- all_lines --
SELECT seq, line
FROM storm_queue.event
ORDER BY seq;

-- read_state --
-- the state row whole: the log's head, and the body with the line it folds to
SELECT seq, digest, body, body_seq, body_digest
FROM storm_queue.state;


-- == doctor =================================================================

-- storm_objects --
-- the storm's schema and every table and sequence in it, with owner and access list
SELECT 'storm_queue', 'schema', pg_get_userbyid(n.nspowner), n.nspacl::text[]
FROM pg_namespace n
WHERE n.nspname = 'storm_queue'
UNION ALL
SELECT 'storm_queue.' || c.relname, CASE c.relkind WHEN 'S' THEN 'sequence' ELSE 'table' END,
       pg_get_userbyid(c.relowner), c.relacl::text[]
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'storm_queue' AND c.relkind IN ('r', 'p', 'S')
ORDER BY 1;

-- object_privileges --
-- each (grantee, privilege) of an access list (grantee 0 is PUBLIC)
SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type
FROM aclexplode(%s::text[]::aclitem[]) a;

-- role_members --
-- the roles that are members of the role %s
SELECT m.rolname
FROM pg_auth_members am
JOIN pg_roles m ON m.oid = am.member
JOIN pg_roles r ON r.oid = am.roleid
WHERE r.rolname = %s
ORDER BY 1;

-- exposed_path --
-- each schema on the search_path this session started with (its role's, its database's or the server's;
-- fix_search_path then fixed its own) that a login role may CREATE in, with that role: neither a superuser
-- nor the operator (%s) or a member of its role (reported as such)
SELECT n.nspname, r.rolname
FROM unnest(string_to_array((SELECT s.reset_val FROM pg_catalog.pg_settings s WHERE s.name = 'search_path'), ','))
     WITH ORDINALITY AS p(item, i)
JOIN pg_catalog.pg_namespace n
  ON n.nspname = CASE WHEN btrim(p.item) IN ('$user', '"$user"') THEN session_user::text
                      ELSE btrim(btrim(p.item), '"') END
JOIN pg_catalog.pg_roles r
  ON r.rolcanlogin AND NOT r.rolsuper AND NOT pg_catalog.pg_has_role(r.rolname, %s, 'MEMBER')
 AND pg_catalog.has_schema_privilege(r.oid, n.oid, 'CREATE')
WHERE n.nspname <> 'pg_catalog'
ORDER BY p.i, r.rolname;

-- lock_holders --
-- the sessions (other than this one) holding the storm's lock: pid, role, virtual transaction, and the
-- seconds since their transaction began (NULL where this role may not see it)
SELECT l.pid, coalesce(a.usename::text, '?'), l.virtualtransaction,
       extract(epoch FROM clock_timestamp() - a.xact_start)::double precision
FROM pg_catalog.pg_locks l
LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'relation' AND l.granted AND l.mode = 'ExclusiveLock'
  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
  AND l.relation = 'storm_queue.lock'::regclass AND l.pid <> pg_backend_pid()
ORDER BY 1;

-- read_clock --
-- how far the storm's clock runs ahead of the server's (seconds), and the time it stands still at, if any
SELECT extract(epoch FROM ahead)::double precision, fixed::text
FROM storm_queue.clock;

-- function_executors --
-- each EXECUTE on a storm function held by PUBLIC or a role other than the operator, but a runner
-- role's on the functions a runner is granted (grant_runner_functions)
SELECT p.oid::regprocedure::text, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END
FROM pg_catalog.pg_proc p
CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
WHERE p.pronamespace = 'storm_queue'::regnamespace AND a.privilege_type = 'EXECUTE'
  AND a.grantee <> coalesce((SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = %s), 0)
  AND NOT (p.proname IN ('serve_claim', 'serve_renew', 'serve_finish', 'serve_finish_claim', 'serve_release',
                         'serve_recover', 'serve_decided')
           AND EXISTS (SELECT 1 FROM storm_queue.member m
                       WHERE m.kind = 'runner' AND m.role = pg_get_userbyid(a.grantee)))
ORDER BY 1, 2;

-- event_triggers --
-- the event table's own triggers: name, whether enabled, the function and its body
SELECT t.tgname, t.tgenabled, p.oid::regprocedure::text, p.prosrc
FROM pg_trigger t
JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = 'storm_queue.event'::regclass AND NOT t.tgisinternal;


-- == doctor's fixes =========================================================
-- What doctor tells the operator to run to mend a finding (store/postgres/
-- checkup.py); storm-queue never runs them. Each {name} is composed in with
-- str.format: an identifier or a number the server gave, as it gave it.

-- fix_owner --
ALTER {kind} {obj} OWNER TO {op};

-- fix_privilege --
REVOKE {privilege} ON {target} FROM {role};

-- fix_member --
REVOKE {op} FROM {member};

-- fix_execute --
REVOKE EXECUTE ON FUNCTION {function} FROM {role};

-- fix_create --
REVOKE CREATE ON SCHEMA {schema} FROM {roles};

-- fix_holder --
SELECT pg_terminate_backend({pid});

-- fix_clock --
UPDATE storm_queue.clock SET ahead = '0 seconds', fixed = NULL;


-- == migrate (with lock_storm, session_user, storm_exists, insert_event,
-- == insert_lane, insert_settled and insert_state above) ====================

-- insert_migrated_storm --
-- the storm row of a migrated storm: its operator, when, and its declaration
INSERT INTO storm_queue.storm (id, operator, created, declaration, declaration_sha256)
VALUES (1, %s, %s, %s, %s);

-- insert_result --
-- a lane's result as the directory's result.json held it
INSERT INTO storm_queue.result (slug, body)
VALUES (%s, %s);

-- == the schema's version (sql/migrations/NNNN.sql; a storm made before the
-- == schema recorded one has no version table: version 0) =================

-- read_schema_version --
-- the version of the storm's schema (UndefinedTable: version 0)
SELECT version FROM storm_queue.version;

-- functions_begin --
-- what the server's functions are applied after (queries.functions): their bodies are checked when
-- called, as pg_dump restores them, so they may call one another in any order
SET LOCAL check_function_bodies = off;

-- functions_reshaped --
-- the functions whose result (their OUT columns) an earlier version defined otherwise, dropped before the tree's
-- are applied, since CREATE OR REPLACE cannot change a result: walk_queue and walk_priority gained later_until
-- and later_back at version 18 (only decided calls them, and a plpgsql body finds what it calls when it runs)
DROP FUNCTION IF EXISTS storm_queue.walk_queue(text, bigint);
DROP FUNCTION IF EXISTS storm_queue.walk_priority(text, bigint);

-- functions_path --
-- the search_path an upgrade applies the server's functions under when no migration marks where
SET LOCAL search_path = pg_catalog, pg_temp;

-- drop_function --
-- one function stale_functions found, by the regprocedure text the server gave (quoted by it)
DROP FUNCTION {};

-- stale_functions --
-- the functions of the storm's schema the tree no longer defines (sql/functions/: one file, one
-- function, a name each), and every overload of a name it defines but the one just applied: an
-- upgrade drops them (a stale function a trigger still calls makes the upgrade fail, whole)
SELECT p.oid::regprocedure::text
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'storm_queue'::regnamespace
  AND (NOT p.proname = ANY (string_to_array(%s, ' '))
       OR (SELECT count(*) FROM pg_catalog.pg_proc o
           WHERE o.pronamespace = p.pronamespace AND o.proname = p.proname) > 1
          AND p.xmin <> pg_catalog.pg_current_xact_id()::xid)
ORDER BY 1;

-- revoke_public_execute --
-- no function of the storm is PUBLIC's (init and upgrade, once the functions are applied)
DO $$
DECLARE
    v_function regprocedure;
BEGIN
    FOR v_function IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                      WHERE p.pronamespace = 'storm_queue'::regnamespace LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_function);
    END LOOP;
END
$$;

-- == runner and reader roles ================================================

-- read_member --
-- as what the operator granted the session's role (none: a stranger)
SELECT kind FROM storm_queue.member WHERE role = session_user;

-- role_exists --
SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s;

-- is_member --
SELECT 1 FROM storm_queue.member WHERE role = %s AND kind = %s;

-- insert_member --
INSERT INTO storm_queue.member (role, kind) VALUES (%s, %s);

-- delete_member --
DELETE FROM storm_queue.member WHERE role = %s AND kind = %s;

-- grant_usage --
-- (each role statement is given its role as an identifier: {role})
GRANT USAGE ON SCHEMA storm_queue TO {role};

-- grant_select --
GRANT SELECT ON ALL TABLES IN SCHEMA storm_queue TO {role};

-- revoke_operators_tables --
-- the tables a runner or reader needs not read: the storm's lock and its clock (sql/schema.sql)
REVOKE ALL ON storm_queue.lock, storm_queue.catch_up, storm_queue.clock FROM {role};

-- set_role_setting --
-- a runner role's session default in this database (members.RUNNER_SETTINGS; needs CREATEROLE or a superuser)
ALTER ROLE {role} IN DATABASE {database} SET {setting} = {value};

-- reset_role_setting --
ALTER ROLE {role} IN DATABASE {database} RESET {setting};

-- runner_settings --
-- the session defaults of each runner role in this database (doctor: members.RUNNER_SETTINGS present)
SELECT m.role, coalesce(s.setconfig, '{}')
FROM storm_queue.member m
LEFT JOIN pg_catalog.pg_roles r ON r.rolname = m.role
LEFT JOIN pg_catalog.pg_db_role_setting s
       ON s.setrole = r.oid AND s.setdatabase = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
WHERE m.kind = 'runner'
ORDER BY 1;

-- reading_roles --
-- the roles that read the storm's tables (a runner's and a reader's grant gave them every one), in the order
-- they were granted the state table (an upgrade grants them the tables its migrations made, in that order)
SELECT r.rolname
FROM pg_catalog.pg_class c, aclexplode(c.relacl) WITH ORDINALITY AS a, pg_catalog.pg_roles r
WHERE c.oid = 'storm_queue.state'::regclass AND a.privilege_type = 'SELECT'
  AND a.grantee = r.oid AND a.grantee <> c.relowner
ORDER BY a.ordinality;

-- runner_roles --
-- the storm's runner roles (an upgrade grants each the serving functions of its tree)
SELECT role FROM storm_queue.member WHERE kind = 'runner' ORDER BY role;

-- grant_runner_functions --
-- a runner's serving functions, and no other (sql/functions/serve_*.sql)
GRANT EXECUTE ON FUNCTION storm_queue.serve_claim(text, text, numeric, text, text, text, text, integer, text),
storm_queue.serve_renew(text, numeric, numeric, text, text, text, text, integer, text),
storm_queue.serve_finish(text, numeric, text, text, text, text, text, text, integer, text),
storm_queue.serve_finish_claim(text, numeric, text, text, text, text, numeric, text, text, text, text, integer, text),
storm_queue.serve_release(text, numeric, text, text, text, text, integer, text),
storm_queue.serve_recover(text, boolean, text, text, text, text, integer, text),
storm_queue.serve_decided(integer)
TO {role};

-- revoke_runner_functions --
REVOKE EXECUTE ON FUNCTION storm_queue.serve_claim(text, text, numeric, text, text, text, text, integer, text),
storm_queue.serve_renew(text, numeric, numeric, text, text, text, text, integer, text),
storm_queue.serve_finish(text, numeric, text, text, text, text, text, text, integer, text),
storm_queue.serve_finish_claim(text, numeric, text, text, text, text, numeric, text, text, text, text, integer, text),
storm_queue.serve_release(text, numeric, text, text, text, text, integer, text),
storm_queue.serve_recover(text, boolean, text, text, text, text, integer, text),
storm_queue.serve_decided(integer)
FROM {role};

-- revoke_select --
REVOKE SELECT ON ALL TABLES IN SCHEMA storm_queue FROM {role};

-- revoke_usage --
REVOKE USAGE ON SCHEMA storm_queue FROM {role};


-- == waiting for a change (claim --wait) ====================================

-- read_notice --
-- the last notice's number and the key a notice is signed with (functions/announce_change.sql)
SELECT sent, key
FROM storm_queue.notice;

-- read_head_seq --
-- the log's head alone (a view's wait for every change reads it twice a second: store/postgres/changes.py)
SELECT seq
FROM storm_queue.state;

-- listen_changes --
-- hear of every commit that may let a lane be claimed or end a lease: sql/schema.sql's
-- announcing triggers notify this channel (one storm a database, so one channel)
LISTEN storm_queue;

-- == runner requests the server serves in one round trip (sql/functions/serve_*.sql)

-- write_runner_policy --
-- the declaration's [runner] policy as JSON (NULL: none the server may use),
-- for the declaration the storm row holds now (runner_for: the digest of
-- its text, which every served request compares with the text in force)
UPDATE storm_queue.storm
SET runner = %s, runner_for = encode(sha256(convert_to(declaration, 'UTF8')), 'hex');

-- serve_claim --
-- (each serve_ statement answers, beside the function's answer, how many lines the state row's body was
-- behind the head when the statement began; each ends with the request's key, the caller's STORM_QUEUE_LANE
-- (NULL: none), its --source, the lock wait (ms) and the client's token for the request (served.serve))
-- holder (NULL: the default, given next), the default holder, ttl (NULL: the declared one), reason
SELECT storm_queue.serve_claim(%s::text, %s::text, %s::numeric, %s::text, %s::text, %s::text, %s::text, %s::integer,
                               %s::text),
       (SELECT seq - body_seq FROM storm_queue.state);

-- serve_renew --
-- slug, token, ttl (NULL: the lease's own), reason
SELECT storm_queue.serve_renew(%s::text, %s::numeric, %s::numeric, %s::text, %s::text, %s::text, %s::text, %s::integer,
                               %s::text),
       (SELECT seq - body_seq FROM storm_queue.state);

-- serve_finish --
-- slug, token, result, note, reason
SELECT storm_queue.serve_finish(%s::text, %s::numeric, %s::text, %s::text, %s::text, %s::text, %s::text, %s::text,
                                %s::integer, %s::text),
       (SELECT seq - body_seq FROM storm_queue.state);

-- serve_finish_claim --
-- slug, token, result, note, the claim's holder (NULL: the default, given next), the default holder, its ttl
-- (NULL: the declared one), reason
SELECT storm_queue.serve_finish_claim(%s::text, %s::numeric, %s::text, %s::text, %s::text, %s::text, %s::numeric,
                                      %s::text, %s::text, %s::text, %s::text, %s::integer, %s::text),
       (SELECT seq - body_seq FROM storm_queue.state);

-- serve_release --
-- slug, token, reason
SELECT storm_queue.serve_release(%s::text, %s::numeric, %s::text, %s::text, %s::text, %s::text, %s::integer, %s::text),
       (SELECT seq - body_seq FROM storm_queue.state);

-- serve_recover --
-- slug (NULL: every orphaned lease), force, reason
SELECT storm_queue.serve_recover(%s::text, %s::boolean, %s::text, %s::text, %s::text, %s::text, %s::integer, %s::text),
       (SELECT seq - body_seq FROM storm_queue.state);

-- served_durably --
-- a serving statement ({call}: one of the above, its function's answer and the lag) committed without
-- waiting for the WAL flush, so that the storm's lock is free while the WAL is flushed, and made durable
-- before its answer is read, in the same round trip: the last statement writes a WAL record in a
-- transaction of its own (a transactional logical message, which no table keeps) and commits
-- synchronously, which flushes the WAL past the served commit (a transaction that wrote no WAL, even one
-- holding a transaction id, flushes nothing). A crash before that flush loses the request, unanswered
-- (docs/reliability.md)
SELECT set_config('synchronous_commit', 'off', true),
       set_config('storm_queue.served', json_build_array(served.answer, served.behind)::text, false)
FROM ({call}) AS served(answer, behind);
COMMIT;
SELECT (current_setting('storm_queue.served')::jsonb) -> 0, (current_setting('storm_queue.served')::jsonb ->> 1)::bigint,
       pg_logical_emit_message(true, 'storm_queue', '');

-- make_durable --
-- every commit before this one flushed to the WAL's disk: a WAL record written, committed synchronously
SELECT pg_logical_emit_message(true, 'storm_queue', '');

-- serve_decided --
-- next's blocked marks, computed and written by the server (a runner's next), the lock wait (ms)
SELECT storm_queue.serve_decided(%s::integer);

-- read_asked --
-- the last line a served request wrote, by the token it was asked as (its connection broke: was it written?)
SELECT seq FROM storm_queue.asked WHERE ask = %s;

-- backend_gone --
-- whether a server process has ended (a broken connection's: its transaction is over)
SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = %s);

-- try_catch_up --
-- the catch-up's own lock, held to the end of the transaction that reads and dumps the state, not waited
-- for: one process at a time rewrites the state row's body the served requests leave behind
-- (served.catch_up; a table only the operator may lock so: sql/schema.sql)
LOCK TABLE storm_queue.catch_up IN EXCLUSIVE MODE NOWAIT;

-- move_body --
-- the state the log folds to at a line as the state row's body: the body, the line's seq and digest
-- (the head stays where it is); nothing when the body is at that line or past it already
UPDATE storm_queue.state
SET body = %s, body_seq = %s, body_digest = %s
WHERE body_seq < %s;

-- read_runs --
-- the runs the server folded from the log (sql/functions/fold_line.sql)
SELECT slug, token, holder, lease_token, lease_by, claimed, expires, ttl, attempts, last_token, last_end,
       quarantined, not_before, cancelled_at, cancelled_by, cancelled_reason, cancelled_tokens,
       held_seq, held_at, held_by, held_reason
FROM storm_queue.run
ORDER BY since;

-- count_runs --
-- how many runs the server folded (served.catch_up_at: the state's size)
SELECT count(*) FROM storm_queue.run;

-- read_runs_at --
-- the token floor and the halt in force (its seq, time, principal, reason) the server folded from the log
SELECT token_floor, halt_seq, halt_at, halt_by, halt_reason
FROM storm_queue.runs_at;

-- read_priority --
-- the priority lane the server folded from the log, in its order
SELECT slug
FROM storm_queue.priority
ORDER BY place;

-- read_keys --
-- the idempotency keys the server folded from the log: principal, key, fingerprint, the line that bound it
SELECT by, key, fingerprint, seq
FROM storm_queue.keyed
ORDER BY by, key;

-- read_withdrawn --
-- why the server no longer decides by what it folded (NULL: it does; sql/schema.sql)
SELECT withdrawn FROM storm_queue.storm;

-- rederive --
-- the tables the server folds, folded again from the log (upgrade): how many lines
SELECT storm_queue.rederive();

-- read_waivers --
-- the live waivers the server folded from the log
SELECT slug, dep
FROM storm_queue.waiver
ORDER BY slug, dep;

-- watch_sound --
-- whether storm_queue.watch holds exactly the run rows a claim looks at (sql/functions/run_watched.sql): those that
-- hold a lease, carry a schedule, or ended an attempt other than ok and are not quarantined, as run holds them
SELECT NOT EXISTS (
    (SELECT slug, since, lease_token, expires, quarantined, attempts, last_end, not_before FROM storm_queue.run
     WHERE lease_token IS NOT NULL OR not_before IS NOT NULL
        OR (quarantined IS NULL AND attempts > 0 AND last_end IS DISTINCT FROM 'ok')
     EXCEPT ALL
     SELECT slug, since, lease_token, expires, quarantined, attempts, last_end, not_before FROM storm_queue.watch)
    UNION ALL
    (SELECT slug, since, lease_token, expires, quarantined, attempts, last_end, not_before FROM storm_queue.watch
     EXCEPT ALL
     SELECT slug, since, lease_token, expires, quarantined, attempts, last_end, not_before FROM storm_queue.run
     WHERE lease_token IS NOT NULL OR not_before IS NOT NULL
        OR (quarantined IS NULL AND attempts > 0 AND last_end IS DISTINCT FROM 'ok')));

-- marks_sound --
-- whether every lane before runs_at.open_from in queue order, and every lane before runs_at.prio_from in the
-- priority lane, is settled, has a result row, holds a lease, is quarantined or is held (a claim passes them over),
-- or names no dependency and is scheduled no earlier than runs_at.later_until, at or after the first lane the mark
-- passed so (open_back, prio_back; schema version 18)
SELECT NOT EXISTS (
    SELECT 1
    FROM (SELECT l.slug, l.pos AS at, m.open_back AS back FROM storm_queue.lane l, storm_queue.runs_at m
          WHERE l.pos < m.open_from
          UNION ALL
          SELECT p.slug, p.place, m.prio_back FROM storm_queue.priority p, storm_queue.runs_at m
          WHERE p.place < m.prio_from) b
    WHERE NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = b.slug)
      AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = b.slug)
      AND NOT EXISTS (SELECT 1 FROM storm_queue.run u WHERE u.slug = b.slug
                      AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL OR u.held_seq IS NOT NULL))
      AND NOT EXISTS (SELECT 1 FROM storm_queue.run u, storm_queue.lane l, storm_queue.runs_at m
                      WHERE u.slug = b.slug AND l.slug = b.slug AND cardinality(l.deps) = 0 AND b.at >= b.back
                        AND u.not_before COLLATE "C" >= m.later_until COLLATE "C"));

-- marks_sound_17 --
-- whether every lane before runs_at.open_from in queue order, and every lane before runs_at.prio_from in the
-- priority lane, is settled, has a result row, holds a lease, is quarantined or is held (a claim passes them over;
-- schema version 17; from 18: marks_sound)
SELECT NOT EXISTS (
    SELECT 1
    FROM (SELECT l.slug FROM storm_queue.lane l, storm_queue.runs_at m WHERE l.pos < m.open_from
          UNION ALL
          SELECT p.slug FROM storm_queue.priority p, storm_queue.runs_at m WHERE p.place < m.prio_from) b
    WHERE NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = b.slug)
      AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = b.slug)
      AND NOT EXISTS (SELECT 1 FROM storm_queue.run u WHERE u.slug = b.slug
                      AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL OR u.held_seq IS NOT NULL)));

-- open_mark_sound --
-- whether every lane before runs_at.open_from is settled, has a result row, holds a lease or is quarantined (a
-- claim passes them over; before schema version 7 the mark passed only the first two, which this holds too;
-- from version 17: marks_sound)
SELECT NOT EXISTS (
    SELECT 1 FROM storm_queue.lane l, storm_queue.runs_at m
    WHERE l.pos < m.open_from
      AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug)
      AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = l.slug)
      AND NOT EXISTS (SELECT 1 FROM storm_queue.run u
                      WHERE u.slug = l.slug AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL)));

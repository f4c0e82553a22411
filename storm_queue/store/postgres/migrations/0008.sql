-- Version 9: a boundary that holds (issue 30). A runner asks; the server
-- decides and writes. Read with SECURITY.md ("A storm in PostgreSQL") and
-- docs/many-hosts.md ("The boundary").
--
-- Every name below is schema-qualified, and the script binds what it
-- creates with the search_path only pg_catalog (a function with an SQL-
-- standard body is bound when it is created, by OID: see json_str).
SET LOCAL search_path = pg_catalog, pg_temp;

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
CREATE TABLE storm_queue.lock ();

-- the catch-up's own lock (served.catch_up: one process at a time rewrites
-- the state row's body), taken NOWAIT in the same mode for the same reason
CREATE TABLE storm_queue.catch_up ();

CREATE OR REPLACE FUNCTION storm_queue.row_changed() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    IF TG_OP = 'DELETE' OR TG_OP = 'TRUNCATE' OR (TG_OP = 'UPDATE' AND NEW.slug <> OLD.slug) THEN
        UPDATE storm_queue.state SET rows_gone = rows_gone + 1;
    END IF;
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        NEW.ver := nextval('storm_queue.row_ver'::regclass);
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;

-- the serving functions' start and a runner's lines, under the new lock
CREATE OR REPLACE FUNCTION storm_queue.serve_begin(p_wait_ms integer, OUT who text, OUT policy jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_operator text;
    v_for text;
    v_sha text;
BEGIN
    SELECT s.operator INTO v_operator FROM storm_queue.storm s;
    IF session_user = v_operator THEN
        who := 'operator:' || v_operator;
    ELSIF EXISTS (SELECT 1 FROM storm_queue.member WHERE role = session_user AND kind = 'runner') THEN
        who := 'runner:' || session_user;
    ELSE
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', p_wait_ms::text, true);
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    SELECT s.runner, s.runner_for, encode(sha256(convert_to(s.declaration, 'UTF8')), 'hex')
    INTO policy, v_for, v_sha FROM storm_queue.storm s;
    IF policy IS NULL OR v_for IS DISTINCT FROM v_sha THEN
        who := NULL;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION storm_queue.runner_append(p_lines bytea[], p_results jsonb)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_digest text;
    v_line bytea;
    v_event jsonb;
    v_result jsonb;
    v_by text := 'runner:' || session_user;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM storm_queue.member WHERE role = session_user AND kind = 'runner') THEN
        RAISE EXCEPTION 'role % is not a runner of this storm', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    SELECT seq, digest INTO v_seq, v_digest FROM storm_queue.state;
    FOREACH v_line IN ARRAY p_lines LOOP
        IF length(v_line) < 2 OR get_byte(v_line, length(v_line) - 1) <> 10 THEN
            RAISE EXCEPTION 'a runner''s line must be one whole line' USING ERRCODE = 'insufficient_privilege';
        END IF;
        v_event := convert_from(v_line, 'UTF8')::jsonb;
        IF v_event->>'by' IS DISTINCT FROM v_by
           OR NOT coalesce(v_event->>'action' IN ('claim', 'renew', 'finish', 'release', 'expire', 'recover',
                                                 'quarantine', 'refused'), false)
           OR (v_event->>'seq')::bigint IS DISTINCT FROM v_seq + 1
           OR v_event->>'prev' IS DISTINCT FROM v_digest THEN
            RAISE EXCEPTION 'line % is not a runner''s request by %, chained after line %',
                v_event->>'seq', v_by, v_seq USING ERRCODE = 'insufficient_privilege';
        END IF;
        INSERT INTO storm_queue.event (seq, line) VALUES (v_seq + 1, v_line);
        v_seq := v_seq + 1;
        v_digest := encode(sha256(v_line), 'hex');
    END LOOP;
    UPDATE storm_queue.state SET seq = v_seq, digest = v_digest;
    FOR v_result IN SELECT value FROM jsonb_array_elements(coalesce(p_results, '[]')) LOOP
        IF NOT EXISTS (SELECT 1 FROM unnest(p_lines) AS l(line)
                       WHERE convert_from(l.line, 'UTF8')::jsonb @> jsonb_build_object(
                           'action', 'finish', 'result', 'ok', 'slug', v_result->>'slug',
                           'token', v_result->'body'->'token')) THEN
            RAISE EXCEPTION 'a result of % without its finish', v_result->>'slug'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        INSERT INTO storm_queue.result (slug, body) VALUES (v_result->>'slug', v_result->'body')
        ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body;
    END LOOP;
END
$$;

-- == A fixed search_path on every function ================================
--
-- A function without one resolves its names through the search_path of
-- whoever calls it: a trigger fired by the operator's hand edit, with a
-- schema on the path that another role may CREATE in (public, before
-- PostgreSQL 15), ran that role's public.nextval(text) as the operator.
-- Every plpgsql and SQL function the storm defines carries SET search_path
-- = pg_catalog, pg_temp (pg_temp last: a temporary table never shadows a
-- name; every storm name is qualified anyway). The three helpers inlined
-- into the serving functions' statements (json_str, stamp, result_token)
-- cannot carry a SET clause (a function with one is never inlined): each
-- has an SQL-standard body, parsed and bound to pg_catalog's objects when
-- it is created (above: this script's own search_path), so no caller's
-- search_path reaches it (tests/database/test_attack.py proves both).
ALTER FUNCTION storm_queue.append_only() SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION storm_queue.json_str(p text) RETURNS text LANGUAGE sql IMMUTABLE
RETURN CASE WHEN p ~ '[^ -~]|["\\]' THEN storm_queue.json_str_escaped(p) ELSE '"' || p || '"' END;

CREATE OR REPLACE FUNCTION storm_queue.stamp(p_t double precision) RETURNS text LANGUAGE sql STABLE
RETURN to_char(to_timestamp(floor(p_t) + (round((p_t - floor(p_t)) * 1000000.0::double precision) = 1000000)::integer)
               AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || '.' || lpad((round((p_t - floor(p_t)) * 1000000.0::double precision)::bigint % 1000000)::text, 6, '0') || 'Z';

CREATE OR REPLACE FUNCTION storm_queue.result_token(p_body jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE
RETURN CASE WHEN jsonb_typeof(p_body->'token') = 'number' AND (p_body->>'token') ~ '^[0-9]+$'
                 AND (p_body->>'token')::numeric > 0 THEN (p_body->>'token')::numeric END;

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

-- The storm's time now, in POSIX seconds (core/clock.stamp's argument):
-- the server's clock, moved as storm_queue.clock says.
CREATE FUNCTION storm_queue.clock_now() RETURNS double precision LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT extract(epoch FROM coalesce((SELECT coalesce(c.fixed, clock_timestamp() + c.ahead) FROM storm_queue.clock c),
                                       clock_timestamp()))::double precision
$$;

-- claim, renew and finish as a runner (or the operator) asks them, timed by the storm's clock
CREATE FUNCTION storm_queue.serve_claim(p_holder text, p_ttl integer, p_reason text, p_wait_ms integer) RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT storm_queue.serve_claim(p_holder, p_ttl, p_reason, storm_queue.clock_now(), p_wait_ms)
$$;
CREATE FUNCTION storm_queue.serve_renew(p_slug text, p_token bigint, p_ttl integer, p_reason text, p_wait_ms integer)
RETURNS jsonb LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT storm_queue.serve_renew(p_slug, p_token, p_ttl, p_reason, storm_queue.clock_now(), p_wait_ms)
$$;
CREATE FUNCTION storm_queue.serve_finish(p_slug text, p_token bigint, p_result text, p_note text, p_reason text,
                                         p_wait_ms integer) RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT storm_queue.serve_finish(p_slug, p_token, p_result, p_note, p_reason, storm_queue.clock_now(), p_wait_ms)
$$;
DO $$
DECLARE
    v_role text;
BEGIN
    FOR v_role IN SELECT m.role FROM storm_queue.member m JOIN pg_catalog.pg_roles r ON r.rolname = m.role
                  WHERE m.kind = 'runner' LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION '
                       'storm_queue.serve_renew(text, bigint, integer, text, double precision, integer), '
                       'storm_queue.serve_finish(text, bigint, text, text, text, double precision, integer), '
                       'storm_queue.serve_claim(text, integer, text, double precision, integer) FROM %I', v_role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION storm_queue.serve_claim(text, integer, text, integer), '
                       'storm_queue.serve_renew(text, bigint, integer, text, integer), '
                       'storm_queue.serve_finish(text, bigint, text, text, text, integer) TO %I', v_role);
    END LOOP;
END
$$;

-- == EXECUTE: nothing for PUBLIC ==========================================
--
-- A function is executable by PUBLIC unless revoked; a runner or reader
-- role holds USAGE on the schema, so it could call every helper and
-- trigger function directly. None is PUBLIC from now on, and the functions
-- the operator creates in this database from now on are not either
-- (ALTER DEFAULT PRIVILEGES ... IN SCHEMA can only add to the global
-- default, never take PUBLIC's EXECUTE away: the default is the operator's
-- in this database). A runner role is granted EXECUTE on its own serving
-- functions alone (queries.sql grant_runner_functions).
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
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

UPDATE storm_queue.version SET version = 8;

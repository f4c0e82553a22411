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
CREATE TABLE storm_queue.lock (id integer PRIMARY KEY CHECK (id = 1));
INSERT INTO storm_queue.lock (id) VALUES (1);

-- the catch-up's own lock (served.catch_up: one process at a time rewrites
-- the state row's body), taken NOWAIT in the same mode for the same reason
CREATE TABLE storm_queue.catch_up (id integer PRIMARY KEY CHECK (id = 1));
INSERT INTO storm_queue.catch_up (id) VALUES (1);

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


-- == A runner asks; the server decides and writes ========================
--
-- Versions 2 to 8 let a runner role hand the server lines it composed
-- (runner_append) and result bodies (runner_mark_blocked), checked by a
-- second reading of their text; the fold trigger read the action by a
-- pattern over that text. From here a runner role may execute only the
-- functions below that serve its requests, each taking the request's
-- typed arguments and composing every line it writes itself, on the
-- server's clock: serve_claim, serve_renew, serve_finish, serve_release,
-- serve_recover, and serve_decided (the blocked marks next writes). Each
-- judges the request as service/passage.py does (shape, then who asks,
-- then the lookups under the lock), records a refusal exactly as the
-- Python request path records it, answers a repeated key as it does, and
-- folds the typed values it built. tests/database/test_served.py holds
-- every one to the Python path, byte for byte.
DROP FUNCTION storm_queue.runner_append(bytea[], jsonb);
DROP FUNCTION storm_queue.runner_mark_blocked(text, jsonb);
DROP FUNCTION storm_queue.serve_claim(text, integer, text, double precision, integer);
DROP FUNCTION storm_queue.serve_renew(text, bigint, integer, text, double precision, integer);
DROP FUNCTION storm_queue.serve_finish(text, bigint, text, text, text, double precision, integer);
DROP FUNCTION storm_queue.serve_begin(integer);
DROP FUNCTION storm_queue.serve_refused(text, text, text, text, text, text, text);
DROP FUNCTION storm_queue.serve_fence(storm_queue.run, text, bigint, text, text);
DROP FUNCTION storm_queue.serve_ttl_refusal(jsonb, integer);
DROP FUNCTION storm_queue.serve_append(text, text, text[], text[]);
DROP FUNCTION storm_queue.serve_append(text, text, text[], text[], boolean);
DROP FUNCTION storm_queue.fold_line(bytea);

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
ALTER TABLE storm_queue.runs_at ADD COLUMN keys_day text NOT NULL DEFAULT '';

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

-- why the server no longer decides by its folded tables (NULL: it does): a
-- table the fold keeps written otherwise (by hand), a line of the log
-- edited. A runner's request is then answered "the order is unknown" (exit
-- 3), the operator's takes the Python path, until `storm-queue upgrade URL`
-- re-derives the tables from the log (storm_queue.rederive).
ALTER TABLE storm_queue.storm ADD COLUMN withdrawn text;

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

-- core/names.is_name: at most 200 ASCII letters, digits, '.', '_' and '-',
-- starting with a letter or digit, without '..'
CREATE FUNCTION storm_queue.is_name(p text) RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN length(p) <= 200 AND p COLLATE "C" ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$' AND strpos(p, '..') = 0;

-- core/names.why_not_name: why p is not a name, in words
CREATE FUNCTION storm_queue.why_not_name(p text) RETURNS text LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN p = '' THEN 'it is empty'
                WHEN length(p) > 200 THEN 'it is longer than 200 characters'
                WHEN strpos(p, '..') > 0 THEN 'it contains ''..'''
                ELSE 'a name is letters, digits, ''.'', ''_'' and ''-'', starting with a letter or digit' END
$$;

-- core/names.quote: p escaped (a backslash doubled, a character Python does
-- not call printable as \xNN, \uNNNN or \UNNNNNNNN) and in double quotes (a
-- double quote escaped), outside text as data in a refusal's words
CREATE FUNCTION storm_queue.quoted(p text) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_out text := '';
    v_c text;
    v_n integer;
BEGIN
    IF p !~ '[^ -~]|["\\]' THEN
        RETURN '"' || p || '"';
    END IF;
    FOR i IN 1..length(p) LOOP
        v_c := substr(p, i, 1);
        v_n := ascii(v_c);
        v_out := v_out || CASE
            WHEN v_c = '\' THEN '\\'
            WHEN v_c = '"' THEN '\"'
            WHEN v_n BETWEEN 32 AND 126 THEN v_c
            WHEN v_n >= 128 AND NOT EXISTS (
                SELECT 1 FROM (SELECT u.hi FROM storm_queue.unprintable u WHERE u.lo <= v_n ORDER BY u.lo DESC LIMIT 1) x
                WHERE x.hi >= v_n) THEN v_c
            WHEN v_n < 256 THEN '\x' || lpad(to_hex(v_n), 2, '0')
            WHEN v_n < 65536 THEN '\u' || lpad(to_hex(v_n), 4, '0')
            ELSE '\U' || lpad(to_hex(v_n), 8, '0')
        END;
    END LOOP;
    RETURN '"' || v_out || '"';
END
$$;

-- A lane row a claim may lease and next may print, as store/postgres/rows.py
-- reads one (a queue.txt line's rules): its slug a name, its issue ASCII
-- digits or '-', its dependencies a list (one dimension, no NULL) of names.
-- A row written by hand that breaks them is skipped and reported, never leased.
CREATE FUNCTION storm_queue.lane_sound(p_slug text, p_issue text, p_deps text[]) RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN CASE WHEN p_deps IS NULL OR coalesce(array_ndims(p_deps), 1) <> 1 THEN false
            ELSE storm_queue.is_name(p_slug)
                 AND (p_issue = '-' OR (length(p_issue) <= 200 AND p_issue COLLATE "C" ~ '^[0-9]+$'))
                 AND array_position(p_deps, NULL) IS NULL
                 AND (cardinality(p_deps) = 0
                      OR (array_to_string(p_deps, ' ') COLLATE "C"
                          ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,199}( [A-Za-z0-9][A-Za-z0-9._-]{0,199})*$'
                          AND strpos(array_to_string(p_deps, ' '), '..') = 0)) END;

-- core/outcome.Request.fingerprint: the first 32 hex digits of the SHA-256
-- of the JSON list [verb, slug, reason, source, [args...]] as core/jsoncodec
-- writes it (", " between items), p_args being the args' items so written
CREATE FUNCTION storm_queue.fingerprint(p_verb text, p_slug text, p_reason text, p_source text, p_args text)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT left(encode(sha256(convert_to(
        '[' || storm_queue.json_str(p_verb) || ', ' || coalesce(storm_queue.json_str(p_slug), 'null') || ', '
        || coalesce(storm_queue.json_str(p_reason), 'null') || ', ' || coalesce(storm_queue.json_str(p_source), 'null')
        || ', [' || p_args || ']]', 'UTF8')), 'hex'), 32)
$$;

-- service/passage._carry: the request's reason, key and fingerprint, as its own line ends with them
CREATE FUNCTION storm_queue.carried(p_reason text, p_key text, p_fingerprint text) RETURNS text LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(',"reason":' || storm_queue.json_str(p_reason), '')
        || coalesce(',"key":' || storm_queue.json_str(p_key) || ',"fingerprint":' || storm_queue.json_str(p_fingerprint), '')
$$;

-- A line of the log as jsonb (jsonb holds no NUL: a \u0000 escape, which no
-- field the server folds may hold, is read as U+FFFD; an escaped backslash
-- before it is kept as it is)
CREATE FUNCTION storm_queue.line_jsonb(p_line bytea) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_text text := convert_from(p_line, 'UTF8');
BEGIN
    IF strpos(v_text, '\u0000') > 0 THEN
        v_text := replace(replace(v_text, '\\', '\u005c'), '\u0000', '\ufffd');
    END IF;
    RETURN v_text::jsonb;
END
$$;

-- Why the log's head (the state row: seq, and the digest of its last line)
-- is not its last line, in words naming the line; NULL when it is. A line
-- deleted or edited by hand (the append-only trigger disabled), or one
-- inserted past the head, is damage: verify names it, nothing is served.
CREATE FUNCTION storm_queue.head_damage() RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_digest text;
    v_line bytea;
BEGIN
    SELECT s.seq, s.digest INTO v_seq, v_digest FROM storm_queue.state s;
    IF v_seq IS NULL THEN
        RETURN 'the storm has no state row';
    END IF;
    IF v_seq > 0 THEN
        SELECT e.line INTO v_line FROM storm_queue.event e WHERE e.seq = v_seq;
        IF v_line IS NULL THEN
            RETURN 'line ' || v_seq || ' of the log, its head, is missing';
        ELSIF encode(sha256(v_line), 'hex') IS DISTINCT FROM v_digest THEN
            RETURN 'line ' || v_seq || ' of the log, its head, is not the line the head records (its digest differs)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM storm_queue.event e WHERE e.seq > v_seq) THEN
        RETURN 'the log holds lines past its head (line ' || v_seq || ')';
    END IF;
    RETURN NULL;
END
$$;

-- == One reading of a line ================================================
--
-- An adopt's lane (core/framing._rows_ok): a list of objects with exactly
-- the fields slug, named, by, at, action, for and line, of their kinds, the
-- slugs (and each row's "for") names, no slug twice
CREATE FUNCTION storm_queue.lane_rows_sound(p json) RETURNS boolean LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT json_typeof(p) = 'array'
       AND NOT EXISTS (
           SELECT 1 FROM json_array_elements(p) r(x)
           WHERE json_typeof(r.x) <> 'object'
              OR (SELECT array_agg(k COLLATE "C" ORDER BY k COLLATE "C") FROM json_object_keys(r.x) k)
                 IS DISTINCT FROM ARRAY['action', 'at', 'by', 'for', 'line', 'named', 'slug']
              OR json_typeof(r.x->'slug') <> 'string' OR json_typeof(r.x->'named') <> 'boolean'
              OR json_typeof(r.x->'by') <> 'string' OR json_typeof(r.x->'at') <> 'string'
              OR json_typeof(r.x->'action') <> 'string' OR json_typeof(r.x->'for') <> 'string'
              OR (r.x->'line')::text !~ '^-?(0|[1-9][0-9]{0,14})$'
              OR NOT storm_queue.is_name(r.x->>'slug') OR NOT storm_queue.is_name(r.x->>'for'))
       AND (SELECT count(*) = count(DISTINCT r.x->>'slug') FROM json_array_elements(p) r(x))
$$;

-- core/framing.decode's rules, for a line to be inserted as line p_seq after
-- a line whose digest is p_prev (NULL: the first): why it is not a well-formed
-- line there, in words; NULL when it is. Stricter than the decoder where no
-- writer writes otherwise: printable ASCII in one line ending in a newline
-- (core/framing.encode), at most 4 MiB, nested at most 32 deep (the decoder's
-- own limit is Python's recursion limit), an int field a plain whole number
-- of at most 15 digits (a number written 1.0 or 1e0 is a float to Python, and
-- no count reaches 10^15), `at` a stamp (core/clock), `by` a principal
-- (operator:, source:, account:, runner: and a name; lane: and a JSON string).
-- The JSON is read as json, not jsonb: json keeps each value's text, and its
-- operators, as Python's json, take the last of duplicate keys.
CREATE FUNCTION storm_queue.line_refusal(p_line bytea, p_seq bigint, p_prev text) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_text text;
    j json;
    v json;
    v_action text;
    v_nest text;
    v_kind text;
    v_fits boolean;
    f record;
BEGIN
    IF octet_length(p_line) > 4194304 THEN
        RETURN 'it is longer than 4 MiB';
    END IF;
    v_text := convert_from(p_line, 'UTF8');
    IF v_text !~ '^[ -~]*\n$' THEN
        RETURN 'it is not one line of printable ASCII ending in a newline';
    END IF;
    j := v_text::json;
    IF json_typeof(j) <> 'object' THEN
        RETURN 'it is not a JSON object';
    END IF;
    v_nest := regexp_replace(regexp_replace(v_text, '"(\\.|[^"\\])*"', '', 'g'), '[^][{}]', '', 'g');
    FOR i IN 1..32 LOOP
        EXIT WHEN v_nest = '';
        v_nest := regexp_replace(v_nest, '\[\]|\{\}', '', 'g');
    END LOOP;
    IF v_nest <> '' THEN
        RETURN 'it nests deeper than 32';
    END IF;
    IF (j->'v')::text IS DISTINCT FROM '1' THEN
        RETURN 'its format version is ' || coalesce((j->'v')::text, 'missing') || ', not 1';
    END IF;
    v_action := CASE WHEN json_typeof(j->'action') = 'string' THEN j->>'action' END;
    IF v_action IS NULL OR NOT EXISTS (SELECT 1 FROM storm_queue.line_field lf WHERE lf.action = v_action) THEN
        RETURN 'its action is not one: ' || coalesce((j->'action')::text, 'missing');
    END IF;
    FOR f IN SELECT lf.field, lf.kind, lf.need, lf.named FROM storm_queue.line_field lf
             WHERE lf.action IN ('*', v_action) ORDER BY lf.action = '*', lf.field LOOP
        v := j->f.field;
        IF v IS NULL THEN
            IF f.need = 'required' THEN
                RETURN 'field ' || f.field || ' is missing';
            END IF;
            CONTINUE;
        END IF;
        v_kind := json_typeof(v);
        v_fits := CASE f.kind
                      WHEN 'str' THEN v_kind = 'string'
                      WHEN 'str?' THEN v_kind IN ('string', 'null')
                      WHEN 'int' THEN v_kind = 'number' AND v::text ~ '^-?(0|[1-9][0-9]{0,14})$'
                      WHEN 'int?' THEN v_kind = 'null' OR (v_kind = 'number' AND v::text ~ '^-?(0|[1-9][0-9]{0,14})$')
                      WHEN 'bool' THEN v_kind = 'boolean'
                      WHEN 'object' THEN v_kind = 'object'
                      WHEN 'list' THEN v_kind = 'array'
                                       AND NOT EXISTS (SELECT 1 FROM json_array_elements(v) x WHERE json_typeof(x) <> 'string')
                      ELSE storm_queue.lane_rows_sound(v) END;
        IF NOT v_fits THEN
            RETURN 'field ' || f.field || ' is not a ' || f.kind;
        END IF;
        IF f.named AND v_kind IN ('string', 'array')
           AND EXISTS (SELECT 1 FROM json_array_elements_text(CASE WHEN v_kind = 'array' THEN v ELSE json_build_array(v) END) n
                       WHERE NOT storm_queue.is_name(n)) THEN
            RETURN 'field ' || f.field || ' holds a text that is not a name';
        END IF;
    END LOOP;
    IF (j->>'seq')::bigint <> p_seq THEN
        RETURN 'its seq is ' || (j->>'seq') || ', not ' || p_seq;
    END IF;
    v_fits := CASE WHEN p_prev IS NULL THEN json_typeof(j->'prev') = 'null'
                   ELSE json_typeof(j->'prev') = 'string' AND j->>'prev' = p_prev END;
    IF v_fits IS NOT TRUE THEN
        RETURN 'its prev is not the digest of line ' || (p_seq - 1);
    END IF;
    IF j->>'at' !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$'
       OR (replace(left(j->>'at', 19), 'T', ' '))::timestamp IS NULL THEN
        RETURN 'its at is not a stamp';
    END IF;
    IF NOT (j->>'by' ~ '^(operator|source|account|runner):.'
            OR (left(j->>'by', 5) = 'lane:' AND json_typeof(substr(j->>'by', 6)::json) = 'string')) THEN
        RETURN 'its by is not a principal';
    END IF;
    IF v_action IN ('claim', 'renew', 'finish', 'expire', 'release') AND (j->>'token')::bigint < 1 THEN
        RETURN 'field token is not a positive number';
    ELSIF v_action = 'settle' AND j->>'ledger' NOT IN ('integrated', 'abandoned') THEN
        RETURN 'field ledger is neither integrated nor abandoned';
    ELSIF v_action = 'finish' AND j->>'result' NOT IN ('ok', 'failed') THEN
        RETURN 'field result is neither ok nor failed';
    ELSIF v_action = 'adopt' AND j->'noop' IS NULL AND p_seq <> 1 THEN
        RETURN 'an adopt that took a log over is valid only as line 1';
    END IF;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN  -- not UTF-8, not JSON, a name no text can be, a day no calendar has
    RETURN 'it cannot be read (' || SQLERRM || ')';
END
$$;

-- Every line any role inserts into the log (the operator's request path,
-- a serving function, a hand edit) is checked here first, under the
-- storm's lock: it is the line after the head (its seq the head's + 1,
-- its prev the head's digest), the head is the log's last line, and it is
-- well-formed (line_refusal); then the head moves to it. So no role but a
-- superuser, or the table's owner disabling this trigger (doctor reports
-- it), can put a line the Python decoder refuses into the log, or append
-- after a line deleted or edited.
CREATE FUNCTION storm_queue.event_well_formed() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_digest text;
    v_why text;
BEGIN
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    v_why := storm_queue.head_damage();
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION 'storm_queue.event: no line is appended to a damaged log: %', v_why
            USING ERRCODE = 'data_corrupted', HINT = 'storm-queue verify names the line';
    END IF;
    SELECT s.seq, s.digest INTO v_seq, v_digest FROM storm_queue.state s;
    v_why := CASE WHEN NEW.seq IS DISTINCT FROM v_seq + 1 THEN 'it is not the line after the head (line ' || v_seq || ')'
                  ELSE storm_queue.line_refusal(NEW.line, NEW.seq, v_digest) END;
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION 'storm_queue.event: line % is refused: %', NEW.seq, v_why USING ERRCODE = 'check_violation';
    END IF;
    UPDATE storm_queue.state SET seq = NEW.seq, digest = encode(sha256(NEW.line), 'hex');
    RETURN NEW;
END
$$;
CREATE TRIGGER event_well_formed BEFORE INSERT ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.event_well_formed();

-- == The fold: the checked jsonb of a line, or the values a function built
--
-- core/fold.py Fold.step's keys: the keys bound more than KEY_DAYS (7) days
-- before a line's day are forgotten at the first line of a later day (while
-- any is kept), then the line's key, if it has one, binds it (the first
-- line under a key does). Every fold below notes, for the rest of its
-- transaction, that the tables it writes are written by the fold
-- (storm_queue.folding: see derived_written).
CREATE FUNCTION storm_queue.fold_keys(p_by text, p_key text, p_fingerprint text, p_seq bigint, p_at text, p_line bytea)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_day text := left(p_at, 10);
BEGIN
    PERFORM set_config('storm_queue.folding', 'on', true);
    IF v_day COLLATE "C" > (SELECT a.keys_day FROM storm_queue.runs_at a) COLLATE "C"
       AND EXISTS (SELECT 1 FROM storm_queue.keyed) THEN  -- (a day: the insert check holds every at to a stamp)
        DELETE FROM storm_queue.keyed k WHERE k.day COLLATE "C" < to_char(v_day::date - 7, 'YYYY-MM-DD') COLLATE "C";
        UPDATE storm_queue.runs_at SET keys_day = v_day;
    END IF;
    IF p_key IS NOT NULL THEN
        INSERT INTO storm_queue.keyed (by, key, fingerprint, seq, day, line)
        VALUES (p_by, p_key, coalesce(p_fingerprint, ''), p_seq, v_day, p_line)
        ON CONFLICT DO NOTHING;
    END IF;
END
$$;

-- One line of the log folded into storm_queue.run, runs_at, priority,
-- waiver and keyed, as core/fold.py Fold.step folds it (the runner actions,
-- a push or bump that schedules, a reset's floor, a halt and its end, the
-- priority lane, the waivers, the keys), reading the line's checked jsonb
-- (line_jsonb), never a pattern over its text.
CREATE FUNCTION storm_queue.fold_line(e jsonb, p_seq bigint, p_line bytea) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_action text := e->>'action';
    r storm_queue.run%ROWTYPE;
    v_token bigint;
BEGIN
    PERFORM storm_queue.fold_keys(e->>'by', e->>'key', e->>'fingerprint', p_seq, e->>'at', p_line);
    IF v_action NOT IN ('claim', 'renew', 'finish', 'expire', 'recover', 'release', 'cancel', 'quarantine', 'unpark',
                        'schedule', 'push', 'bump', 'unbump', 'waive', 'adopt', 'reset', 'halt', 'resume') THEN
        RETURN;
    END IF;
    IF v_action IN ('push', 'bump', 'unbump', 'waive') THEN
        PERFORM storm_queue.fold_shift(e);
    END IF;
    IF v_action IN ('push', 'bump', 'unbump', 'waive', 'adopt', 'halt', 'resume') AND coalesce(e->>'noop', '') <> '' THEN
        RETURN;
    ELSIF v_action = 'waive' THEN
        IF (e->'undo')::boolean THEN
            DELETE FROM storm_queue.waiver WHERE slug = e->>'slug' AND dep = e->>'dep';
        ELSE
            INSERT INTO storm_queue.waiver (slug, dep) VALUES (e->>'slug', e->>'dep') ON CONFLICT DO NOTHING;
        END IF;
        RETURN;
    ELSIF v_action = 'adopt' THEN
        DELETE FROM storm_queue.priority;
        INSERT INTO storm_queue.priority (slug, place)
        SELECT a.item->>'slug', a.n FROM jsonb_array_elements(e->'lane') WITH ORDINALITY AS a(item, n);
        RETURN;
    ELSIF v_action = 'unbump' THEN
        RETURN;
    ELSIF v_action IN ('push', 'bump') THEN
        IF e ? 'not_before' THEN
            INSERT INTO storm_queue.run (slug, since, not_before) VALUES (e->>'slug', p_seq, e->>'not_before')
            ON CONFLICT (slug) DO UPDATE SET not_before = EXCLUDED.not_before;
        END IF;
        RETURN;
    ELSIF v_action = 'reset' THEN
        UPDATE storm_queue.runs_at SET token_floor = greatest(token_floor, coalesce((e->>'abandons')::bigint, 0));
        RETURN;
    ELSIF v_action = 'halt' THEN
        UPDATE storm_queue.runs_at
        SET halt_seq = p_seq, halt_at = e->>'at', halt_by = e->>'by', halt_reason = e->>'reason';
        RETURN;
    ELSIF v_action = 'resume' THEN
        UPDATE storm_queue.runs_at SET halt_seq = NULL, halt_at = NULL, halt_by = NULL, halt_reason = NULL;
        RETURN;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = e->>'slug';
    IF NOT FOUND THEN
        r.slug := e->>'slug';
        r.since := p_seq;
        r.token := 0;
        r.cancelled_tokens := '{}';
        r.attempts := 0;
    END IF;
    v_token := (e->>'token')::bigint;
    IF v_action = 'claim' THEN
        r.token := greatest(r.token, v_token);
        r.holder := e->>'holder';
        r.lease_token := v_token;
        r.lease_by := e->>'by';
        r.claimed := e->>'at';
        r.expires := e->>'expires';
        r.ttl := (e->>'ttl')::integer;
        r.attempts := r.attempts + 1;
        r.last_token := v_token;
        r.last_end := NULL;
    ELSIF v_action IN ('renew', 'finish', 'expire', 'recover', 'release', 'cancel') THEN
        IF v_token > r.token THEN
            r.token := v_token;
        END IF;
        IF v_action = 'cancel' AND coalesce(e->>'noop', '') = '' THEN
            r.cancelled_at := e->>'at';
            r.cancelled_by := e->>'by';
            r.cancelled_reason := e->>'reason';
        END IF;
        IF r.lease_token = v_token THEN
            IF v_action = 'renew' THEN
                r.expires := e->>'expires';
                r.ttl := (e->>'ttl')::integer;
            ELSE
                IF r.last_token = v_token AND r.last_end IS NULL THEN
                    r.last_end := CASE v_action WHEN 'finish' THEN e->>'result' WHEN 'expire' THEN 'expired'
                                  WHEN 'release' THEN 'released' WHEN 'cancel' THEN 'cancelled' ELSE 'recovered' END;
                    IF v_action = 'cancel' THEN
                        r.cancelled_tokens := r.cancelled_tokens || v_token;
                    END IF;
                END IF;
                r.holder := NULL;
                r.lease_token := NULL;
                r.lease_by := NULL;
                r.claimed := NULL;
                r.expires := NULL;
                r.ttl := NULL;
            END IF;
        END IF;
        IF v_action = 'finish' AND e ? 'not_before' THEN  -- the storm's backoff after a failed attempt
            r.not_before := e->>'not_before';
        END IF;
    ELSIF v_action = 'quarantine' THEN
        r.quarantined := e->>'at';
    ELSIF v_action = 'unpark' THEN
        r.quarantined := NULL;
        r.attempts := 0;
    ELSIF v_action = 'schedule' THEN
        r.not_before := e->>'not_before';
    END IF;
    INSERT INTO storm_queue.run VALUES (r.*)
    ON CONFLICT (slug) DO UPDATE SET token = EXCLUDED.token, holder = EXCLUDED.holder,
        lease_token = EXCLUDED.lease_token, lease_by = EXCLUDED.lease_by, claimed = EXCLUDED.claimed,
        expires = EXCLUDED.expires, ttl = EXCLUDED.ttl, attempts = EXCLUDED.attempts,
        last_token = EXCLUDED.last_token, last_end = EXCLUDED.last_end, quarantined = EXCLUDED.quarantined,
        not_before = EXCLUDED.not_before, cancelled_at = EXCLUDED.cancelled_at, cancelled_by = EXCLUDED.cancelled_by,
        cancelled_reason = EXCLUDED.cancelled_reason, cancelled_tokens = EXCLUDED.cancelled_tokens;
END
$$;

CREATE OR REPLACE FUNCTION storm_queue.event_folded() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM storm_queue.fold_line(storm_queue.line_jsonb(NEW.line), NEW.seq, NEW.line);
    RETURN NULL;
END
$$;

-- A table the fold keeps written other than by a fold (the flag a fold sets
-- for its transaction is not set: a hand edit, as the operator or a
-- superuser) no longer speaks for the log: the server stops deciding by it
-- (storm.withdrawn says why) until an upgrade re-derives it (rederive).
CREATE FUNCTION storm_queue.derived_written() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('storm_queue.folding', true) IS DISTINCT FROM 'on' THEN
        UPDATE storm_queue.storm
        SET withdrawn = coalesce(withdrawn, 'storm_queue.' || TG_TABLE_NAME || ' was written other than by the fold ('
                                            || TG_OP || ' by role ' || session_user || ')');
    END IF;
    RETURN NULL;
END
$$;
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

-- the triggers that keep runs_at's mark and watch from a fold (or from the
-- operator's hand edit of a lane, settled or result row, which moves the
-- mark back: its own work, not the derived tables'), noted as the fold's
CREATE OR REPLACE FUNCTION storm_queue.open_again() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.pos >= (SELECT open_from FROM storm_queue.runs_at) THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM set_config('storm_queue.folding', 'on', true);
    UPDATE storm_queue.runs_at SET open_from = -9223372036854775808 WHERE open_from <> -9223372036854775808;
    RETURN NULL;
END
$$;

-- A line of the log edited or deleted (only a session that disabled
-- event_append_only can): the server no longer decides by what it folded
CREATE OR REPLACE FUNCTION storm_queue.event_edited() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE storm_queue.storm
    SET withdrawn = coalesce(withdrawn, 'a line of the log was edited or deleted (' || TG_OP || ' by role ' || session_user || ')');
    RETURN NULL;
END
$$;

-- Re-derive the tables the fold keeps from the log, line by line (the
-- operator's `storm-queue upgrade URL`, recorded, when the server no longer
-- decides by them): returns how many lines were folded.
CREATE FUNCTION storm_queue.rederive() RETURNS bigint LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_line bytea;
    v_count bigint := 0;
BEGIN
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    PERFORM set_config('storm_queue.folding', 'on', true);
    DELETE FROM storm_queue.run;
    DELETE FROM storm_queue.watch;
    DELETE FROM storm_queue.priority;
    DELETE FROM storm_queue.waiver;
    DELETE FROM storm_queue.keyed;
    UPDATE storm_queue.runs_at SET token_floor = 0, halt_seq = NULL, halt_at = NULL, halt_by = NULL, halt_reason = NULL,
        open_from = -9223372036854775808, keys_day = '';
    FOR v_seq, v_line IN SELECT e.seq, e.line FROM storm_queue.event e ORDER BY e.seq LOOP
        PERFORM storm_queue.fold_line(storm_queue.line_jsonb(v_line), v_seq, v_line);
        v_count := v_count + 1;
    END LOOP;
    UPDATE storm_queue.storm SET withdrawn = NULL;
    RETURN v_count;
END
$$;

-- == The serving functions =================================================
--
-- Number, stamp and chain a request's lines after the log's head, as
-- core/framing.frame does (each body given as its action and the JSON of its
-- other fields, each led by a comma), insert them (the insert check moves
-- the head; p_folded: the caller folds them, event_folded passes over them),
-- and return them. The line p_own (its index) carries the request's key: a
-- caller that folds its lines binds it here. p_ask: the client's token for
-- the request, kept with the last line's seq (an hour) for a client whose
-- connection broke to ask whether it was written.
CREATE FUNCTION storm_queue.serve_append(p_at text, p_by text, p_actions text[], p_rests text[], p_folded boolean,
                                         p_own integer, p_key text, p_fingerprint text, p_ask text)
RETURNS text[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_digest text;
    v_line text;
    v_bytes bytea;
    v_lines text[] := '{}';
BEGIN
    SELECT s.seq, s.digest INTO v_seq, v_digest FROM storm_queue.state s;
    FOR i IN 1..cardinality(p_actions) LOOP
        v_seq := v_seq + 1;
        v_line := '{"v":1,"seq":' || v_seq || ',"at":' || storm_queue.json_str(p_at) || ',"action":'
            || storm_queue.json_str(p_actions[i]) || ',"by":' || storm_queue.json_str(p_by) || ',"prev":'
            || coalesce(storm_queue.json_str(v_digest), 'null') || p_rests[i] || '}' || chr(10);
        v_bytes := convert_to(v_line, 'UTF8');
        INSERT INTO storm_queue.event (seq, line, folded) VALUES (v_seq, v_bytes, p_folded);
        v_digest := encode(sha256(v_bytes), 'hex');
        v_lines := v_lines || v_line;
        IF p_folded AND i = 1 THEN  -- its keys, folded: the day's forgetting (every line has the same at), then its own
            PERFORM storm_queue.fold_keys(p_by, NULL, NULL, v_seq, p_at, v_bytes);
        END IF;
        IF p_folded AND i = p_own AND p_key IS NOT NULL THEN
            PERFORM storm_queue.fold_keys(p_by, p_key, p_fingerprint, v_seq, p_at, v_bytes);
        END IF;
    END LOOP;
    IF p_ask IS NOT NULL THEN
        DELETE FROM storm_queue.asked a WHERE a.at < clock_timestamp() - interval '1 hour';
        INSERT INTO storm_queue.asked (ask, seq, at) VALUES (p_ask, v_seq, clock_timestamp())
        ON CONFLICT (ask) DO UPDATE SET seq = EXCLUDED.seq;
    END IF;
    RETURN v_lines;
END
$$;

-- A refusal's line (service/passage._refused_body and _carry) recorded, and
-- the answer: outcome refused, its code, its message, the line.
CREATE FUNCTION storm_queue.serve_refused(p_at text, p_by text, p_verb text, p_slug text, p_code text, p_message text,
                                          p_authorised boolean, p_reason text, p_key text, p_fingerprint text,
                                          p_ask text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lines text[];
BEGIN
    v_lines := storm_queue.serve_append(p_at, p_by, ARRAY['refused'], ARRAY[
        ',"requested":' || storm_queue.json_str(p_verb) || ',"slug":' || coalesce(storm_queue.json_str(p_slug), 'null')
        || ',"code":' || storm_queue.json_str(p_code) || ',"message":' || storm_queue.json_str(p_message)
        || ',"authorised":' || CASE WHEN p_authorised THEN 'true' ELSE 'false' END
        || storm_queue.carried(p_reason, p_key, p_fingerprint)], false, 1, p_key, p_fingerprint, p_ask);
    RETURN jsonb_build_object('outcome', 'refused', 'code', p_code, 'message', p_message, 'line', v_lines[1]);
END
$$;

-- core/runs.py ttl_refusal: the code and words refusing a TTL outside the
-- declared window, or NULLs.
CREATE FUNCTION storm_queue.serve_ttl_refusal(p_runner jsonb, p_ttl numeric, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT p_ttl BETWEEN (p_runner->>'ttl_min')::bigint AND (p_runner->>'ttl_max')::bigint THEN
        code := 'lease_ttl_out_of_range';
        message := 'a lease TTL of ' || p_ttl || ' s is outside storm.toml [runner] ttl_min..ttl_max ('
            || (p_runner->>'ttl_min') || '..' || (p_runner->>'ttl_max') || ' s); ask for a TTL in that range';
    ELSIF p_ttl > (p_runner->>'max_lease_age')::bigint THEN
        code := 'lease_age_exceeded';
        message := 'a lease TTL of ' || p_ttl || ' s is longer than storm.toml [runner] max_lease_age ('
            || (p_runner->>'max_lease_age') || ' s); ask for a shorter TTL';
    END IF;
END
$$;

-- core/runs.py _fence: why a runner's token does not hold the live lease on
-- the lane for p_by (not_holder: a runner role's, of a lease another
-- principal took; stale_fence, or lane_cancelled), or NULLs when it does.
CREATE FUNCTION storm_queue.serve_fence(r storm_queue.run, p_slug text, p_token numeric, p_verb text, p_now text,
                                        p_by text, OUT code text, OUT message text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_why text;
BEGIN
    IF r.lease_token = p_token AND r.expires COLLATE "C" > p_now COLLATE "C" THEN
        IF p_by LIKE 'runner:%' AND r.lease_by IS DISTINCT FROM p_by THEN
            code := 'not_holder';
            message := 'the lease on ' || p_slug || ' (token ' || p_token || ') was taken by ' || r.lease_by || ', not '
                || p_by || ': a runner role may ' || p_verb || ' only a lease it took itself';
        END IF;
        RETURN;
    END IF;
    IF r.cancelled_at IS NOT NULL AND p_token = ANY (r.cancelled_tokens) THEN
        code := 'lane_cancelled';
        message := p_slug || ' was cancelled by ' || r.cancelled_by || ' at ' || r.cancelled_at
            || coalesce(' (' || nullif(r.cancelled_reason, '') || ')', '') || ', which revoked the lease of token '
            || p_token || '; a runner may not ' || p_verb || ' it: stop its work (the lane is settled abandoned)';
        RETURN;
    END IF;
    IF r.lease_token IS NULL THEN
        v_why := p_slug || ' holds no lease'
            || CASE WHEN coalesce(r.token, 0) <> 0 THEN ' (its last token was ' || r.token || ')' ELSE '' END;
    ELSIF r.lease_token <> p_token THEN
        v_why := 'token ' || p_token || ' is ' || CASE WHEN p_token < r.lease_token THEN 'older' ELSE 'newer' END
            || ' than the live lease''s token ' || r.lease_token || ' on ' || p_slug;
    ELSE
        v_why := 'the lease of token ' || p_token || ' on ' || p_slug || ' expired at ' || r.expires;
    END IF;
    code := 'stale_fence';
    message := v_why || '; a runner that lost its lease may not ' || p_verb || ' the lane: stop its work and claim again';
END
$$;

-- The start of every served request, as service/passage.py request and
-- _decide (and store.judge, core/authority.decide) begin one:
--
-- * who asks: a lane process (p_lane, its STORM_QUEUE_LANE) is refused
--   lane_process, recorded by lane:"VALUE"; a runner role (granted: storm_queue.member)
--   as runner:ROLE, refused not_operator for a source or what only the
--   operator may ask, and declaration_unreadable when the server holds no
--   runner policy of the declaration in force; the operator as
--   operator:NAME. Any other role is not served (an error: nothing written).
--   The operator's request under a source, or on a declaration the server
--   has no policy of, is left to its request path (who NULL);
-- * the shape refusal the request's function found (p_shape_code, message),
--   else the TTL's (p_ttl; p_ttl_declared: none asked means the declared
--   one), else a key that is not one (invalid_key: the key then binds
--   nothing), else a reason over 4,096 characters (reason_too_long: the
--   reason is then not recorded); shape is judged before who asks;
-- * the storm's lock (p_wait_ms at most), the storm's clock (t, at), and
--   the storm sound: a damaged log or withdrawn tables answer a runner "the
--   order is unknown" (answer.unknown: exit 3) and leave the operator's
--   request to its request path;
-- * the key: asked again with the same arguments (fingerprint), the first
--   answer is repeated (answer.repeat: its line, rebuilt by the client as
--   passage._repeated does); with others, idempotency_conflict;
-- * a refusal recorded (answer: the refusal).
-- answer NULL (and who not): the function plans on.
CREATE FUNCTION storm_queue.serve_start(
    p_verb text, p_slug text, p_reason text, p_key text, p_lane text, p_source text, p_args text,
    p_shape_code text, p_shape_message text, p_ttl numeric, p_ttl_declared boolean, p_operator_only boolean,
    p_wait_ms integer, p_ask text,
    OUT who text, OUT policy jsonb, OUT t double precision, OUT at text, OUT reason text, OUT key text,
    OUT fingerprint text, OUT answer jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_operator text;
    v_runner boolean;
    v_known boolean;
    v_withdrawn text;
    v_code text := p_shape_code;
    v_message text := p_shape_message;
    v_shape boolean;
    v_auth_code text;
    v_auth_message text;
    v_authorised boolean;
    v_damage text;
    v_line jsonb;
    k storm_queue.keyed;
BEGIN
    IF greatest(length(p_slug), length(p_key), length(p_lane), length(p_source)) > 4096
       OR p_ask !~ '^[0-9a-f]{32}$' THEN  -- what no client asks (it refuses such texts itself, unrecorded)
        RAISE EXCEPTION 'a text of this % is longer than 4,096 characters, or its ask is not a token', p_verb
            USING ERRCODE = 'program_limit_exceeded';
    END IF;
    SELECT s.operator, s.runner, s.runner IS NOT NULL AND s.runner_for IS NOT DISTINCT FROM
                                 encode(sha256(convert_to(s.declaration, 'UTF8')), 'hex'), s.withdrawn
    INTO v_operator, policy, v_known, v_withdrawn FROM storm_queue.storm s;
    v_runner := session_user IS DISTINCT FROM v_operator;
    IF v_runner AND NOT EXISTS (SELECT 1 FROM storm_queue.member m WHERE m.role = session_user AND m.kind = 'runner') THEN
        RAISE EXCEPTION 'role % is not a runner of this storm', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT v_runner AND (p_source IS NOT NULL OR NOT v_known) THEN
        RETURN;  -- the operator's request path: a source's authority, a declaration the server holds no policy of
    END IF;
    IF p_lane IS NOT NULL THEN
        who := 'lane:' || storm_queue.json_str(p_lane);
        v_auth_code := 'lane_process';
        v_auth_message := 'a lane process (it carries STORM_QUEUE_LANE) may not ' || CASE p_verb
            WHEN 'claim' THEN 'claim a lane' WHEN 'renew' THEN 'renew a lease' WHEN 'finish' THEN 'finish a lane'
            WHEN 'release' THEN 'release a lease' ELSE 'take back leases' END;
    ELSIF v_runner THEN
        who := 'runner:' || session_user;
        IF p_source IS NOT NULL OR p_operator_only THEN
            v_auth_code := 'not_operator';
            v_auth_message := 'role ' || session_user || ' is a runner of this storm: it may claim, renew, finish and '
                || 'release leases and recover expired ones, and nothing more; only the operator (' || v_operator
                || ') or a source the operator declares may change the priority lane';
        ELSIF NOT v_known THEN
            v_auth_code := 'declaration_unreadable';
            v_auth_message := 'the server holds no runner policy of the declaration in force (it cannot be read, or '
                || 'was written other than by storm-queue declare); the operator can record it with storm-queue declare '
                || 'FILE, then ask again';
        END IF;
    ELSE
        who := 'operator:' || v_operator;
    END IF;
    IF v_code IS NULL AND v_known AND (p_ttl IS NOT NULL OR p_ttl_declared) THEN
        SELECT x.code, x.message INTO v_code, v_message
        FROM storm_queue.serve_ttl_refusal(policy, coalesce(p_ttl, (policy->>'ttl')::numeric)) x;
    END IF;
    key := p_key;
    IF p_key IS NOT NULL AND NOT (length(p_key) BETWEEN 1 AND 200 AND p_key COLLATE "C" ~ '^[A-Za-z0-9._:@/+=-]+$') THEN
        key := NULL;
        IF v_code IS NULL THEN
            v_code := 'invalid_key';
            v_message := 'key ' || storm_queue.quoted(p_key) || ' is not 1 to 200 letters, digits or ._:@/+=- characters';
        END IF;
    END IF;
    reason := p_reason;
    IF length(p_reason) > 4096 THEN
        reason := NULL;
        IF v_code IS NULL THEN
            v_code := 'reason_too_long';
            v_message := 'a reason of ' || to_char(length(p_reason), 'FM999,999,999,999') || ' characters is longer '
                || 'than 4,096: shorten it (a reason says why in a sentence or two; link to the rest)';
        END IF;
    END IF;
    v_shape := v_code IS NOT NULL;
    IF NOT v_shape THEN
        v_code := v_auth_code;
        v_message := v_auth_message;
    END IF;
    v_authorised := NOT v_shape AND v_auth_code IS NULL;
    fingerprint := storm_queue.fingerprint(p_verb, p_slug, reason, p_source, p_args);
    PERFORM set_config('lock_timeout', greatest(coalesce(p_wait_ms, 1), 1)::text, true);
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    t := storm_queue.clock_now();
    at := storm_queue.stamp(t);
    v_damage := coalesce(storm_queue.head_damage(), v_withdrawn);
    IF v_damage IS NOT NULL THEN
        IF v_runner THEN
            answer := jsonb_build_object('unknown', 'the server no longer decides by what it folded of the log: '
                || v_damage || '; storm-queue verify says what is wrong, and once the log is sound the operator''s '
                || 'storm-queue upgrade URL re-derives it; nothing was recorded');
        END IF;
        who := NULL;  -- the operator's request path reads the log, and says what is wrong with it
        RETURN;
    END IF;
    IF key IS NOT NULL THEN
        SELECT * INTO k FROM storm_queue.keyed x WHERE x.by = serve_start.who AND x.key = serve_start.key;
        IF FOUND AND k.fingerprint = fingerprint THEN  -- the first answer, repeated; nothing recorded
            v_line := storm_queue.line_jsonb(k.line);
            answer := jsonb_build_object('repeat', convert_from(k.line, 'UTF8'), 'seq', k.seq, 'at', at, 'by', who,
                'lease', (SELECT jsonb_build_object('token', u.lease_token, 'expires', u.expires)
                          FROM storm_queue.run u WHERE u.slug = v_line->>'slug' AND u.lease_token IS NOT NULL
                            AND v_line->>'action' = 'claim'));
            RETURN;
        ELSIF FOUND AND v_code IS NULL THEN
            v_code := 'idempotency_conflict';
            v_message := 'key ' || storm_queue.quoted(key) || ' was first used by ' || who || ' for a different request '
                || '(line ' || k.seq || '); a key names one request: use a new key for a new request';
            v_authorised := true;
        END IF;
    END IF;
    IF v_code IS NOT NULL THEN
        answer := storm_queue.serve_refused(at, who, p_verb, p_slug, v_code, v_message, v_authorised, reason, key,
                                            fingerprint, p_ask);
    END IF;
END
$$;

-- The shape refusal of a slug, a source, a token (service/leases.py:
-- core/shapes.shape_names, shape_token), or NULLs.
CREATE FUNCTION storm_queue.serve_shape(p_slug text, p_source text, p_token numeric, OUT code text, OUT message text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_slug IS NOT NULL AND NOT storm_queue.is_name(p_slug) THEN
        code := 'invalid_slug';
        message := 'slug ' || storm_queue.quoted(p_slug) || ' is not a name: ' || storm_queue.why_not_name(p_slug);
    ELSIF p_source IS NOT NULL AND NOT storm_queue.is_name(p_source) THEN
        code := 'invalid_source';
        message := 'source ' || storm_queue.quoted(p_source) || ' is not a name: ' || storm_queue.why_not_name(p_source);
    ELSIF p_token < 1 THEN
        code := 'invalid_token';
        message := 'token "' || p_token || '" is not a positive whole number; give the token the claim printed';
    END IF;
END
$$;

-- core/runs.py expiries, in the fold's order of runs: an expire for every
-- lease past its expiry at p_at (and a quarantine when it spent the last
-- of p_budget attempts, unless settled or finished), and a quarantine for
-- every lane not held that spent its attempts (unless settled, finished,
-- gone from the queue, or its last attempt finished ok), each one a row of
-- storm_queue.watch: the lines' actions and their other fields.
CREATE FUNCTION storm_queue.serve_expiries(p_at text, p_budget bigint, OUT actions text[], OUT rests text[],
                                           OUT slugs text[])
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rec record;
BEGIN
    actions := '{}';
    rests := '{}';
    slugs := '{}';
    IF NOT EXISTS (SELECT 1 FROM storm_queue.watch u
                   WHERE (u.lease_token IS NOT NULL AND u.expires COLLATE "C" <= p_at COLLATE "C")
                      OR (u.lease_token IS NULL AND u.quarantined IS NULL AND u.attempts >= p_budget
                          AND u.last_end IS DISTINCT FROM 'ok'
                          AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE l.slug = u.slug))) THEN
        RETURN;  -- (asked once, opening no cursor)
    END IF;
    FOR rec IN SELECT u.*, EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = u.slug)
                          OR EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = u.slug) AS done
               FROM storm_queue.watch u
               WHERE (u.lease_token IS NOT NULL AND u.expires COLLATE "C" <= p_at COLLATE "C")
                  OR (u.lease_token IS NULL AND u.quarantined IS NULL AND u.attempts >= p_budget
                      AND u.last_end IS DISTINCT FROM 'ok' AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE l.slug = u.slug))
               ORDER BY u.since LOOP
        IF rec.lease_token IS NOT NULL THEN
            actions := actions || 'expire'::text;
            rests := rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"token":' || rec.lease_token
                               || ',"expired":' || storm_queue.json_str(rec.expires));
            slugs := slugs || rec.slug;
            IF rec.quarantined IS NULL AND rec.attempts >= p_budget AND NOT rec.done THEN
                actions := actions || 'quarantine'::text;
                rests := rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"attempts":' || rec.attempts
                                   || ',"budget":' || p_budget);
                slugs := slugs || rec.slug;
            END IF;
        ELSIF NOT rec.done THEN
            actions := actions || 'quarantine'::text;
            rests := rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"attempts":' || rec.attempts
                               || ',"budget":' || p_budget);
            slugs := slugs || rec.slug;
        END IF;
    END LOOP;
END
$$;

-- core/resolver.py decided's walk: the run order (the priority lane, then
-- queue order from runs_at.open_from) up to the first ready lane at p_at,
-- passing over what is settled, finished (a result row), held or
-- quarantined, and a lane row that is not sound (lane_sound: skipped, as a
-- bad queue.txt line is); the lanes met before it that are blocked on an
-- abandoned dependency (and those dependencies, space-separated). The mark
-- (open_from) moves past the lanes now settled, finished, held or
-- quarantined, each passed over once, not at every claim.
CREATE FUNCTION storm_queue.serve_walk(p_at text, OUT ready text, OUT issue text, OUT blocked text[], OUT gones text[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h storm_queue.runs_at;
    rec record;
    v_gone text[];
    v_slug text;
    v_from bigint;
    v_last bigint;
    v_open bigint;
    v_walked boolean;
BEGIN
    blocked := '{}';
    gones := '{}';
    SELECT * INTO h FROM storm_queue.runs_at;
    FOR v_slug IN SELECT p.slug FROM storm_queue.priority p ORDER BY p.place LOOP
        -- one lane at a time, by its keys: a join of the whole queue would be planned (tables never analysed) as
        -- a scan of every lane and run at every claim
        SELECT l.slug, l.issue, l.deps, u.not_before INTO rec
        FROM storm_queue.lane l
        LEFT JOIN storm_queue.run u ON u.slug = l.slug
        WHERE l.slug = v_slug
          AND storm_queue.lane_sound(l.slug, l.issue, l.deps)
          AND (SELECT true FROM storm_queue.settled s WHERE s.slug = l.slug) IS NULL
          AND (SELECT true FROM storm_queue.result x WHERE x.slug = l.slug) IS NULL
          AND u.lease_token IS NULL AND u.quarantined IS NULL;
        CONTINUE WHEN NOT FOUND;
        v_gone := storm_queue.serve_waits(rec.slug, rec.deps, rec.not_before, p_at);
        IF v_gone IS NULL THEN
            ready := rec.slug;
            issue := rec.issue;
            EXIT;
        ELSIF cardinality(v_gone) > 0 THEN
            blocked := blocked || rec.slug;
            gones := gones || array_to_string(v_gone, ' ');
        END IF;
    END LOOP;
    v_from := h.open_from;
    v_walked := ready IS NULL;
    WHILE ready IS NULL AND v_from IS NOT NULL LOOP  -- queue order, a window of lanes at a time (by pos's index)
        v_last := NULL;
        FOR rec IN
            SELECT w.slug, w.issue, w.deps, w.pos, u.not_before, u.lease_token IS NULL AND u.quarantined IS NULL AS free,
                   (SELECT true FROM storm_queue.settled s WHERE s.slug = w.slug) IS NOT NULL
                   OR (SELECT true FROM storm_queue.result x WHERE x.slug = w.slug) IS NOT NULL AS done,
                   (SELECT true FROM storm_queue.priority p WHERE p.slug = w.slug) IS NOT NULL AS prio,
                   storm_queue.lane_sound(w.slug, w.issue, w.deps) IS TRUE AS sound
            FROM (SELECT l.slug, l.issue, l.deps, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from
                  ORDER BY l.pos LIMIT 64) w
            LEFT JOIN LATERAL (SELECT * FROM storm_queue.run u WHERE u.slug = w.slug LIMIT 1) u ON true  -- by its key
            ORDER BY w.pos
        LOOP
            v_last := rec.pos;
            IF v_open IS NULL AND NOT rec.done AND rec.free IS NOT FALSE THEN  -- the mark: the first lane it cannot pass
                v_open := rec.pos;
            END IF;
            CONTINUE WHEN rec.free IS FALSE OR rec.prio OR rec.done OR NOT rec.sound;
            v_gone := storm_queue.serve_waits(rec.slug, rec.deps, rec.not_before, p_at);
            IF v_gone IS NULL THEN
                ready := rec.slug;
                issue := rec.issue;
                EXIT;
            ELSIF cardinality(v_gone) > 0 THEN
                blocked := blocked || rec.slug;
                gones := gones || array_to_string(v_gone, ' ');
            END IF;
        END LOOP;
        v_from := v_last + 1;
    END LOOP;
    IF NOT v_walked THEN  -- the priority lane named the lane: the mark is walked for (each lane's rows by key)
        v_from := h.open_from;
        LOOP
            v_last := NULL;
            FOR rec IN SELECT l.slug, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from ORDER BY l.pos LIMIT 64 LOOP
                v_last := rec.pos;
                IF NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = rec.slug)
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug)
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.run u WHERE u.slug = rec.slug
                                   AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL)) THEN
                    v_open := rec.pos;
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN v_open IS NOT NULL OR v_last IS NULL;
            v_from := v_last + 1;
        END LOOP;
    END IF;
    IF v_open IS DISTINCT FROM h.open_from AND v_open IS NOT NULL THEN
        PERFORM set_config('storm_queue.folding', 'on', true);
        UPDATE storm_queue.runs_at SET open_from = v_open;
    END IF;
END
$$;

-- core/ledgers.py blocked_result, as next marks the lanes it met (a lane
-- that has a result row keeps it)
CREATE FUNCTION storm_queue.serve_mark_blocked(p_blocked text[], p_gones text[], p_at text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    FOR i IN 1..cardinality(p_blocked) LOOP
        INSERT INTO storm_queue.result (slug, body)
        VALUES (p_blocked[i], jsonb_build_object(
            'completed', false, 'status', 'blocked', 'blocked_on', split_part(p_gones[i], ' ', 1),
            'blocked_on_all', to_jsonb(string_to_array(p_gones[i], ' ')), 'at', p_at, 'by', 'storm-queue next'))
        ON CONFLICT (slug) DO NOTHING;
    END LOOP;
END
$$;

-- claim (service/leases.py claim, core/runs.py plan_claim): p_holder, the
-- holder asked for (NULL: p_default_holder, the client's own name for
-- itself; the request's fingerprint has NULL), p_ttl (NULL: the declared
-- TTL). Take back every orphaned lease (and quarantine what spent its
-- attempts), then decide as core/resolver.py decided does, walking the run
-- order only to the first ready lane; lease it to the holder under the next
-- fencing token when a slot is free and no halt is in force, and mark
-- blocked the lanes met before it. Returns the decision, the lease, the
-- halt met, the last line written and the lanes marked blocked.
CREATE FUNCTION storm_queue.serve_claim(p_holder text, p_default_holder text, p_ttl numeric, p_reason text, p_key text,
                                        p_lane text, p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    w record;
    e record;
    h storm_queue.runs_at;
    r storm_queue.run;
    v_holder text := coalesce(p_holder, p_default_holder);
    v_code text;
    v_message text;
    v_budget bigint;
    v_lines text[] := '{}';
    v_unattended boolean;
    v_finished text[];
    v_decision text;
    v_token bigint;
    v_expires text;
    v_ttl integer;
    v_due text;
    v_held bigint;
    v_attempt integer;
BEGIN
    IF v_holder IS NULL OR length(v_holder) > 4096 OR scale(p_ttl) > 0 THEN
        RAISE EXCEPTION 'a claim names its holder, of at most 4,096 characters, and a TTL in whole seconds'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT x.code, x.message INTO v_code, v_message FROM storm_queue.serve_shape(NULL, p_source, NULL) x;
    IF v_code IS NULL AND NOT storm_queue.is_name(v_holder) THEN
        v_code := 'invalid_holder';
        v_message := 'holder ' || storm_queue.quoted(v_holder) || ' is not a name: ' || storm_queue.why_not_name(v_holder);
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('claim', NULL, p_reason, p_key, p_lane, p_source,
        coalesce(storm_queue.json_str(p_holder), 'null') || ', ' || coalesce(p_ttl::text, 'null'),
        v_code, v_message, p_ttl, true, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    v_ttl := coalesce(p_ttl, (b.policy->>'ttl')::numeric);  -- (within the declared window: serve_start refused it else)
    v_budget := (b.policy->>'attempts')::bigint;
    SELECT * INTO e FROM storm_queue.serve_expiries(b.at, v_budget);
    IF cardinality(e.actions) > 0 THEN  -- folded at once (the trigger): what follows decides on the storm after them
        v_lines := storm_queue.serve_append(b.at, b.who, e.actions, e.rests, false, NULL, NULL, NULL, p_ask);
    END IF;
    SELECT * INTO w FROM storm_queue.serve_walk(b.at);
    SELECT * INTO h FROM storm_queue.runs_at;
    v_unattended := (b.policy->>'unattended')::boolean;
    -- core/runs.py next_due: the first moment after now that time alone changes the decision (claim --wait)
    -- (and the slots taken: the leases held)
    SELECT (SELECT min(x.t COLLATE "C") FROM (
                SELECT expires AS t FROM storm_queue.watch WHERE lease_token IS NOT NULL
                UNION ALL SELECT not_before FROM storm_queue.watch WHERE not_before IS NOT NULL) x
            WHERE x.t COLLATE "C" > b.at COLLATE "C"),
           (SELECT count(*) FROM storm_queue.watch WHERE lease_token IS NOT NULL)
    INTO v_due, v_held;
    IF NOT v_unattended OR w.ready IS NULL OR v_held >= (b.policy->>'slots')::bigint THEN
        -- the finished lanes, in run order, only when the decision names them
        v_finished := ARRAY(
            SELECT l.slug FROM storm_queue.lane l
            JOIN storm_queue.result x ON x.slug = l.slug
            LEFT JOIN storm_queue.priority p ON p.slug = l.slug
            LEFT JOIN storm_queue.run u ON u.slug = l.slug
            WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
              AND storm_queue.lane_sound(l.slug, l.issue, l.deps)
              AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
            ORDER BY p.place IS NULL, p.place, l.pos);
    END IF;
    IF h.halt_seq IS NOT NULL THEN
        v_decision := 'halted';
    ELSIF cardinality(v_finished) > 0 AND NOT v_unattended THEN
        v_decision := 'review ' || array_to_string(v_finished, ' ');
    ELSIF w.ready IS NULL THEN  -- wait while any lane is left that is not settled
        v_decision := CASE WHEN EXISTS (SELECT 1 FROM storm_queue.lane l
                                        WHERE storm_queue.lane_sound(l.slug, l.issue, l.deps)
                                          AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug))
                           THEN array_to_string('{wait}'::text[] || v_finished, ' ') ELSE 'empty' END;
    ELSIF v_held >= (b.policy->>'slots')::bigint THEN
        v_decision := array_to_string('{wait}'::text[] || v_finished, ' ');
    ELSE
        SELECT * INTO r FROM storm_queue.run WHERE slug = w.ready;
        v_token := greatest(coalesce(r.token, 0), h.token_floor) + 1;
        v_attempt := coalesce(r.attempts, 0) + 1;
        v_expires := storm_queue.stamp(b.t + v_ttl);
        v_lines := v_lines || storm_queue.serve_append(b.at, b.who, ARRAY['claim'], ARRAY[
            ',"slug":' || storm_queue.json_str(w.ready) || ',"issue":' || storm_queue.json_str(w.issue)
            || ',"holder":' || storm_queue.json_str(v_holder) || ',"token":' || v_token || ',"ttl":' || v_ttl
            || ',"expires":' || storm_queue.json_str(v_expires) || ',"attempt":' || v_attempt
            || storm_queue.carried(b.reason, b.key, b.fingerprint)], true, 1, b.key, b.fingerprint, p_ask);
        -- the claim line folded, as fold_line folds it: the lease, one more attempt, its token the last
        INSERT INTO storm_queue.run AS u (slug, since, token, holder, lease_token, lease_by, claimed, expires, ttl,
                                          attempts, last_token)
        VALUES (w.ready, (SELECT seq FROM storm_queue.state), v_token, v_holder, v_token, b.who, b.at, v_expires, v_ttl,
                v_attempt, v_token)
        ON CONFLICT (slug) DO UPDATE SET token = greatest(u.token, EXCLUDED.token), holder = EXCLUDED.holder,
            lease_token = EXCLUDED.lease_token, lease_by = EXCLUDED.lease_by, claimed = EXCLUDED.claimed,
            expires = EXCLUDED.expires, ttl = EXCLUDED.ttl, attempts = EXCLUDED.attempts,
            last_token = EXCLUDED.last_token, last_end = NULL;
        v_decision := 'run ' || w.ready || ' ' || w.issue || ' ' || v_token;
    END IF;
    PERFORM storm_queue.serve_mark_blocked(w.blocked, w.gones, b.at);
    RETURN jsonb_build_object(
        'outcome', 'done', 'decision', v_decision, 'slug', CASE WHEN v_token IS NOT NULL THEN w.ready END,
        'token', v_token, 'expires', v_expires, 'at', b.at, 'by', b.who, 'due', v_due,
        'halt', CASE WHEN h.halt_seq IS NOT NULL THEN jsonb_build_object(
            'seq', h.halt_seq, 'at', h.halt_at, 'by', h.halt_by, 'reason', h.halt_reason) END,
        'line', v_lines[cardinality(v_lines)], 'blocked', to_jsonb(w.blocked));
END
$$;

-- renew (core/runs.py plan_renew): extend the live lease on p_slug held
-- under p_token by p_ttl (NULL: the TTL it was claimed or last renewed with,
-- else the declared one) from now, within max_lease_age of its claim; or
-- record why not.
CREATE FUNCTION storm_queue.serve_renew(p_slug text, p_token numeric, p_ttl numeric, p_reason text, p_key text,
                                        p_lane text, p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    s record;
    f record;
    r storm_queue.run;
    v_ttl numeric;
    v_limit double precision;
    v_expires text;
    v_lines text[];
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) > 0 OR scale(p_ttl) > 0 THEN
        RAISE EXCEPTION 'a renew names its lane, and a token and TTL in whole numbers' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, p_token);
    SELECT * INTO b FROM storm_queue.serve_start('renew', p_slug, p_reason, p_key, p_lane, p_source,
        p_token || ', ' || coalesce(p_ttl::text, 'null'), s.code, s.message, p_ttl, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'renew', b.at, b.who);
    IF f.code IS NULL THEN
        v_ttl := coalesce(p_ttl, nullif(r.ttl, 0), (b.policy->>'ttl')::numeric);
        SELECT * INTO f FROM storm_queue.serve_ttl_refusal(b.policy, v_ttl);
    END IF;
    IF f.code IS NULL THEN
        v_limit := storm_queue.stamp_seconds(r.claimed) + (b.policy->>'max_lease_age')::bigint;
        IF b.t + v_ttl > v_limit THEN
            f.code := 'lease_age_exceeded';
            f.message := 'the lease on ' || p_slug || ' was claimed at ' || r.claimed || ' and may not be renewed past '
                || storm_queue.stamp(v_limit) || ' (storm.toml [runner] max_lease_age ' || (b.policy->>'max_lease_age')
                || ' s); finish the lane, or ask for a shorter TTL';
        END IF;
    END IF;
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(b.at, b.who, 'renew', p_slug, f.code, f.message, true, b.reason, b.key,
                                         b.fingerprint, p_ask);
    END IF;
    v_expires := storm_queue.stamp(b.t + v_ttl);
    v_lines := storm_queue.serve_append(b.at, b.who, ARRAY['renew'], ARRAY[
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"ttl":' || v_ttl
        || ',"expires":' || storm_queue.json_str(v_expires) || storm_queue.carried(b.reason, b.key, b.fingerprint)],
        true, 1, b.key, b.fingerprint, p_ask);
    UPDATE storm_queue.run SET expires = v_expires, ttl = v_ttl WHERE slug = p_slug;  -- folded: the live lease renewed
    RETURN jsonb_build_object('outcome', 'done', 'message',
        'renewed ' || p_slug || ' token ' || p_token || ' until ' || v_expires,
        'token', p_token, 'expires', v_expires, 'line', v_lines[1]);
END
$$;

-- The lines that end the live lease of r (p_action: finish, release) and
-- their fold (core/runs.py _ended): the line (its fields p_rest, then a
-- finish's backoff, then p_tail: the reason, key and fingerprint), then a
-- quarantine when it spent the lane's last attempt and the lane has not
-- finished (p_end not ok, neither settled nor with a result row); the lease
-- goes, the attempt ends (p_end). A failure that does not quarantine, under
-- p_backoff seconds (storm_queue.backoff: 0, none), carries not_before, the
-- lane's schedule (core/runs.py plan_finish). Returns the lines, whether it
-- quarantined, and the schedule it set.
CREATE FUNCTION storm_queue.serve_ended(r storm_queue.run, p_at text, p_by text, p_action text, p_rest text, p_tail text,
                                        p_end text, p_budget bigint, p_backoff bigint, p_key text, p_fingerprint text,
                                        p_ask text, OUT lines text[], OUT parked boolean, OUT not_before text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_actions text[] := ARRAY[p_action];
    v_rests text[];
BEGIN
    parked := r.quarantined IS NULL AND r.attempts >= p_budget AND p_end <> 'ok'
        AND NOT EXISTS (SELECT 1 FROM storm_queue.settled WHERE slug = r.slug)
        AND NOT EXISTS (SELECT 1 FROM storm_queue.result WHERE slug = r.slug);
    IF NOT parked AND p_backoff > 0 THEN
        not_before := storm_queue.stamp(storm_queue.stamp_seconds(p_at) + p_backoff);
    END IF;
    v_rests := ARRAY[p_rest || coalesce(',"not_before":' || storm_queue.json_str(not_before), '') || p_tail];
    IF parked THEN
        v_actions := v_actions || 'quarantine'::text;
        v_rests := v_rests || (',"slug":' || storm_queue.json_str(r.slug) || ',"attempts":' || r.attempts
            || ',"budget":' || p_budget);
    END IF;
    lines := storm_queue.serve_append(p_at, p_by, v_actions, v_rests, true, 1, p_key, p_fingerprint, p_ask);
    -- its lines folded, as fold_line folds them: the live lease's attempt ends, the lease goes (and the
    -- quarantine, or the backoff's schedule)
    PERFORM set_config('storm_queue.folding', 'on', true);
    UPDATE storm_queue.run
    SET last_end = CASE WHEN last_token = r.lease_token AND last_end IS NULL THEN p_end ELSE last_end END,
        holder = NULL, lease_token = NULL, lease_by = NULL, claimed = NULL, expires = NULL, ttl = NULL,
        quarantined = CASE WHEN parked THEN p_at ELSE quarantined END,
        not_before = coalesce(serve_ended.not_before, run.not_before)
    WHERE slug = r.slug;
END
$$;

-- finish (core/runs.py plan_finish): end the live lease on p_slug held under
-- p_token with p_result (ok: the lane's result row, finished, awaiting
-- review; failed: claimable again, or quarantined once its attempts are
-- spent), with p_note (at most 4,096 characters, else note_too_long); or
-- record why not.
CREATE FUNCTION storm_queue.serve_finish(p_slug text, p_token numeric, p_result text, p_note text, p_reason text,
                                         p_key text, p_lane text, p_source text, p_wait_ms integer, p_ask text)
RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    s record;
    f record;
    d record;
    r storm_queue.run;
    v_budget bigint;
    v_words text;
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) > 0 OR p_result IS NULL OR length(p_result) > 4096 THEN
        RAISE EXCEPTION 'a finish names its lane, a token in a whole number and a result' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, p_token);
    IF s.code IS NULL AND p_result NOT IN ('ok', 'failed') THEN
        s.code := 'invalid_result';
        s.message := 'result ' || storm_queue.quoted(p_result) || ' is neither ok nor failed';
    ELSIF s.code IS NULL AND length(p_note) > 4096 THEN
        s.code := 'note_too_long';
        s.message := 'a note of ' || to_char(length(p_note), 'FM999,999,999,999') || ' characters is longer than 4,096: '
            || 'shorten it (a note says how the lane ended; keep the rest in the lane''s own output)';
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('finish', p_slug, p_reason, p_key, p_lane, p_source,
        p_token || ', ' || storm_queue.json_str(p_result) || ', ' || coalesce(storm_queue.json_str(p_note), 'null'),
        s.code, s.message, NULL, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'finish', b.at, b.who);
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(b.at, b.who, 'finish', p_slug, f.code, f.message, true, b.reason, b.key,
                                         b.fingerprint, p_ask);
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    IF p_result = 'ok' THEN  -- core/ledgers.finished_result, before its line (as the request path writes it)
        INSERT INTO storm_queue.result (slug, body)
        VALUES (p_slug, jsonb_build_object('completed', true, 'status', 'ok', 'token', p_token, 'holder', r.holder,
                                           'note', p_note, 'at', b.at))
        ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body;
    END IF;
    SELECT * INTO d FROM storm_queue.serve_ended(r, b.at, b.who, 'finish',
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"result":' || storm_queue.json_str(p_result)
        || coalesce(',"note":' || storm_queue.json_str(p_note), ''), storm_queue.carried(b.reason, b.key, b.fingerprint),
        p_result, v_budget, CASE WHEN p_result = 'failed' THEN storm_queue.backoff(b.policy, r.attempts) ELSE 0 END,
        b.key, b.fingerprint, p_ask);
    IF p_result = 'ok' THEN
        v_words := p_slug || ' finished ok (token ' || p_token || '); it awaits review';
    ELSIF d.parked THEN
        v_words := p_slug || ' failed (token ' || p_token || ') and is quarantined after ' || r.attempts || ' attempts';
    ELSE
        v_words := p_slug || ' failed (token ' || p_token || '); attempt ' || r.attempts || ' of ' || v_budget
            || ', it will be claimed again' || coalesce(' after ' || d.not_before, '');
    END IF;
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'token', p_token, 'line', d.lines[1]);
END
$$;

-- release (core/runs.py plan_release): the holder gives its live lease on
-- p_slug back: the lane may be claimed again at once, the attempt stays
-- spent (one that spent the last attempt quarantines the lane); or record
-- why not.
CREATE FUNCTION storm_queue.serve_release(p_slug text, p_token numeric, p_reason text, p_key text, p_lane text,
                                          p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    s record;
    f record;
    d record;
    r storm_queue.run;
    v_budget bigint;
BEGIN
    IF p_slug IS NULL OR p_token IS NULL OR scale(p_token) > 0 THEN
        RAISE EXCEPTION 'a release names its lane and a token in a whole number' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, p_token);
    SELECT * INTO b FROM storm_queue.serve_start('release', p_slug, p_reason, p_key, p_lane, p_source, p_token::text,
        s.code, s.message, NULL, false, false, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    SELECT * INTO f FROM storm_queue.serve_fence(r, p_slug, p_token, 'release', b.at, b.who);
    IF f.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(b.at, b.who, 'release', p_slug, f.code, f.message, true, b.reason, b.key,
                                         b.fingerprint, p_ask);
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    SELECT * INTO d FROM storm_queue.serve_ended(r, b.at, b.who, 'release',
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"holder":' || storm_queue.json_str(r.holder),
        storm_queue.carried(b.reason, b.key, b.fingerprint), 'released', v_budget, 0, b.key, b.fingerprint, p_ask);
    RETURN jsonb_build_object('outcome', 'done', 'token', p_token, 'line', d.lines[1], 'message', CASE WHEN d.parked
        THEN p_slug || ' is quarantined: released (token ' || p_token || ') after ' || r.attempts || ' attempts'
        ELSE 'released ' || p_slug || ' (token ' || p_token || '); it may be claimed again (attempt ' || r.attempts
             || ' of ' || v_budget || ' spent)' END);
END
$$;

-- recover without a lane (core/runs.py plan_recover, expiries): take back
-- every orphaned lease (and quarantine what spent its attempts). Naming a
-- lane (p_slug), and p_force with it, is the operator's: a runner's is
-- refused not_operator, recorded; the operator's takes its request path.
CREATE FUNCTION storm_queue.serve_recover(p_slug text, p_force boolean, p_reason text, p_key text, p_lane text,
                                          p_source text, p_wait_ms integer, p_ask text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    s record;
    e record;
    v_lines text[];
    v_taken text[] := '{}';
    v_parked text[] := '{}';
    v_words text;
BEGIN
    IF coalesce(p_force, false) AND p_slug IS NULL THEN
        RAISE EXCEPTION 'recover --force names its lane' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_slug IS NOT NULL AND session_user = (SELECT operator FROM storm_queue.storm) THEN
        RETURN NULL;  -- the operator's recover SLUG (a marker, a live lease with --force): its request path
    END IF;
    SELECT * INTO s FROM storm_queue.serve_shape(p_slug, p_source, NULL);
    IF s.code IS NULL AND coalesce(p_force, false) AND btrim(coalesce(p_reason, ''), E' \t\n\r\x0b\x0c') = '' THEN
        s.code := 'blank_reason';
        s.message := 'recover --force needs --reason TEXT saying why the holder is gone';
    END IF;
    SELECT * INTO b FROM storm_queue.serve_start('recover', p_slug, p_reason, p_key, p_lane, p_source,
        CASE WHEN p_force THEN 'true' ELSE '' END, s.code, s.message, NULL, false, p_slug IS NOT NULL, p_wait_ms, p_ask);
    IF b.who IS NULL OR b.answer IS NOT NULL THEN
        RETURN b.answer;
    END IF;
    SELECT * INTO e FROM storm_queue.serve_expiries(b.at, (b.policy->>'attempts')::bigint);
    IF cardinality(e.actions) = 0 THEN
        RETURN jsonb_build_object('outcome', 'noop', 'message', 'no orphaned lease to take back', 'line', NULL,
                                  'by', b.who);
    END IF;
    e.rests[1] := e.rests[1] || storm_queue.carried(b.reason, b.key, b.fingerprint);
    v_lines := storm_queue.serve_append(b.at, b.who, e.actions, e.rests, false, 1, b.key, b.fingerprint, p_ask);
    FOR i IN 1..cardinality(e.actions) LOOP
        IF e.actions[i] = 'expire' THEN
            v_taken := v_taken || e.slugs[i];
        ELSE
            v_parked := v_parked || e.slugs[i];
        END IF;
    END LOOP;
    v_words := CASE WHEN cardinality(v_taken) > 0 THEN 'took back ' || array_to_string(v_taken, ' ')
                    ELSE 'no orphaned lease to take back' END
        || CASE WHEN cardinality(v_parked) > 0 THEN '; quarantined ' || array_to_string(v_parked, ' ') ELSE '' END;
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'line', v_lines[1]);
END
$$;

-- next's blocked marks (service/storm.py next, store.decided), as a runner
-- role's next writes them: computed here as the claim's walk computes them
-- (serve_walk, at the storm's time), never given by the caller. Returns the
-- lanes marked.
CREATE FUNCTION storm_queue.serve_decided(p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    w record;
    v_at text;
BEGIN
    IF session_user IS DISTINCT FROM (SELECT operator FROM storm_queue.storm)
       AND NOT EXISTS (SELECT 1 FROM storm_queue.member m WHERE m.role = session_user AND m.kind = 'runner') THEN
        RAISE EXCEPTION 'role % is not a runner of this storm', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('lock_timeout', greatest(coalesce(p_wait_ms, 1), 1)::text, true);
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    IF storm_queue.head_damage() IS NOT NULL OR (SELECT withdrawn FROM storm_queue.storm) IS NOT NULL THEN
        RETURN jsonb_build_object('marked', '[]'::jsonb);
    END IF;
    v_at := storm_queue.stamp(storm_queue.clock_now());
    SELECT * INTO w FROM storm_queue.serve_walk(v_at);
    PERFORM storm_queue.serve_mark_blocked(w.blocked, w.gones, v_at);
    RETURN jsonb_build_object('marked', to_jsonb(w.blocked));
END
$$;

-- the keys of the lines already recorded, folded in order (the runs, the
-- priority lane and the waivers were folded as they were written)
DO $$
DECLARE
    v_seq bigint;
    v_line bytea;
    e jsonb;
BEGIN
    PERFORM set_config('storm_queue.folding', 'on', true);
    FOR v_seq, v_line IN SELECT x.seq, x.line FROM storm_queue.event x ORDER BY x.seq LOOP
        e := storm_queue.line_jsonb(v_line);
        PERFORM storm_queue.fold_keys(e->>'by', e->>'key', e->>'fingerprint', v_seq, e->>'at', v_line);
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

-- the roles granted before this version: a runner executes its serving functions (and no other), and every
-- granted role reads the tables it reads (grant_select), but the lock and the clock (revoke_operators_tables)
DO $$
DECLARE
    v_role text;
    v_kind text;
BEGIN
    FOR v_role, v_kind IN SELECT m.role, m.kind FROM storm_queue.member m JOIN pg_catalog.pg_roles r ON r.rolname = m.role LOOP
        EXECUTE format('GRANT SELECT ON storm_queue.keyed, storm_queue.unprintable, storm_queue.asked, '
                       'storm_queue.line_field TO %I', v_role);
        IF v_kind = 'runner' THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION '
                           'storm_queue.serve_claim(text, text, numeric, text, text, text, text, integer, text), '
                           'storm_queue.serve_renew(text, numeric, numeric, text, text, text, text, integer, text), '
                           'storm_queue.serve_finish(text, numeric, text, text, text, text, text, text, integer, text), '
                           'storm_queue.serve_release(text, numeric, text, text, text, text, integer, text), '
                           'storm_queue.serve_recover(text, boolean, text, text, text, text, integer, text), '
                           'storm_queue.serve_decided(integer) TO %I', v_role);
        END IF;
    END LOOP;
END
$$;

UPDATE storm_queue.version SET version = 9;

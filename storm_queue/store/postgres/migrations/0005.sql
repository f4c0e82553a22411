-- Version 5: runner requests in one round trip (issue 21, item 1). A
-- runner's claim, renew and finish are each one call to a function below,
-- which takes the storm's lock inside the server, decides, appends the
-- chained line(s) and writes the rows, and returns what the command
-- prints: the lock is never held while the client runs. The lines are
-- those the Python writer (core/framing.py) would write, byte for byte;
-- what the functions decide is what core/runs.py and core/resolver.py
-- decide (a property test holds them to it: tests/database/test_served.py),
-- from what a trigger folds of every line any writer inserts. A function
-- answers NULL, having written nothing, for what it leaves to the Python
-- request path: a caller that is neither the operator nor a runner, a
-- declaration the server has no policy of, a TTL asked for outside the
-- declared window.

-- the declaration's [runner] policy as JSON (core/config.Policy), written by
-- the Python that parsed it, and the sha256 of the declaration text it was
-- parsed from (NULL for none); a policy of another text (a hand edit of the
-- storm row included) or none is not used: the request takes the Python path
ALTER TABLE storm_queue.storm ADD COLUMN runner jsonb, ADD COLUMN runner_for text;

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
    open_from bigint NOT NULL DEFAULT -9223372036854775808
);
INSERT INTO storm_queue.runs_at (id) VALUES (1);

-- A settled or result row deleted (or changed), a lane changed, or a lane
-- inserted before the mark: the mark goes back to the queue's start (the
-- least bigint: a lane's pos may be anything a hand edit gave it).
CREATE FUNCTION storm_queue.open_again() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.pos >= (SELECT open_from FROM storm_queue.runs_at) THEN
            RETURN NULL;
        END IF;
    END IF;
    UPDATE storm_queue.runs_at SET open_from = -9223372036854775808 WHERE open_from <> -9223372036854775808;
    RETURN NULL;
END
$$;
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

-- core/fold.py Fold._shift: the lanes an event moved join the end of the
-- priority lane (each keeping its place if it has one), the lanes it removed leave it
CREATE FUNCTION storm_queue.fold_shift(e jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_slug text;
BEGIN
    IF jsonb_typeof(e->'moved') = 'array' THEN
        FOR v_slug IN SELECT value FROM jsonb_array_elements_text(e->'moved') WITH ORDINALITY ORDER BY ordinality LOOP
            INSERT INTO storm_queue.priority (slug, place)
            VALUES (v_slug, coalesce((SELECT max(place) FROM storm_queue.priority), 0) + 1)
            ON CONFLICT (slug) DO NOTHING;
        END LOOP;
    END IF;
    IF jsonb_typeof(e->'removed') = 'array' THEN
        DELETE FROM storm_queue.priority WHERE slug IN (SELECT jsonb_array_elements_text(e->'removed'));
    END IF;
END
$$;

-- One line of the log folded into storm_queue.run and runs_at, as
-- core/fold.py Fold.step folds it (the runner actions, a push or bump
-- that schedules, a reset's floor, a halt and its end).
CREATE FUNCTION storm_queue.fold_line(p_line bytea) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_text text := convert_from(p_line, 'UTF8');
    v_action text := substring(v_text FROM '"action":"([a-z]+)"');
    e jsonb;
    r storm_queue.run%ROWTYPE;
    v_token bigint;
BEGIN
    IF v_action IS NULL OR v_action NOT IN ('claim', 'renew', 'finish', 'expire', 'recover', 'release', 'cancel',
                                            'quarantine', 'unpark',
                                            'schedule', 'push', 'bump', 'unbump', 'waive', 'adopt', 'reset', 'halt',
                                            'resume') THEN
        RETURN;
    END IF;
    IF position('\u0000' IN v_text) > 0 THEN  -- jsonb holds no NUL; no field folded here carries one
        v_text := replace(v_text, '\u0000', '\ufffd');
    END IF;
    e := v_text::jsonb;
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
            INSERT INTO storm_queue.run (slug, since, not_before) VALUES (e->>'slug', (e->>'seq')::bigint, e->>'not_before')
            ON CONFLICT (slug) DO UPDATE SET not_before = EXCLUDED.not_before;
        END IF;
        RETURN;
    ELSIF v_action = 'reset' THEN
        UPDATE storm_queue.runs_at SET token_floor = greatest(token_floor, coalesce((e->>'abandons')::bigint, 0));
        RETURN;
    ELSIF v_action = 'halt' THEN
        UPDATE storm_queue.runs_at
        SET halt_seq = (e->>'seq')::bigint, halt_at = e->>'at', halt_by = e->>'by', halt_reason = e->>'reason';
        RETURN;
    ELSIF v_action = 'resume' THEN
        UPDATE storm_queue.runs_at SET halt_seq = NULL, halt_at = NULL, halt_by = NULL, halt_reason = NULL;
        RETURN;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = e->>'slug';
    IF NOT FOUND THEN
        r.slug := e->>'slug';
        r.since := (e->>'seq')::bigint;
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

CREATE FUNCTION storm_queue.event_folded() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM storm_queue.fold_line(NEW.line);
    RETURN NULL;
END
$$;
CREATE TRIGGER event_folded AFTER INSERT ON storm_queue.event
    FOR EACH ROW EXECUTE FUNCTION storm_queue.event_folded();

-- A hand edit of the log (an UPDATE or DELETE of event rows: only a session
-- that disabled event_append_only can make one) withdraws the runner policy,
-- so that every runner request takes the Python path, which reads the log
-- and says what is wrong with it, as it always did; the folded tables no
-- longer speak for the log. An upgrade or a new declaration writes it again.
CREATE FUNCTION storm_queue.event_edited() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE storm_queue.storm SET runner = NULL, runner_for = NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER event_edited AFTER UPDATE OR DELETE ON storm_queue.event
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.event_edited();

-- the lines already recorded, folded in order
DO $$
DECLARE
    v_line bytea;
BEGIN
    FOR v_line IN SELECT line FROM storm_queue.event ORDER BY seq LOOP
        PERFORM storm_queue.fold_line(v_line);
    END LOOP;
END
$$;

-- A text as a JSON string exactly as Python's json encoder writes it with
-- ensure_ascii (core/jsoncodec.dumps): " and \ escaped, \n \r \t \b \f by
-- name, every other character outside space..~ as \uXXXX (lowercase hex; a
-- character past U+FFFF as its surrogate pair).
CREATE FUNCTION storm_queue.json_str(p text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_out text := '"';
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
            WHEN v_c = '"' THEN '\"'
            WHEN v_c = '\' THEN '\\'
            WHEN v_n = 10 THEN '\n'
            WHEN v_n = 13 THEN '\r'
            WHEN v_n = 9 THEN '\t'
            WHEN v_n = 8 THEN '\b'
            WHEN v_n = 12 THEN '\f'
            WHEN v_n BETWEEN 32 AND 126 THEN v_c
            WHEN v_n < 65536 THEN '\u' || lpad(to_hex(v_n), 4, '0')
            ELSE '\u' || to_hex(55296 + ((v_n - 65536) >> 10)) || '\u' || to_hex(56320 + ((v_n - 65536) & 1023))
        END;
    END LOOP;
    RETURN v_out || '"';
END
$$;

-- The stamp of the POSIX time p_t, as core/clock.stamp makes it (UTC,
-- microseconds rounded half to even, as Python's round and float8's round).
CREATE FUNCTION storm_queue.stamp(p_t double precision) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_whole bigint := floor(p_t);
    v_micro bigint := round((p_t - v_whole) * 1000000.0::double precision);
BEGIN
    IF v_micro = 1000000 THEN
        v_whole := v_whole + 1;
        v_micro := 0;
    END IF;
    RETURN to_char(to_timestamp(v_whole) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '.'
        || lpad(v_micro::text, 6, '0') || 'Z';
END
$$;

-- The POSIX time of a stamp, as core/clock.seconds gives it (the whole
-- microseconds over a million, as one correctly rounded division).
CREATE FUNCTION storm_queue.stamp_seconds(p_stamp text) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT (extract(epoch FROM (p_stamp::timestamptz)) * 1000000)::bigint::double precision / 1000000.0::double precision
$$;

-- The start of a request a function serves: who asks (operator:OPERATOR,
-- or runner:ROLE for a role the operator granted as a runner), the storm's
-- lock taken (waiting at most p_wait_ms), and the declared runner policy.
-- who is NULL, and nothing is locked or written, for anyone else; it is
-- NULL too when the server has no policy of the declaration in force.
CREATE FUNCTION storm_queue.serve_begin(p_wait_ms integer, OUT who text, OUT policy jsonb)
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
    PERFORM pg_advisory_xact_lock({lock_keys});
    SELECT s.runner, s.runner_for, encode(sha256(convert_to(s.declaration, 'UTF8')), 'hex')
    INTO policy, v_for, v_sha FROM storm_queue.storm s;
    IF policy IS NULL OR v_for IS DISTINCT FROM v_sha THEN
        who := NULL;
    END IF;
END
$$;

-- Number, stamp and chain the lines of one request after the log's head,
-- as core/framing.frame does (each body given as its action and the JSON of
-- its other fields, each led by a comma), insert them, move the head, and
-- return the lines.
CREATE FUNCTION storm_queue.serve_append(p_at text, p_by text, p_actions text[], p_rests text[]) RETURNS text[]
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_digest text;
    v_line text;
    v_lines text[] := '{}';
BEGIN
    SELECT seq, digest INTO v_seq, v_digest FROM storm_queue.state;
    FOR i IN 1..array_length(p_actions, 1) LOOP
        v_seq := v_seq + 1;
        v_line := '{"v":1,"seq":' || v_seq || ',"at":' || storm_queue.json_str(p_at) || ',"action":'
            || storm_queue.json_str(p_actions[i]) || ',"by":' || storm_queue.json_str(p_by) || ',"prev":'
            || coalesce(storm_queue.json_str(v_digest), 'null') || p_rests[i] || '}' || chr(10);
        INSERT INTO storm_queue.event (seq, line) VALUES (v_seq, convert_to(v_line, 'UTF8'));
        v_digest := encode(sha256(convert_to(v_line, 'UTF8')), 'hex');
        v_lines := v_lines || v_line;
    END LOOP;
    UPDATE storm_queue.state SET seq = v_seq, digest = v_digest;
    RETURN v_lines;
END
$$;

-- A refusal's line (core/passage: action refused, by an admitted caller)
-- recorded, and the answer: what serve_renew and serve_finish return.
CREATE FUNCTION storm_queue.serve_refused(p_at text, p_by text, p_verb text, p_slug text, p_code text,
                                          p_message text, p_reason text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lines text[];
BEGIN
    v_lines := storm_queue.serve_append(p_at, p_by, ARRAY['refused'], ARRAY[
        ',"requested":' || storm_queue.json_str(p_verb) || ',"slug":' || storm_queue.json_str(p_slug)
        || ',"code":' || storm_queue.json_str(p_code) || ',"message":' || storm_queue.json_str(p_message)
        || ',"authorised":true' || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')]);
    RETURN jsonb_build_object('outcome', 'refused', 'code', p_code, 'message', p_message, 'line', v_lines[1]);
END
$$;

-- core/runs.py _fence: why a runner's token does not hold the live lease
-- on the lane (the words of a stale_fence refusal, or of a lane_cancelled
-- one led by 'lane_cancelled:'), or NULL when it does.
CREATE FUNCTION storm_queue.serve_fence(r storm_queue.run, p_slug text, p_token bigint, p_verb text, p_now text)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_why text;
BEGIN
    IF r.lease_token = p_token AND r.expires COLLATE "C" > p_now COLLATE "C" THEN
        RETURN NULL;
    END IF;
    IF r.cancelled_at IS NOT NULL AND p_token = ANY (r.cancelled_tokens) THEN  -- lane_cancelled: see serve_refusal
        RETURN 'lane_cancelled:' || p_slug || ' was cancelled by ' || r.cancelled_by || ' at ' || r.cancelled_at
            || coalesce(' (' || nullif(r.cancelled_reason, '') || ')', '') || ', which revoked the lease of token '
            || p_token || '; a runner may not ' || p_verb || ' it: stop its work (the lane is settled abandoned)';
    END IF;
    IF r.lease_token IS NULL THEN
        v_why := p_slug || ' holds no lease'
            || CASE WHEN coalesce(r.token, 0) <> 0 THEN ' (its last token was ' || r.token || ')' ELSE '' END;
    ELSIF r.lease_token <> p_token THEN
        v_why := 'token ' || p_token || ' is ' || CASE WHEN p_token < r.lease_token THEN 'older' ELSE 'newer' END
            || ' than the live lease''s token ' || r.lease_token || ' on ' || p_slug;
    ELSIF r.expires COLLATE "C" <= p_now COLLATE "C" THEN
        v_why := 'the lease of token ' || p_token || ' on ' || p_slug || ' expired at ' || r.expires;
    ELSE
        RETURN NULL;
    END IF;
    RETURN v_why || '; a runner that lost its lease may not ' || p_verb || ' the lane: stop its work and claim again';
END
$$;

-- core/runs.py ttl_refusal: the code and words refusing a TTL outside the
-- declared window, or NULL.
CREATE FUNCTION storm_queue.serve_ttl_refusal(p_runner jsonb, p_ttl integer, OUT code text, OUT message text)
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

-- renew, as core/runs.py plan_renew and service/leases.py renew: extend the
-- live lease on p_slug held under p_token by p_ttl (NULL: the TTL it was
-- claimed or last renewed with, else the declared one) from p_t (POSIX
-- seconds, the caller's clock, as every line's time is), within
-- max_lease_age of its claim; or record why not.
CREATE FUNCTION storm_queue.serve_renew(p_slug text, p_token bigint, p_ttl integer, p_reason text,
                                        p_t double precision, p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    r storm_queue.run;
    t record;
    v_at text := storm_queue.stamp(p_t);
    v_why text;
    v_ttl integer;
    v_limit double precision;
    v_expires text;
    v_lines text[];
BEGIN
    SELECT * INTO b FROM storm_queue.serve_begin(p_wait_ms);
    IF b.who IS NULL OR (p_ttl IS NOT NULL AND (storm_queue.serve_ttl_refusal(b.policy, p_ttl)).code IS NOT NULL) THEN
        RETURN NULL;  -- not a caller it serves, or a TTL the request path refuses as asked
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    v_why := storm_queue.serve_fence(r, p_slug, p_token, 'renew', v_at);
    IF v_why IS NOT NULL THEN
        RETURN storm_queue.serve_refused(v_at, b.who, 'renew', p_slug,
            CASE WHEN v_why LIKE 'lane_cancelled:%' THEN 'lane_cancelled' ELSE 'stale_fence' END,
            regexp_replace(v_why, '^lane_cancelled:', ''), p_reason);
    END IF;
    v_ttl := coalesce(p_ttl, nullif(r.ttl, 0), (b.policy->>'ttl')::integer);
    SELECT * INTO t FROM storm_queue.serve_ttl_refusal(b.policy, v_ttl);
    IF t.code IS NOT NULL THEN
        RETURN storm_queue.serve_refused(v_at, b.who, 'renew', p_slug, t.code, t.message, p_reason);
    END IF;
    v_limit := storm_queue.stamp_seconds(r.claimed) + (b.policy->>'max_lease_age')::bigint;
    IF p_t + v_ttl > v_limit THEN
        RETURN storm_queue.serve_refused(v_at, b.who, 'renew', p_slug, 'lease_age_exceeded',
            'the lease on ' || p_slug || ' was claimed at ' || r.claimed || ' and may not be renewed past '
            || storm_queue.stamp(v_limit) || ' (storm.toml [runner] max_lease_age ' || (b.policy->>'max_lease_age')
            || ' s); finish the lane, or ask for a shorter TTL', p_reason);
    END IF;
    v_expires := storm_queue.stamp(p_t + v_ttl);
    v_lines := storm_queue.serve_append(v_at, b.who, ARRAY['renew'], ARRAY[
        ',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"ttl":' || v_ttl
        || ',"expires":' || storm_queue.json_str(v_expires)
        || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')]);
    RETURN jsonb_build_object('outcome', 'done', 'message',
        'renewed ' || p_slug || ' token ' || p_token || ' until ' || v_expires,
        'token', p_token, 'expires', v_expires, 'line', v_lines[1]);
END
$$;

-- finish, as core/runs.py plan_finish and service/leases.py finish: end the
-- live lease on p_slug held under p_token with p_result (ok: the lane's
-- result row, finished, awaiting review; failed: claimable again, or
-- quarantined once its attempts are spent); or record why not.
CREATE FUNCTION storm_queue.serve_finish(p_slug text, p_token bigint, p_result text, p_note text, p_reason text,
                                         p_t double precision, p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    r storm_queue.run;
    v_at text := storm_queue.stamp(p_t);
    v_why text;
    v_budget bigint;
    v_parked boolean;
    v_actions text[] := ARRAY['finish'];
    v_rests text[];
    v_lines text[];
    v_words text;
BEGIN
    IF p_result IS NULL OR p_result NOT IN ('ok', 'failed') THEN
        RETURN NULL;
    END IF;
    SELECT * INTO b FROM storm_queue.serve_begin(p_wait_ms);
    IF b.who IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = p_slug;
    v_why := storm_queue.serve_fence(r, p_slug, p_token, 'finish', v_at);
    IF v_why IS NOT NULL THEN
        RETURN storm_queue.serve_refused(v_at, b.who, 'finish', p_slug,
            CASE WHEN v_why LIKE 'lane_cancelled:%' THEN 'lane_cancelled' ELSE 'stale_fence' END,
            regexp_replace(v_why, '^lane_cancelled:', ''), p_reason);
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    v_parked := r.quarantined IS NULL AND r.attempts >= v_budget AND p_result <> 'ok'
        AND NOT EXISTS (SELECT 1 FROM storm_queue.settled WHERE slug = p_slug)
        AND NOT EXISTS (SELECT 1 FROM storm_queue.result WHERE slug = p_slug);
    v_rests := ARRAY[',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"result":'
        || storm_queue.json_str(p_result) || coalesce(',"note":' || storm_queue.json_str(p_note), '')
        || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')];
    IF v_parked THEN
        v_actions := v_actions || 'quarantine'::text;
        v_rests := v_rests || (',"slug":' || storm_queue.json_str(p_slug) || ',"attempts":' || r.attempts
            || ',"budget":' || v_budget);
    END IF;
    IF p_result = 'ok' THEN  -- core/ledgers.finished_result
        INSERT INTO storm_queue.result (slug, body)
        VALUES (p_slug, jsonb_build_object('completed', true, 'status', 'ok', 'token', p_token, 'holder', r.holder,
                                           'note', p_note, 'at', v_at))
        ON CONFLICT (slug) DO UPDATE SET body = EXCLUDED.body;
        v_words := p_slug || ' finished ok (token ' || p_token || '); it awaits review';
    ELSIF v_parked THEN
        v_words := p_slug || ' failed (token ' || p_token || ') and is quarantined after ' || r.attempts || ' attempts';
    ELSE
        v_words := p_slug || ' failed (token ' || p_token || '); attempt ' || r.attempts || ' of ' || v_budget
            || ', it will be claimed again';
    END IF;
    v_lines := storm_queue.serve_append(v_at, b.who, v_actions, v_rests);
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'token', p_token, 'line', v_lines[1]);
END
$$;

-- The token a lane's result row carries when it is a whole positive number
-- (what store/postgres/rows.py reads of it), else NULL.
CREATE FUNCTION storm_queue.result_token(p_body jsonb) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$  -- no SET clause: inlined into the query that calls it
    SELECT CASE WHEN jsonb_typeof(p_body->'token') = 'number' AND (p_body->>'token') ~ '^[0-9]+$'
                     AND (p_body->>'token')::numeric > 0 THEN (p_body->>'token')::numeric END
$$;

-- core/resolver.py _state for a lane not settled, finished, held or
-- quarantined: NULL when it is ready at p_now; else the abandoned
-- dependencies it is blocked on (not waived, in its line's order), or none
-- when it waits on a dependency not integrated or on its schedule.
CREATE FUNCTION storm_queue.serve_waits(p_slug text, p_deps text[], p_not_before text, p_now text) RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_gone text[];
BEGIN
    IF cardinality(p_deps) > 0 THEN
        v_gone := ARRAY(SELECT d.dep FROM unnest(p_deps) WITH ORDINALITY AS d(dep, n)
                        WHERE NOT EXISTS (SELECT 1 FROM storm_queue.waiver w WHERE w.slug = p_slug AND w.dep = d.dep)
                          AND EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = d.dep AND s.ledger = 'abandoned')
                        ORDER BY d.n);
        IF cardinality(v_gone) > 0 THEN
            RETURN v_gone;
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_deps) AS d(dep)
                   WHERE NOT EXISTS (SELECT 1 FROM storm_queue.waiver w WHERE w.slug = p_slug AND w.dep = d.dep)
                     AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = d.dep AND s.ledger = 'integrated')) THEN
            RETURN '{}';
        END IF;
    END IF;
    IF p_not_before IS NOT NULL AND p_not_before COLLATE "C" > p_now COLLATE "C" THEN
        RETURN '{}';
    END IF;
    RETURN NULL;
END
$$;

-- claim, as core/runs.py plan_claim and service/leases.py claim: take back
-- every orphaned lease (and quarantine what spent its attempts), then
-- decide as core/resolver.py decided does, walking the run order (the
-- priority lane, then queue order) only to the first ready lane; lease it
-- to p_holder for p_ttl seconds (NULL: the declared TTL) under the next fencing token when a slot is
-- free and no halt is in force, and mark blocked the lanes met before it.
-- Returns the decision, the lease, the halt met and the last line written.
CREATE FUNCTION storm_queue.serve_claim(p_holder text, p_ttl integer, p_reason text, p_t double precision,
                                        p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    h storm_queue.runs_at;
    rec record;
    r storm_queue.run;
    v_at text := storm_queue.stamp(p_t);
    v_budget bigint;
    v_actions text[] := '{}';
    v_rests text[] := '{}';
    v_lines text[] := '{}';
    v_ready text;
    v_issue text;
    v_unattended boolean;
    v_blocked text[] := '{}';
    v_gone text[];
    v_gones text[] := '{}';
    v_finished text[];
    v_decision text;
    v_token bigint;
    v_expires text;
    v_ttl integer;
    v_open bigint;
    v_from bigint;
    v_last bigint;
    v_due text;
    v_slug text;
BEGIN
    SELECT * INTO b FROM storm_queue.serve_begin(p_wait_ms);
    v_ttl := coalesce(p_ttl, (b.policy->>'ttl')::integer);
    IF b.who IS NULL OR (storm_queue.serve_ttl_refusal(b.policy, v_ttl)).code IS NOT NULL THEN
        RETURN NULL;  -- not a caller it serves, or a TTL the request path refuses as asked
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    -- core/runs.py expiries, in the fold's order of runs: the orphaned leases, and the lanes not held that spent
    -- their attempts (unless settled, finished, gone from the queue, or their last attempt finished ok)
    FOR rec IN SELECT u.*, EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = u.slug)
                          OR EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = u.slug) AS done
               FROM storm_queue.run u
               WHERE (u.lease_token IS NOT NULL AND u.expires COLLATE "C" <= v_at COLLATE "C")
                  OR (u.lease_token IS NULL AND u.quarantined IS NULL AND u.attempts >= v_budget
                      AND u.last_end IS DISTINCT FROM 'ok' AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE l.slug = u.slug))
               ORDER BY u.since LOOP
        IF rec.lease_token IS NOT NULL THEN
            v_actions := v_actions || 'expire'::text;
            v_rests := v_rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"token":' || rec.lease_token
                                   || ',"expired":' || storm_queue.json_str(rec.expires));
            IF rec.quarantined IS NULL AND rec.attempts >= v_budget AND NOT rec.done THEN
                v_actions := v_actions || 'quarantine'::text;
                v_rests := v_rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"attempts":' || rec.attempts
                                       || ',"budget":' || v_budget);
            END IF;
        ELSIF NOT rec.done THEN
            v_actions := v_actions || 'quarantine'::text;
            v_rests := v_rests || (',"slug":' || storm_queue.json_str(rec.slug) || ',"attempts":' || rec.attempts
                                   || ',"budget":' || v_budget);
        END IF;
    END LOOP;
    IF cardinality(v_actions) > 0 THEN  -- folded at once (the trigger): what follows decides on the storm after them
        v_lines := storm_queue.serve_append(v_at, b.who, v_actions, v_rests);
    END IF;
    -- core/resolver.py decided: the run order up to the first ready lane, passing over what is settled,
    -- finished (a result row), held or quarantined: first the priority lane, then queue order from runs_at.open_from
    -- (every lane before it is settled or has a result row), each lane's state looked at once met
    SELECT * INTO h FROM storm_queue.runs_at;
    FOR v_slug IN SELECT p.slug FROM storm_queue.priority p ORDER BY p.place LOOP
        -- one lane at a time, by its keys: a join of the whole queue would be planned (tables never analysed) as
        -- a scan of every lane and run at every claim
        SELECT l.slug, l.issue, l.deps, u.not_before INTO rec
        FROM storm_queue.lane l
        LEFT JOIN storm_queue.run u ON u.slug = l.slug
        WHERE l.slug = v_slug
          AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug)
          AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = l.slug)
          AND u.lease_token IS NULL AND u.quarantined IS NULL;
        CONTINUE WHEN NOT FOUND;
        v_gone := storm_queue.serve_waits(rec.slug, rec.deps, rec.not_before, v_at);
        IF v_gone IS NULL THEN
            v_ready := rec.slug;
            v_issue := rec.issue;
            EXIT;
        ELSIF cardinality(v_gone) > 0 THEN
            v_blocked := v_blocked || rec.slug;
            v_gones := v_gones || array_to_string(v_gone, ' ');
        END IF;
    END LOOP;
    v_from := h.open_from;
    WHILE v_ready IS NULL AND v_from IS NOT NULL LOOP  -- queue order, a window of lanes at a time (by pos's index)
        v_last := NULL;
        FOR rec IN
            SELECT w.slug, w.issue, w.deps, w.pos, u.not_before, u.lease_token IS NULL AND u.quarantined IS NULL AS free
            FROM (SELECT l.slug, l.issue, l.deps, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from
                  ORDER BY l.pos LIMIT 64) w
            LEFT JOIN LATERAL (SELECT * FROM storm_queue.run u WHERE u.slug = w.slug LIMIT 1) u ON true  -- by its key
            ORDER BY w.pos
        LOOP
            v_last := rec.pos;
            CONTINUE WHEN rec.free IS FALSE OR EXISTS (SELECT 1 FROM storm_queue.priority p WHERE p.slug = rec.slug)
                OR EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = rec.slug)
                OR EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug);
            v_gone := storm_queue.serve_waits(rec.slug, rec.deps, rec.not_before, v_at);
            IF v_gone IS NULL THEN
                v_ready := rec.slug;
                v_issue := rec.issue;
                EXIT;
            ELSIF cardinality(v_gone) > 0 THEN
                v_blocked := v_blocked || rec.slug;
                v_gones := v_gones || array_to_string(v_gone, ' ');
            END IF;
        END LOOP;
        v_from := v_last + 1;
    END LOOP;
    -- the mark moves past the lanes now settled or with a result row (each passed over once, not at every claim)
    -- (walked by pos's index, each lane's rows looked up by key: as one query over the queue, the tables never
    -- analysed, it is planned as a scan of every lane and result row at every claim)
    v_from := h.open_from;
    LOOP
        v_last := NULL;
        FOR rec IN SELECT l.slug, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from ORDER BY l.pos LIMIT 64 LOOP
            v_last := rec.pos;
            IF NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = rec.slug)
               AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug) THEN
                v_open := rec.pos;
                EXIT;
            END IF;
        END LOOP;
        EXIT WHEN v_open IS NOT NULL OR v_last IS NULL;
        v_from := v_last + 1;
    END LOOP;
    IF v_open IS DISTINCT FROM h.open_from AND v_open IS NOT NULL THEN
        UPDATE storm_queue.runs_at SET open_from = v_open;
    END IF;
    v_unattended := (b.policy->>'unattended')::boolean;
    IF NOT v_unattended OR v_ready IS NULL THEN  -- the finished lanes, in run order, only when the decision names them
        v_finished := ARRAY(
            SELECT l.slug FROM storm_queue.lane l
            JOIN storm_queue.result x ON x.slug = l.slug
            LEFT JOIN storm_queue.priority p ON p.slug = l.slug
            LEFT JOIN storm_queue.run u ON u.slug = l.slug
            WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
              AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
            ORDER BY p.place IS NULL, p.place, l.pos);
    END IF;
    -- core/runs.py next_due: the first moment after now that time alone changes the decision (claim --wait)
    v_due := (SELECT min(x.t COLLATE "C") FROM (
                  SELECT expires AS t FROM storm_queue.run WHERE lease_token IS NOT NULL
                  UNION ALL SELECT not_before FROM storm_queue.run WHERE not_before IS NOT NULL) x
              WHERE x.t COLLATE "C" > v_at COLLATE "C");
    IF h.halt_seq IS NOT NULL THEN
        v_decision := 'halted';
    ELSIF cardinality(v_finished) > 0 AND NOT v_unattended THEN
        v_decision := 'review ' || array_to_string(v_finished, ' ');
    ELSIF v_ready IS NULL THEN  -- wait while any lane is left that is not settled
        v_decision := CASE WHEN EXISTS (SELECT 1 FROM storm_queue.lane l
                                        WHERE NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug))
                           THEN array_to_string('{wait}'::text[] || v_finished, ' ') ELSE 'empty' END;
    ELSIF (SELECT count(*) FROM storm_queue.run WHERE lease_token IS NOT NULL) >= (b.policy->>'slots')::bigint THEN
        v_finished := ARRAY(
            SELECT l.slug FROM storm_queue.lane l
            JOIN storm_queue.result x ON x.slug = l.slug
            LEFT JOIN storm_queue.priority p ON p.slug = l.slug
            LEFT JOIN storm_queue.run u ON u.slug = l.slug
            WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
              AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
            ORDER BY p.place IS NULL, p.place, l.pos);
        v_decision := array_to_string('{wait}'::text[] || v_finished, ' ');
    ELSE
        SELECT * INTO r FROM storm_queue.run WHERE slug = v_ready;
        v_token := greatest(coalesce(r.token, 0), h.token_floor) + 1;
        v_expires := storm_queue.stamp(p_t + v_ttl);
        v_lines := v_lines || storm_queue.serve_append(v_at, b.who, ARRAY['claim'], ARRAY[
            ',"slug":' || storm_queue.json_str(v_ready) || ',"issue":' || storm_queue.json_str(v_issue)
            || ',"holder":' || storm_queue.json_str(p_holder) || ',"token":' || v_token || ',"ttl":' || v_ttl
            || ',"expires":' || storm_queue.json_str(v_expires) || ',"attempt":' || (coalesce(r.attempts, 0) + 1)
            || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')]);
        v_decision := 'run ' || v_ready || ' ' || v_issue || ' ' || v_token;
    END IF;
    FOR i IN 1..cardinality(v_blocked) LOOP  -- core/ledgers.py blocked_result, as next marks them
        INSERT INTO storm_queue.result (slug, body)
        VALUES (v_blocked[i], jsonb_build_object(
            'completed', false, 'status', 'blocked', 'blocked_on', split_part(v_gones[i], ' ', 1),
            'blocked_on_all', to_jsonb(string_to_array(v_gones[i], ' ')), 'at', v_at, 'by', 'storm-queue next'))
        ON CONFLICT (slug) DO NOTHING;
    END LOOP;
    RETURN jsonb_build_object(
        'decision', v_decision, 'slug', CASE WHEN v_token IS NOT NULL THEN v_ready END, 'token', v_token,
        'expires', v_expires, 'at', v_at, 'by', b.who, 'due', v_due,
        'halt', CASE WHEN h.halt_seq IS NOT NULL THEN jsonb_build_object(
            'seq', h.halt_seq, 'at', h.halt_at, 'by', h.halt_by, 'reason', h.halt_reason) END,
        'line', v_lines[cardinality(v_lines)]);
END
$$;

REVOKE ALL ON FUNCTION storm_queue.serve_renew(text, bigint, integer, text, double precision, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION storm_queue.serve_finish(text, bigint, text, text, text, double precision, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION storm_queue.serve_claim(text, integer, text, double precision, integer) FROM PUBLIC;

-- the runners granted before this version may call them too
DO $$
DECLARE
    v_role text;
BEGIN
    FOR v_role IN SELECT role FROM storm_queue.member WHERE kind = 'runner' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION storm_queue.serve_renew(text, bigint, integer, text, double precision, '
                       'integer), storm_queue.serve_finish(text, bigint, text, text, text, double precision, integer), '
                       'storm_queue.serve_claim(text, integer, text, double precision, integer) TO %I', v_role);
    END LOOP;
END
$$;

UPDATE storm_queue.version SET version = 5;

-- Version 2: runner and reader roles (storm-queue grant runner|reader ROLE).
-- A runner role holds no write privilege on any table: the lines and rows
-- its claims, renewals, finishes and recoveries write go through the two
-- functions below, owned by the operator (SECURITY DEFINER, a fixed
-- search_path), which admit only a runner's lines, under its own name, in
-- the log's chain. A reader role may read, and nothing more.

-- the roles the operator granted, and as what
CREATE TABLE storm_queue.member (
    role text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('runner', 'reader')),
    PRIMARY KEY (role, kind)
);

-- Append a runner's lines (each a whole JSON line, newline-ended) after the
-- log's head, and the results its finishes wrote: each line by
-- runner:SESSION_USER, of a runner's action, numbered and chained after the
-- last; each result a finished lane's, for a finish ok of these lines with
-- the same slug and token. Anything else aborts the transaction, unwritten.
CREATE FUNCTION storm_queue.runner_append(p_lines bytea[], p_results jsonb)
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
    PERFORM pg_advisory_xact_lock({lock_keys});
    SELECT seq, digest INTO v_seq, v_digest FROM storm_queue.state;
    FOREACH v_line IN ARRAY p_lines LOOP
        IF length(v_line) < 2 OR get_byte(v_line, length(v_line) - 1) <> 10 THEN
            RAISE EXCEPTION 'a runner''s line must be one whole line' USING ERRCODE = 'insufficient_privilege';
        END IF;
        v_event := convert_from(v_line, 'UTF8')::jsonb;
        IF v_event->>'by' IS DISTINCT FROM v_by
           OR NOT coalesce(v_event->>'action' IN ('claim', 'renew', 'finish', 'expire', 'recover', 'quarantine',
                                                 'refused'), false)
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

-- Mark a lane blocked, as next does (a result that is next's blocked mark,
-- where the lane has no result yet): what a runner's claim met before the
-- lane it chose.
CREATE FUNCTION storm_queue.runner_mark_blocked(p_slug text, p_body jsonb)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM storm_queue.member WHERE role = session_user AND kind = 'runner') THEN
        RAISE EXCEPTION 'role % is not a runner of this storm', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_body->>'status' IS DISTINCT FROM 'blocked' OR p_body->'completed' IS DISTINCT FROM 'false'::jsonb THEN
        RAISE EXCEPTION 'a runner may write only next''s blocked mark' USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO storm_queue.result (slug, body) VALUES (p_slug, p_body) ON CONFLICT (slug) DO NOTHING;
END
$$;

REVOKE ALL ON FUNCTION storm_queue.runner_append(bytea[], jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION storm_queue.runner_mark_blocked(text, jsonb) FROM PUBLIC;

UPDATE storm_queue.version SET version = 2;

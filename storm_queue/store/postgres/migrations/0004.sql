-- Version 4: a runner gives a lease back (storm-queue release SLUG --token T,
-- issue 20 item 6). runner_append is as version 2 made it, but it also
-- admits a runner's release lines (and the quarantine one may bring).
-- CREATE OR REPLACE keeps the function's owner and its grants.

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
    PERFORM pg_advisory_xact_lock({lock_keys});
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

UPDATE storm_queue.version SET version = 4;

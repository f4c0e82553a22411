--
-- Number, stamp and chain a request's lines after the log's head, as
-- core/framing.frame does (each body given as its action and the JSON of its
-- other fields, each led by a comma), insert them (the insert check moves
-- the head; p_folded: the caller folds them, event_folded passes over them),
-- and return them. The line p_own (its index) carries the request's key: a
-- caller that folds its lines binds it here. p_ask: the client's token for
-- the request, kept with the last line's seq (an hour) for a client whose
-- connection broke to ask whether it was written.
CREATE OR REPLACE FUNCTION storm_queue.serve_append(p_at text, p_by text, p_actions text[], p_rests text[], p_folded boolean,
                                         p_own integer, p_key text, p_fingerprint text, p_ask text)
RETURNS text[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_seq bigint;
    v_digest text;
    v_line text;
    v_bytes bytea;
    v_lines text[] := '{}';
    v_forget timestamptz;
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
        v_forget := clock_timestamp() - interval '1 hour';  -- a value, so the index on at finds them
        DELETE FROM storm_queue.asked a WHERE a.at < v_forget;
        INSERT INTO storm_queue.asked (ask, seq, at) VALUES (p_ask, v_seq, clock_timestamp())
        ON CONFLICT (ask) DO UPDATE SET seq = EXCLUDED.seq;
    END IF;
    RETURN v_lines;
END
$$;

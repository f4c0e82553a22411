-- Why the log's head (the state row: seq, and the digest of its last line)
-- is not its last line, in words naming the line; NULL when it is. A line
-- deleted or edited by hand (the append-only trigger disabled), or one
-- inserted past the head, is damage: verify names it, nothing is served.
CREATE OR REPLACE FUNCTION storm_queue.head_damage() RETURNS text LANGUAGE plpgsql STABLE
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
    -- the last line by the index, read backwards (an EXISTS over seq > v_seq is planned, once a plan is
    -- kept, as a scan of the whole log, which finds nothing to stop at)
    IF (SELECT e.seq FROM storm_queue.event e ORDER BY e.seq DESC LIMIT 1) > v_seq THEN
        RETURN 'the log holds lines past its head (line ' || v_seq || ')';
    END IF;
    RETURN NULL;
END
$$;

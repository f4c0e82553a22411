-- Every line any role inserts into the log (the operator's request path,
-- a serving function, a hand edit) is checked here first, under the
-- storm's lock: it is the line after the head (its seq the head's + 1,
-- its prev the head's digest), the head is the log's last line, and it is
-- well-formed (line_admitted's quick yes to a plain line, else
-- line_refusal); then the head moves to it. So no role but a
-- superuser, or the table's owner disabling this trigger (doctor reports
-- it), can put a line the Python decoder refuses into the log, or append
-- after a line deleted or edited.
CREATE OR REPLACE FUNCTION storm_queue.event_well_formed() RETURNS trigger LANGUAGE plpgsql
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
                  WHEN storm_queue.line_admitted(NEW.line, NEW.seq, v_digest) THEN NULL
                  ELSE storm_queue.line_refusal(NEW.line, NEW.seq, v_digest) END;
    IF v_why IS NOT NULL THEN
        RAISE EXCEPTION 'storm_queue.event: line % is refused: %', NEW.seq, v_why USING ERRCODE = 'check_violation';
    END IF;
    UPDATE storm_queue.state SET seq = NEW.seq, digest = encode(sha256(NEW.line), 'hex');
    RETURN NEW;
END
$$;

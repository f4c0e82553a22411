-- The insert check's quick yes (core/framing.py QUICK does the same for a
-- reader): true only for a line line_refusal(p_line, p_seq, p_prev) admits,
-- read without it. The line must be plain: at most 64 KiB, one flat JSON
-- object of printable ASCII ending in a newline, each value a whole number
-- of at most 15 digits, a string with no escape, true, false, null or a list
-- of such strings; then its fields as its action's line_check test asks,
-- its named fields names, v 1, seq p_seq, prev p_prev, at a stamp of a day
-- every month has (1 to 28) in years 1000 to 9999, by an operator, source,
-- account or runner, and the token, result, ledger and adopt rules. False
-- says only that line_refusal must read the line; nothing here raises (no
-- value is cast).
CREATE OR REPLACE FUNCTION storm_queue.line_admitted(p_line bytea, p_seq bigint, p_prev text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_text text;
    jb jsonb;
    v_test jsonpath;
    v_named text[];
    v_action text;
    v_value jsonb;
    v_field text;
    -- a string with no escape, then a field of a flat object: its name, and a value of those it may hold
    v_str constant text := '"[\x20\x21\x23-\x5b\x5d-\x7e]*"';
    v_pair constant text := '"[a-z_]+":(-?(0|[1-9][0-9]{0,14})|' || v_str || '|true|false|null|\[(' || v_str || '(,'
        || v_str || ')*)?\])';
BEGIN
    IF octet_length(p_line) > 65536 THEN
        RETURN false;
    END IF;
    -- (escape keeps printable ASCII as it is, and writes a backslash or any other byte but a newline as one)
    v_text := encode(p_line, 'escape');
    IF v_text !~ ('^\{' || v_pair || '(,' || v_pair || ')*\}\n$') THEN
        RETURN false;
    END IF;
    jb := v_text::jsonb;
    v_action := jb->>'action';
    SELECT lc.test, lc.named INTO v_test, v_named FROM storm_queue.line_check lc WHERE lc.action = v_action;
    IF NOT coalesce(FOUND AND jsonb_path_match(jb, v_test) AND jb->'v' = '1'::jsonb AND jb->'seq' = to_jsonb(p_seq)
                    AND CASE WHEN p_prev IS NULL THEN jb->'prev' = 'null'::jsonb
                             ELSE jsonb_typeof(jb->'prev') = 'string' AND jb->>'prev' = p_prev END
                    AND jb->>'at' ~ ('^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):'
                                     '[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z$')
                    AND jb->>'by' ~ '^(operator|source|account|runner):.'
                    AND NOT (v_action IN ('claim', 'renew', 'finish', 'expire', 'release') AND jb->'token' < '1'::jsonb)
                    AND NOT (v_action = 'settle' AND jb->>'ledger' NOT IN ('integrated', 'abandoned'))
                    AND NOT (v_action = 'finish' AND jb->>'result' NOT IN ('ok', 'failed'))
                    AND NOT (v_action = 'adopt' AND jb->'noop' IS NULL AND p_seq <> 1), false) THEN
        RETURN false;
    END IF;
    FOREACH v_field IN ARRAY v_named LOOP
        v_value := jb->v_field;
        IF jsonb_typeof(v_value) = 'string' AND NOT storm_queue.is_name(v_value #>> '{}') THEN
            RETURN false;
        ELSIF jsonb_typeof(v_value) = 'array' AND EXISTS (
                SELECT 1 FROM jsonb_array_elements_text(v_value) n WHERE NOT storm_queue.is_name(n)) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;

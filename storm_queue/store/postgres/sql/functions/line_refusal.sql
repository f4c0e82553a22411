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
CREATE OR REPLACE FUNCTION storm_queue.line_refusal(p_line bytea, p_seq bigint, p_prev text) RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_text text;
    j json;
    v_action text;
    v_nest text;
    v_fits boolean;
    v_why text;
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
    -- (a line with at most 32 opening brackets, in strings or not, nests at most 32 deep)
    v_nest := CASE WHEN length(v_text) - length(translate(v_text, '[{', '')) <= 32 THEN ''
                   ELSE regexp_replace(regexp_replace(v_text, '"(\\.|[^"\\])*"', '', 'g'), '[^][{}]', '', 'g') END;
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
    -- the action a known one, then each field in order (the action's own, then the common ones): the first
    -- missing, of another kind, or holding a text that is not a name where names go (the line's fields read
    -- in one pass, the last of a key written twice, as json's -> and Python's json take it)
    SELECT CASE WHEN v_action IS NULL OR NOT EXISTS (SELECT 1 FROM storm_queue.line_field lf WHERE lf.action = v_action)
                THEN 'its action is not one: ' || coalesce((j->'action')::text, 'missing')
                ELSE (SELECT 'field ' || lf.field || CASE WHEN x.v IS NULL THEN ' is missing'
                                                          WHEN NOT y.fits THEN ' is not a ' || lf.kind
                                                          ELSE ' holds a text that is not a name' END
                      FROM storm_queue.line_field lf
                      LEFT JOIN (SELECT DISTINCT ON (e.key) e.key, e.value AS v, json_typeof(e.value) AS kind
                                 FROM json_each(j) WITH ORDINALITY e(key, value, n)
                                 ORDER BY e.key, e.n DESC) x ON x.key = lf.field
                      CROSS JOIN LATERAL (SELECT CASE lf.kind
                          WHEN 'str' THEN x.kind = 'string'
                          WHEN 'str?' THEN x.kind IN ('string', 'null')
                          WHEN 'int' THEN x.kind = 'number' AND x.v::text ~ '^-?(0|[1-9][0-9]{0,14})$'
                          WHEN 'int?' THEN x.kind = 'null' OR (x.kind = 'number' AND x.v::text ~ '^-?(0|[1-9][0-9]{0,14})$')
                          WHEN 'bool' THEN x.kind = 'boolean'
                          WHEN 'object' THEN x.kind = 'object'
                          WHEN 'list' THEN CASE WHEN x.kind = 'array' THEN NOT EXISTS (
                                                    SELECT 1 FROM json_array_elements(x.v) e WHERE json_typeof(e) <> 'string')
                                                ELSE false END
                          ELSE storm_queue.lane_rows_sound(x.v) END AS fits) y
                      WHERE lf.action IN ('*', v_action)
                        AND CASE WHEN x.v IS NULL THEN lf.need = 'required'
                                 WHEN NOT y.fits THEN true
                                 WHEN lf.named AND x.kind IN ('string', 'array') THEN EXISTS (
                                     SELECT 1 FROM json_array_elements_text(CASE WHEN x.kind = 'array' THEN x.v
                                                                                 ELSE json_build_array(x.v) END) n
                                     WHERE NOT storm_queue.is_name(n))
                                 ELSE false END
                      ORDER BY lf.action = '*', lf.field
                      LIMIT 1) END
    INTO v_why;
    IF v_why IS NOT NULL THEN
        RETURN v_why;
    END IF;
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

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
CREATE OR REPLACE FUNCTION storm_queue.serve_start(
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

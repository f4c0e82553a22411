-- Version 8: the storm's own backoff after a failed attempt (issue 33,
-- item 1). A runner no longer schedules a failed lane for later (a runner
-- role may not: schedule is the operator's); the declaration says how long
-- a failed lane waits, [runner] retry_delay (whole seconds, 0: not at all,
-- the default) doubled for each attempt spent before it, at most
-- [runner] retry_max (default 600). A finish --result failed that does not
-- quarantine the lane records "not_before" on its own line: the finish's
-- time plus that delay (core/runs.py backoff and plan_finish), which the
-- fold makes the lane's schedule, exactly as a schedule line's
-- (core/fold.py). serve_finish writes that line and folds it; fold_line
-- folds a finish line's not_before for every other writer. The policy the
-- server reads (storm.runner, store/postgres/policy.py) carries the two
-- keys; a policy written before them (none) means 0 and 600. Lines without
-- the key are unchanged (tests/database/test_served.py holds the served
-- and Python paths equal byte for byte).

-- The seconds a lane whose p_attempts-th attempt (since its last unpark)
-- just failed waits before it is claimed again, as core/runs.py backoff:
-- retry_delay doubled for each attempt before it (at most 30 doublings:
-- past any retry_max), at most retry_max; 0 when retry_delay is 0.
CREATE FUNCTION storm_queue.backoff(p_policy jsonb, p_attempts integer) RETURNS bigint
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN coalesce((p_policy->>'retry_delay')::bigint, 0) <= 0 THEN 0::bigint
                ELSE least(coalesce((p_policy->>'retry_max')::bigint, 600),
                           (p_policy->>'retry_delay')::bigint << least(greatest(p_attempts - 1, 0), 30))
           END
$$;

-- finish, as 0007.sql's, with the backoff: a failure that does not quarantine the lane, under a declared
-- retry_delay, carries not_before (after the note, before the reason, as the Python path writes it) and
-- folds it into the run row; its answer says when the lane is claimed again
CREATE OR REPLACE FUNCTION storm_queue.serve_finish(p_slug text, p_token bigint, p_result text, p_note text, p_reason text,
                                         p_t double precision, p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    r storm_queue.run;
    v_at text := storm_queue.stamp(p_t);
    v_why text;
    v_budget bigint;
    v_parked boolean;
    v_delay bigint := 0;
    v_not_before text;
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
    IF p_result = 'failed' AND NOT v_parked THEN  -- core/runs.py plan_finish: the storm's backoff
        v_delay := storm_queue.backoff(b.policy, r.attempts);
    END IF;
    IF v_delay > 0 THEN
        v_not_before := storm_queue.stamp(storm_queue.stamp_seconds(v_at) + v_delay);
    END IF;
    v_rests := ARRAY[',"slug":' || storm_queue.json_str(p_slug) || ',"token":' || p_token || ',"result":'
        || storm_queue.json_str(p_result) || coalesce(',"note":' || storm_queue.json_str(p_note), '')
        || coalesce(',"not_before":' || storm_queue.json_str(v_not_before), '')
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
            || ', it will be claimed again' || coalesce(' after ' || v_not_before, '');
    END IF;
    v_lines := storm_queue.serve_append(v_at, b.who, v_actions, v_rests, true);
    -- its lines folded, as fold_line folds them: the live lease's attempt ends, the lease goes (and the
    -- quarantine; or the backoff's schedule)
    UPDATE storm_queue.run
    SET last_end = CASE WHEN last_token = p_token AND last_end IS NULL THEN p_result ELSE last_end END,
        holder = NULL, lease_token = NULL, lease_by = NULL, claimed = NULL, expires = NULL, ttl = NULL,
        quarantined = CASE WHEN v_parked THEN v_at ELSE quarantined END,
        not_before = coalesce(v_not_before, not_before)
    WHERE slug = p_slug;
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'token', p_token, 'line', v_lines[1]);
END
$$;

-- One line of the log folded into storm_queue.run and runs_at, as 0005.sql's, and a finish line's
-- not_before (the storm's backoff) made the run's schedule, as core/fold.py folds it
CREATE OR REPLACE FUNCTION storm_queue.fold_line(p_line bytea) RETURNS void
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

UPDATE storm_queue.version SET version = 8;

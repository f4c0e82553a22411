-- Version 7: a served request folds its own lines (issue 21, item 3). The
-- trigger event_folded folds every line any writer inserts into
-- storm_queue.run by parsing it back (fold_line); the functions serving a
-- runner's claim, renew and finish know what their lines change, so they
-- write those rows themselves, as fold_line would, and insert the lines
-- marked folded, which the trigger passes over. Only these SECURITY
-- DEFINER functions mark a line so (a runner may not insert into
-- storm_queue.event; the operator's request path never marks one);
-- tests/database/test_served.py holds the rows they write to what the
-- Python fold makes of the same lines, which are unchanged.
--
-- The claim's mark (runs_at.open_from) now passes held and quarantined
-- lanes too: every lane of the queue before it is settled, has a result
-- row, holds a lease or is quarantined, so a claim passes none of them
-- again. A lease held for hours no longer makes every claim walk past
-- each lane finished since it was taken (the walk began at the held
-- lane). A lease that ends, or a quarantine lifted, on a lane that is
-- neither settled nor finished moves the mark back to that lane (the
-- trigger run_open, whoever writes the run row).

ALTER TABLE storm_queue.event ADD COLUMN folded boolean NOT NULL DEFAULT false;

DROP TRIGGER event_folded ON storm_queue.event;
CREATE TRIGGER event_folded AFTER INSERT ON storm_queue.event
    FOR EACH ROW WHEN (NOT NEW.folded) EXECUTE FUNCTION storm_queue.event_folded();

-- Number, stamp and chain the lines of one request after the log's head,
-- as core/framing.frame does (each body given as its action and the JSON of
-- its other fields, each led by a comma), insert them (p_folded: folded by
-- the caller, passed over by event_folded), move the head, and return the
-- lines.
CREATE FUNCTION storm_queue.serve_append(p_at text, p_by text, p_actions text[], p_rests text[], p_folded boolean)
RETURNS text[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
        INSERT INTO storm_queue.event (seq, line, folded) VALUES (v_seq, convert_to(v_line, 'UTF8'), p_folded);
        v_digest := encode(sha256(convert_to(v_line, 'UTF8')), 'hex');
        v_lines := v_lines || v_line;
    END LOOP;
    UPDATE storm_queue.state SET seq = v_seq, digest = v_digest;
    RETURN v_lines;
END
$$;

-- A lane whose lease ended or whose quarantine was lifted (and that is
-- neither held nor quarantined now), or whose run row went, and that is
-- neither settled nor finished, can be claimed again: the mark goes back
-- to it (to the queue's start for a TRUNCATE).
CREATE FUNCTION storm_queue.run_open() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE storm_queue.runs_at SET open_from = -9223372036854775808 WHERE open_from <> -9223372036854775808;
    ELSIF NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = OLD.slug)
          AND NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = OLD.slug) THEN
        UPDATE storm_queue.runs_at a SET open_from = l.pos
        FROM storm_queue.lane l
        WHERE l.slug = OLD.slug AND l.pos < a.open_from;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER run_open AFTER UPDATE ON storm_queue.run FOR EACH ROW
    WHEN ((NEW.lease_token IS NULL AND NEW.quarantined IS NULL AND (OLD.lease_token IS NOT NULL OR OLD.quarantined IS NOT NULL))
          OR OLD.slug IS DISTINCT FROM NEW.slug)
    EXECUTE FUNCTION storm_queue.run_open();
CREATE TRIGGER run_open_gone AFTER DELETE ON storm_queue.run
    FOR EACH ROW EXECUTE FUNCTION storm_queue.run_open();
CREATE TRIGGER run_open_all AFTER TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.run_open();

-- serve_append's lines, folded by event_folded
CREATE OR REPLACE FUNCTION storm_queue.serve_append(p_at text, p_by text, p_actions text[], p_rests text[])
RETURNS text[] LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT storm_queue.serve_append(p_at, p_by, p_actions, p_rests, false)
$$;

-- json_str and stamp as one SQL expression each, inlined into the
-- statements of the serving functions that call them (a plpgsql function
-- with a SET clause is a call, a new search_path and a new plan state at
-- every one, some twenty a claim); what they return is unchanged
-- (tests/database/test_served.py holds them to core/jsoncodec and
-- core/clock). Called only where the search_path is the serving
-- functions' own (pg_catalog, pg_temp), they need no SET of their own.
ALTER FUNCTION storm_queue.json_str(text) RENAME TO json_str_escaped;
CREATE FUNCTION storm_queue.json_str(p text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$  -- not STRICT: a CASE is not, and a STRICT function of it is never inlined
    SELECT CASE WHEN p ~ '[^ -~]|["\\]' THEN storm_queue.json_str_escaped(p) ELSE '"' || p || '"' END
$$;

CREATE OR REPLACE FUNCTION storm_queue.stamp(p_t double precision) RETURNS text
LANGUAGE sql STABLE AS $$  -- STABLE, as to_char is: an IMMUTABLE function of it is never inlined
    SELECT to_char(to_timestamp(floor(p_t) + (round((p_t - floor(p_t)) * 1000000.0::double precision) = 1000000)::integer)
                   AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
        || '.' || lpad((round((p_t - floor(p_t)) * 1000000.0::double precision)::bigint % 1000000)::text, 6, '0') || 'Z'
$$;

-- renew, as core/runs.py plan_renew and service/leases.py renew: extend the
-- live lease on p_slug held under p_token by p_ttl (NULL: the TTL it was
-- claimed or last renewed with, else the declared one) from p_t (POSIX
-- seconds, the caller's clock, as every line's time is), within
-- max_lease_age of its claim; or record why not.
CREATE OR REPLACE FUNCTION storm_queue.serve_renew(p_slug text, p_token bigint, p_ttl integer, p_reason text,
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
        || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')], true);
    UPDATE storm_queue.run SET expires = v_expires, ttl = v_ttl WHERE slug = p_slug;  -- folded: the live lease renewed
    RETURN jsonb_build_object('outcome', 'done', 'message',
        'renewed ' || p_slug || ' token ' || p_token || ' until ' || v_expires,
        'token', p_token, 'expires', v_expires, 'line', v_lines[1]);
END
$$;

-- finish, as core/runs.py plan_finish and service/leases.py finish: end the
-- live lease on p_slug held under p_token with p_result (ok: the lane's
-- result row, finished, awaiting review; failed: claimable again, or
-- quarantined once its attempts are spent); or record why not.
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
    v_lines := storm_queue.serve_append(v_at, b.who, v_actions, v_rests, true);
    -- its lines folded, as fold_line folds them: the live lease's attempt ends, the lease goes (and the quarantine)
    UPDATE storm_queue.run
    SET last_end = CASE WHEN last_token = p_token AND last_end IS NULL THEN p_result ELSE last_end END,
        holder = NULL, lease_token = NULL, lease_by = NULL, claimed = NULL, expires = NULL, ttl = NULL,
        quarantined = CASE WHEN v_parked THEN v_at ELSE quarantined END
    WHERE slug = p_slug;
    RETURN jsonb_build_object('outcome', 'done', 'message', v_words, 'token', p_token, 'line', v_lines[1]);
END
$$;

-- claim, as 0006.sql's: it folds its own line, moves its mark past held and quarantined lanes too, and
-- returns besides the decision, the lease, the halt met and the last line written the lanes it marked
-- blocked (its view before those marks, for the cycle note: served.py)
CREATE OR REPLACE FUNCTION storm_queue.serve_claim(p_holder text, p_ttl integer, p_reason text, p_t double precision,
                                        p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    h storm_queue.runs_at;
    rec record;
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
    v_expiring boolean;
    v_walked boolean;
    v_held bigint;
    v_attempt integer;
    r storm_queue.run;
BEGIN
    SELECT * INTO b FROM storm_queue.serve_begin(p_wait_ms);
    v_ttl := coalesce(p_ttl, (b.policy->>'ttl')::integer);
    IF b.who IS NULL OR (storm_queue.serve_ttl_refusal(b.policy, v_ttl)).code IS NOT NULL THEN
        RETURN NULL;  -- not a caller it serves, or a TTL the request path refuses as asked
    END IF;
    v_budget := (b.policy->>'attempts')::bigint;
    -- core/runs.py expiries, in the fold's order of runs: the orphaned leases, and the lanes not held that spent
    -- their attempts (unless settled, finished, gone from the queue, or their last attempt finished ok), each
    -- one a row of storm_queue.watch
    SELECT EXISTS (SELECT 1 FROM storm_queue.watch u
                   WHERE (u.lease_token IS NOT NULL AND u.expires COLLATE "C" <= v_at COLLATE "C")
                      OR (u.lease_token IS NULL AND u.quarantined IS NULL AND u.attempts >= v_budget
                          AND u.last_end IS DISTINCT FROM 'ok'
                          AND EXISTS (SELECT 1 FROM storm_queue.lane l WHERE l.slug = u.slug)))
    INTO v_expiring;
    IF v_expiring THEN  -- (a claim that finds none asks once, opening no cursor)
        FOR rec IN SELECT u.*, EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = u.slug)
                              OR EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = u.slug) AS done
                   FROM storm_queue.watch u
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
    END IF;
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
          AND (SELECT true FROM storm_queue.settled s WHERE s.slug = l.slug) IS NULL
          AND (SELECT true FROM storm_queue.result x WHERE x.slug = l.slug) IS NULL
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
    v_walked := v_ready IS NULL;
    WHILE v_ready IS NULL AND v_from IS NOT NULL LOOP  -- queue order, a window of lanes at a time (by pos's index)
        v_last := NULL;
        FOR rec IN
            SELECT w.slug, w.issue, w.deps, w.pos, u.not_before, u.lease_token IS NULL AND u.quarantined IS NULL AS free,
                   (SELECT true FROM storm_queue.settled s WHERE s.slug = w.slug) IS NOT NULL
                   OR (SELECT true FROM storm_queue.result x WHERE x.slug = w.slug) IS NOT NULL AS done,
                   (SELECT true FROM storm_queue.priority p WHERE p.slug = w.slug) IS NOT NULL AS prio
            FROM (SELECT l.slug, l.issue, l.deps, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from
                  ORDER BY l.pos LIMIT 64) w
            LEFT JOIN LATERAL (SELECT * FROM storm_queue.run u WHERE u.slug = w.slug LIMIT 1) u ON true  -- by its key
            ORDER BY w.pos
        LOOP
            v_last := rec.pos;
            IF v_open IS NULL AND NOT rec.done AND rec.free IS NOT FALSE THEN  -- the mark: the first lane it cannot pass
                v_open := rec.pos;
            END IF;
            CONTINUE WHEN rec.free IS FALSE OR rec.prio OR rec.done;
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
    -- the mark moves past the lanes now settled, finished, held or quarantined (each passed over once, not at every
    -- claim): the walk in queue order above found it on its way, from the mark to the lane it names, or to the queue's end;
    -- when the priority lane named the lane, it is walked for (by pos's index, each lane's rows looked up by key: as
    -- one query over the queue, the tables never analysed, it is planned as a scan of every lane and result row at
    -- every claim)
    IF NOT v_walked THEN
        v_from := h.open_from;
        LOOP
            v_last := NULL;
            FOR rec IN SELECT l.slug, l.pos FROM storm_queue.lane l WHERE l.pos >= v_from ORDER BY l.pos LIMIT 64 LOOP
                v_last := rec.pos;
                IF NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = rec.slug)
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug)
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.run u WHERE u.slug = rec.slug
                                   AND (u.lease_token IS NOT NULL OR u.quarantined IS NOT NULL)) THEN
                    v_open := rec.pos;
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN v_open IS NOT NULL OR v_last IS NULL;
            v_from := v_last + 1;
        END LOOP;
    END IF;
    IF v_open IS DISTINCT FROM h.open_from AND v_open IS NOT NULL THEN
        UPDATE storm_queue.runs_at SET open_from = v_open;
    END IF;
    v_unattended := (b.policy->>'unattended')::boolean;
    -- core/runs.py next_due: the first moment after now that time alone changes the decision (claim --wait)
    -- (and the slots taken: the leases held)
    SELECT (SELECT min(x.t COLLATE "C") FROM (
                SELECT expires AS t FROM storm_queue.watch WHERE lease_token IS NOT NULL
                UNION ALL SELECT not_before FROM storm_queue.watch WHERE not_before IS NOT NULL) x
            WHERE x.t COLLATE "C" > v_at COLLATE "C"),
           (SELECT count(*) FROM storm_queue.watch WHERE lease_token IS NOT NULL)
    INTO v_due, v_held;
    IF NOT v_unattended OR v_ready IS NULL OR v_held >= (b.policy->>'slots')::bigint THEN
        -- the finished lanes, in run order, only when the decision names them
        v_finished := ARRAY(
            SELECT l.slug FROM storm_queue.lane l
            JOIN storm_queue.result x ON x.slug = l.slug
            LEFT JOIN storm_queue.priority p ON p.slug = l.slug
            LEFT JOIN storm_queue.run u ON u.slug = l.slug
            WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
              AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
            ORDER BY p.place IS NULL, p.place, l.pos);
    END IF;
    IF h.halt_seq IS NOT NULL THEN
        v_decision := 'halted';
    ELSIF cardinality(v_finished) > 0 AND NOT v_unattended THEN
        v_decision := 'review ' || array_to_string(v_finished, ' ');
    ELSIF v_ready IS NULL THEN  -- wait while any lane is left that is not settled
        v_decision := CASE WHEN EXISTS (SELECT 1 FROM storm_queue.lane l
                                        WHERE NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug))
                           THEN array_to_string('{wait}'::text[] || v_finished, ' ') ELSE 'empty' END;
    ELSIF v_held >= (b.policy->>'slots')::bigint THEN
        v_decision := array_to_string('{wait}'::text[] || v_finished, ' ');
    ELSE
        SELECT * INTO r FROM storm_queue.run WHERE slug = v_ready;
        v_token := greatest(coalesce(r.token, 0), h.token_floor) + 1;
        v_attempt := coalesce(r.attempts, 0) + 1;
        v_expires := storm_queue.stamp(p_t + v_ttl);
        v_lines := v_lines || storm_queue.serve_append(v_at, b.who, ARRAY['claim'], ARRAY[
            ',"slug":' || storm_queue.json_str(v_ready) || ',"issue":' || storm_queue.json_str(v_issue)
            || ',"holder":' || storm_queue.json_str(p_holder) || ',"token":' || v_token || ',"ttl":' || v_ttl
            || ',"expires":' || storm_queue.json_str(v_expires) || ',"attempt":' || v_attempt
            || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')], true);
        -- the claim line folded, as fold_line folds it: the lease, one more attempt, its token the last
        INSERT INTO storm_queue.run AS u (slug, since, token, holder, lease_token, lease_by, claimed, expires, ttl,
                                          attempts, last_token)
        VALUES (v_ready, (SELECT seq FROM storm_queue.state), v_token, p_holder, v_token, b.who, v_at, v_expires, v_ttl,
                v_attempt, v_token)
        ON CONFLICT (slug) DO UPDATE SET token = greatest(u.token, EXCLUDED.token), holder = EXCLUDED.holder,
            lease_token = EXCLUDED.lease_token, lease_by = EXCLUDED.lease_by, claimed = EXCLUDED.claimed,
            expires = EXCLUDED.expires, ttl = EXCLUDED.ttl, attempts = EXCLUDED.attempts,
            last_token = EXCLUDED.last_token, last_end = NULL;
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
        'line', v_lines[cardinality(v_lines)], 'blocked', to_jsonb(v_blocked));
END
$$;

UPDATE storm_queue.version SET version = 7;

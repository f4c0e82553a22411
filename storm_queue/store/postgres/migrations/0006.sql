-- Version 6: a claim no longer reads every run row (issue 21, item
-- 3). serve_claim (0005.sql) looked at every run row three times a claim:
-- for orphaned leases and lanes that spent their attempts, for the next
-- moment time alone changes the decision, and to count the slots taken. The
-- rows those questions can name are kept apart in storm_queue.watch, a copy
-- of the run rows that hold a lease, carry a schedule, or ended an attempt
-- other than ok without being quarantined, kept by a trigger on
-- storm_queue.run (whoever writes it: the fold trigger, an upgrade's
-- backfill, a hand edit); serve_claim asks it instead. serve_claim also
-- asks fewer statements: its walk in queue order reads each lane's
-- settled, finished and priority rows with the lane, and finds the claim's
-- mark (runs_at.open_from) on its way; each of those rows is looked up by
-- its key, as a scalar subquery (asked with EXISTS, the planner, the tables
-- seldom analysed, hashed the whole settled, result and priority tables at
-- every claim, a cost that grew with every lane finished). What it decides
-- and the lines it writes are unchanged (tests/database/test_served.py).

CREATE TABLE storm_queue.watch (
    slug text PRIMARY KEY,
    since bigint NOT NULL,
    lease_token bigint,
    expires text,
    quarantined text,
    attempts integer NOT NULL,
    last_end text,
    not_before text
);

-- Keep storm_queue.watch the run rows a claim must look at: a row is there,
-- as storm_queue.run holds it, exactly while it holds a lease, carries a
-- schedule, or ended its last attempt other than ok and is not quarantined.
CREATE FUNCTION storm_queue.run_watched() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM storm_queue.watch;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.slug IS DISTINCT FROM NEW.slug) THEN
        DELETE FROM storm_queue.watch WHERE slug = OLD.slug;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN NULL;
    END IF;
    IF NEW.lease_token IS NOT NULL OR NEW.not_before IS NOT NULL
       OR (NEW.quarantined IS NULL AND NEW.attempts > 0 AND NEW.last_end IS DISTINCT FROM 'ok') THEN
        INSERT INTO storm_queue.watch (slug, since, lease_token, expires, quarantined, attempts, last_end, not_before)
        VALUES (NEW.slug, NEW.since, NEW.lease_token, NEW.expires, NEW.quarantined, NEW.attempts, NEW.last_end,
                NEW.not_before)
        ON CONFLICT (slug) DO UPDATE SET since = EXCLUDED.since, lease_token = EXCLUDED.lease_token,
            expires = EXCLUDED.expires, quarantined = EXCLUDED.quarantined, attempts = EXCLUDED.attempts,
            last_end = EXCLUDED.last_end, not_before = EXCLUDED.not_before;
    ELSIF TG_OP = 'UPDATE' THEN
        DELETE FROM storm_queue.watch WHERE slug = NEW.slug;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER run_watched AFTER INSERT OR UPDATE OR DELETE ON storm_queue.run
    FOR EACH ROW EXECUTE FUNCTION storm_queue.run_watched();
CREATE TRIGGER run_watched_all AFTER TRUNCATE ON storm_queue.run
    FOR EACH STATEMENT EXECUTE FUNCTION storm_queue.run_watched();

-- the runs already folded
INSERT INTO storm_queue.watch (slug, since, lease_token, expires, quarantined, attempts, last_end, not_before)
SELECT slug, since, lease_token, expires, quarantined, attempts, last_end, not_before
FROM storm_queue.run
WHERE lease_token IS NOT NULL OR not_before IS NOT NULL
   OR (quarantined IS NULL AND attempts > 0 AND last_end IS DISTINCT FROM 'ok');

-- claim, as core/runs.py plan_claim and service/leases.py claim: take back
-- every orphaned lease (and quarantine what spent its attempts), then
-- decide as core/resolver.py decided does, walking the run order (the
-- priority lane, then queue order) only to the first ready lane; lease it
-- to p_holder for p_ttl seconds (NULL: the declared TTL) under the next fencing token when a slot is
-- free and no halt is in force, and mark blocked the lanes met before it.
-- Returns the decision, the lease, the halt met and the last line written.
CREATE OR REPLACE FUNCTION storm_queue.serve_claim(p_holder text, p_ttl integer, p_reason text, p_t double precision,
                                        p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b record;
    h storm_queue.runs_at;
    rec record;
    r storm_queue.run;
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
            IF v_open IS NULL AND NOT rec.done THEN  -- the mark: the first lane from it neither settled nor finished
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
    -- the mark moves past the lanes now settled or with a result row (each passed over once, not at every claim):
    -- the walk in queue order above found it on its way, from the mark to the lane it names, or to the queue's end;
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
                   AND NOT EXISTS (SELECT 1 FROM storm_queue.result x WHERE x.slug = rec.slug) THEN
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
    IF NOT v_unattended OR v_ready IS NULL THEN  -- the finished lanes, in run order, only when the decision names them
        v_finished := ARRAY(
            SELECT l.slug FROM storm_queue.lane l
            JOIN storm_queue.result x ON x.slug = l.slug
            LEFT JOIN storm_queue.priority p ON p.slug = l.slug
            LEFT JOIN storm_queue.run u ON u.slug = l.slug
            WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
              AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
            ORDER BY p.place IS NULL, p.place, l.pos);
    END IF;
    -- core/runs.py next_due: the first moment after now that time alone changes the decision (claim --wait)
    -- (and the slots taken: the leases held)
    SELECT (SELECT min(x.t COLLATE "C") FROM (
                SELECT expires AS t FROM storm_queue.watch WHERE lease_token IS NOT NULL
                UNION ALL SELECT not_before FROM storm_queue.watch WHERE not_before IS NOT NULL) x
            WHERE x.t COLLATE "C" > v_at COLLATE "C"),
           (SELECT count(*) FROM storm_queue.watch WHERE lease_token IS NOT NULL)
    INTO v_due, v_held;
    IF h.halt_seq IS NOT NULL THEN
        v_decision := 'halted';
    ELSIF cardinality(v_finished) > 0 AND NOT v_unattended THEN
        v_decision := 'review ' || array_to_string(v_finished, ' ');
    ELSIF v_ready IS NULL THEN  -- wait while any lane is left that is not settled
        v_decision := CASE WHEN EXISTS (SELECT 1 FROM storm_queue.lane l
                                        WHERE NOT EXISTS (SELECT 1 FROM storm_queue.settled s WHERE s.slug = l.slug))
                           THEN array_to_string('{wait}'::text[] || v_finished, ' ') ELSE 'empty' END;
    ELSIF v_held >= (b.policy->>'slots')::bigint THEN
        v_finished := ARRAY(
            SELECT l.slug FROM storm_queue.lane l
            JOIN storm_queue.result x ON x.slug = l.slug
            LEFT JOIN storm_queue.priority p ON p.slug = l.slug
            LEFT JOIN storm_queue.run u ON u.slug = l.slug
            WHERE l.slug NOT IN (SELECT slug FROM storm_queue.settled)
              AND NOT (u.lease_token IS NOT NULL AND storm_queue.result_token(x.body) IS DISTINCT FROM u.lease_token)
            ORDER BY p.place IS NULL, p.place, l.pos);
        v_decision := array_to_string('{wait}'::text[] || v_finished, ' ');
    ELSE
        SELECT * INTO r FROM storm_queue.run WHERE slug = v_ready;
        v_token := greatest(coalesce(r.token, 0), h.token_floor) + 1;
        v_expires := storm_queue.stamp(p_t + v_ttl);
        v_lines := v_lines || storm_queue.serve_append(v_at, b.who, ARRAY['claim'], ARRAY[
            ',"slug":' || storm_queue.json_str(v_ready) || ',"issue":' || storm_queue.json_str(v_issue)
            || ',"holder":' || storm_queue.json_str(p_holder) || ',"token":' || v_token || ',"ttl":' || v_ttl
            || ',"expires":' || storm_queue.json_str(v_expires) || ',"attempt":' || (coalesce(r.attempts, 0) + 1)
            || coalesce(',"reason":' || storm_queue.json_str(p_reason), '')]);
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
        'line', v_lines[cardinality(v_lines)]);
END
$$;

-- the roles granted before this version read it as they read every table of the storm (grant_select)
DO $$
DECLARE
    v_role text;
BEGIN
    FOR v_role IN SELECT m.role FROM storm_queue.member m JOIN pg_catalog.pg_roles r ON r.rolname = m.role LOOP
        EXECUTE format('GRANT SELECT ON storm_queue.watch TO %I', v_role);
    END LOOP;
END
$$;

UPDATE storm_queue.version SET version = 6;

-- One line of the log folded into storm_queue.run, runs_at, priority,
-- waiver and keyed, as core/fold.py Fold.step folds it (the runner actions,
-- a push or bump that schedules, a reset's floor, a halt and its end, a
-- lane's hold and its end, the priority lane, the waivers, the keys), reading the line's checked jsonb
-- (line_jsonb), never a pattern over its text.
CREATE OR REPLACE FUNCTION storm_queue.fold_line(e jsonb, p_seq bigint, p_line bytea) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_action text := e->>'action';
    r storm_queue.run%ROWTYPE;
    v_token bigint;
BEGIN
    PERFORM storm_queue.fold_keys(e->>'by', e->>'key', e->>'fingerprint', p_seq, e->>'at', p_line);
    IF v_action NOT IN ('claim', 'renew', 'finish', 'expire', 'recover', 'release', 'cancel', 'quarantine', 'unpark',
                        'schedule', 'push', 'bump', 'unbump', 'waive', 'adopt', 'reset', 'halt', 'resume', 'hold',
                        'unhold') THEN
        RETURN;
    END IF;
    IF v_action IN ('push', 'bump', 'unbump', 'waive') THEN
        PERFORM storm_queue.fold_shift(e);
    END IF;
    IF v_action IN ('push', 'bump', 'unbump', 'waive', 'adopt', 'halt', 'resume', 'hold', 'unhold') AND coalesce(e->>'noop', '') <> '' THEN
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
            INSERT INTO storm_queue.run (slug, since, not_before) VALUES (e->>'slug', p_seq, e->>'not_before')
            ON CONFLICT (slug) DO UPDATE SET not_before = EXCLUDED.not_before;
        END IF;
        RETURN;
    ELSIF v_action = 'reset' THEN
        UPDATE storm_queue.runs_at SET token_floor = greatest(token_floor, coalesce((e->>'abandons')::bigint, 0));
        RETURN;
    ELSIF v_action = 'halt' THEN
        UPDATE storm_queue.runs_at
        SET halt_seq = p_seq, halt_at = e->>'at', halt_by = e->>'by', halt_reason = e->>'reason';
        RETURN;
    ELSIF v_action = 'resume' THEN
        UPDATE storm_queue.runs_at SET halt_seq = NULL, halt_at = NULL, halt_by = NULL, halt_reason = NULL;
        RETURN;
    END IF;
    SELECT * INTO r FROM storm_queue.run WHERE slug = e->>'slug';
    IF NOT FOUND THEN
        r.slug := e->>'slug';
        r.since := p_seq;
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
    ELSIF v_action = 'hold' THEN
        r.held_seq := p_seq;
        r.held_at := e->>'at';
        r.held_by := e->>'by';
        r.held_reason := e->>'reason';
    ELSIF v_action = 'unhold' THEN
        r.held_seq := NULL;
        r.held_at := NULL;
        r.held_by := NULL;
        r.held_reason := NULL;
    END IF;
    INSERT INTO storm_queue.run VALUES (r.*)
    ON CONFLICT (slug) DO UPDATE SET token = EXCLUDED.token, holder = EXCLUDED.holder,
        lease_token = EXCLUDED.lease_token, lease_by = EXCLUDED.lease_by, claimed = EXCLUDED.claimed,
        expires = EXCLUDED.expires, ttl = EXCLUDED.ttl, attempts = EXCLUDED.attempts,
        last_token = EXCLUDED.last_token, last_end = EXCLUDED.last_end, quarantined = EXCLUDED.quarantined,
        not_before = EXCLUDED.not_before, cancelled_at = EXCLUDED.cancelled_at, cancelled_by = EXCLUDED.cancelled_by,
        cancelled_reason = EXCLUDED.cancelled_reason, cancelled_tokens = EXCLUDED.cancelled_tokens,
        held_seq = EXCLUDED.held_seq, held_at = EXCLUDED.held_at, held_by = EXCLUDED.held_by,
        held_reason = EXCLUDED.held_reason;
END
$$;

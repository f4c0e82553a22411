-- next's blocked marks (service/storm.py next, store.decided), as a runner
-- role's next writes them: computed here as the claim's walk computes them
-- (decided, at the storm's time), never given by the caller. Returns the
-- lanes marked.
CREATE OR REPLACE FUNCTION storm_queue.serve_decided(p_wait_ms integer) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    w record;
    v_at text;
BEGIN
    IF session_user IS DISTINCT FROM (SELECT operator FROM storm_queue.storm)
       AND NOT EXISTS (SELECT 1 FROM storm_queue.member m WHERE m.role = session_user AND m.kind = 'runner') THEN
        RAISE EXCEPTION 'role % is not a runner of this storm', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('lock_timeout', greatest(coalesce(p_wait_ms, 1), 1)::text, true);
    LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE;
    IF storm_queue.head_damage() IS NOT NULL OR (SELECT withdrawn FROM storm_queue.storm) IS NOT NULL THEN
        RETURN jsonb_build_object('marked', '[]'::jsonb);
    END IF;
    v_at := storm_queue.stamp(storm_queue.clock_now());
    SELECT * INTO w FROM storm_queue.decided(v_at);
    PERFORM storm_queue.serve_mark_blocked(w.blocked, w.gones, v_at);
    RETURN jsonb_build_object('marked', to_jsonb(w.blocked));
END
$$;

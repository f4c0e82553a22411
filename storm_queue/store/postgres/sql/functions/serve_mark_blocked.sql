-- core/ledgers.py blocked_result, as next marks the lanes it met (a lane
-- that has a result row keeps it)
CREATE OR REPLACE FUNCTION storm_queue.serve_mark_blocked(p_blocked text[], p_gones text[], p_at text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    FOR i IN 1..cardinality(p_blocked) LOOP
        INSERT INTO storm_queue.result (slug, body)
        VALUES (p_blocked[i], jsonb_build_object(
            'completed', false, 'status', 'blocked', 'blocked_on', split_part(p_gones[i], ' ', 1),
            'blocked_on_all', to_jsonb(string_to_array(p_gones[i], ' ')), 'at', p_at, 'by', 'storm-queue next'))
        ON CONFLICT (slug) DO NOTHING;
    END LOOP;
END
$$;

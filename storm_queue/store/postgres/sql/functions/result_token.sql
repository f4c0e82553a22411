-- The token a lane's result row carries when it is a whole positive number
-- (what store/postgres/rows.py reads of it), else NULL.
CREATE OR REPLACE FUNCTION storm_queue.result_token(p_body jsonb) RETURNS numeric LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN CASE WHEN jsonb_typeof(p_body->'token') = 'number' AND (p_body->>'token') ~ '^[0-9]+$'
                         AND (p_body->>'token')::numeric > 0 THEN (p_body->>'token')::numeric END;
END
$$;

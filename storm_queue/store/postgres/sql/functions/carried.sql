-- service/passage._carry: the request's reason, key and fingerprint, as its own line ends with them
CREATE OR REPLACE FUNCTION storm_queue.carried(p_reason text, p_key text, p_fingerprint text) RETURNS text LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN coalesce(',"reason":' || storm_queue.json_str(p_reason), '')
            || coalesce(',"key":' || storm_queue.json_str(p_key) || ',"fingerprint":' || storm_queue.json_str(p_fingerprint), '');
END
$$;

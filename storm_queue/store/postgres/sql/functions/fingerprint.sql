-- core/outcome.Request.fingerprint: the first 32 hex digits of the SHA-256
-- of the JSON list [verb, slug, reason, source, [args...]] as core/jsoncodec
-- writes it (", " between items), p_args being the args' items so written
CREATE OR REPLACE FUNCTION storm_queue.fingerprint(p_verb text, p_slug text, p_reason text, p_source text, p_args text)
RETURNS text LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN left(encode(sha256(convert_to(
            '[' || storm_queue.json_str(p_verb) || ', ' || coalesce(storm_queue.json_str(p_slug), 'null') || ', '
            || coalesce(storm_queue.json_str(p_reason), 'null') || ', ' || coalesce(storm_queue.json_str(p_source), 'null')
            || ', [' || p_args || ']]', 'UTF8')), 'hex'), 32);
END
$$;

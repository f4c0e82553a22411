-- The shape refusal of a slug, a source, a token (service/leases.py:
-- core/shapes.shape_names, shape_token), or NULLs.
CREATE OR REPLACE FUNCTION storm_queue.serve_shape(p_slug text, p_source text, p_token numeric, OUT code text, OUT message text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_slug IS NOT NULL AND NOT storm_queue.is_name(p_slug) THEN
        code := 'invalid_slug';
        message := 'slug ' || storm_queue.quoted(p_slug) || ' is not a name: ' || storm_queue.why_not_name(p_slug);
    ELSIF p_source IS NOT NULL AND NOT storm_queue.is_name(p_source) THEN
        code := 'invalid_source';
        message := 'source ' || storm_queue.quoted(p_source) || ' is not a name: ' || storm_queue.why_not_name(p_source);
    ELSIF p_token < 1 THEN
        code := 'invalid_token';
        message := 'token "' || p_token || '" is not a positive whole number; give the token the claim printed';
    END IF;
END
$$;

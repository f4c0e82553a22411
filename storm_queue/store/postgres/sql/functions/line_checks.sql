-- line_field compiled, one row an action, for line_admitted: a jsonpath
-- predicate true when each field of the action (its own, then the common
-- ones) is present where required and of its kind where present ('str',
-- 'str?', 'int', 'int?', 'bool', 'list' of strings; an 'object' or 'lane
-- rows' field must be absent: line_admitted leaves such a line to
-- line_refusal), and the fields whose values must be names. The schema
-- keeps its rows in storm_queue.line_check (a test holds the two equal).
CREATE OR REPLACE FUNCTION storm_queue.line_checks() RETURNS TABLE (action text, test jsonpath, named text[])
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY
    SELECT a.action,
           string_agg('(' || replace(CASE WHEN f.need = 'required' THEN '' ELSE '!exists($."F") || ' END
               || CASE f.kind WHEN 'str' THEN '$."F".type() == "string"'
                              WHEN 'str?' THEN '($."F".type() == "string" || $."F".type() == "null")'
                              WHEN 'int' THEN '$."F".type() == "number"'
                              WHEN 'int?' THEN '($."F".type() == "number" || $."F".type() == "null")'
                              WHEN 'bool' THEN '$."F".type() == "boolean"'
                              WHEN 'list' THEN '($."F".type() == "array" && !exists($."F"[*] ? (@.type() != "string")))'
                              ELSE '!exists($."F")' END, '"F"', '"' || f.field || '"') || ')',
                      ' && ' ORDER BY f.field)::jsonpath,
           coalesce(array_agg(f.field ORDER BY f.field) FILTER (WHERE f.named), '{}')
    FROM (SELECT DISTINCT lf.action FROM storm_queue.line_field lf WHERE lf.action <> '*') a
    JOIN storm_queue.line_field f ON f.action IN ('*', a.action)
    GROUP BY a.action;
END
$$;

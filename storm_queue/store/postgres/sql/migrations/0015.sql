-- Version 15, from version 14: the insert check's quick yes (issue 32,
-- item 5). A plain line (one flat JSON object of plain values, as every
-- serving function writes) is admitted by line_admitted, which reads it
-- once as jsonb and asks its action's fields of it in one jsonpath
-- predicate compiled from line_field (the new table line_check, filled by
-- line_checks; the upgrade grants it to the roles that read the storm's
-- tables); any other line is read by line_refusal, as before. No other
-- table changes. (A storm made at version 15 and told it is older,
-- as tests do, already has the table: it is filled again.)
SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE storm_queue.version SET version = 15;

CREATE TABLE IF NOT EXISTS storm_queue.line_check (
    action text PRIMARY KEY,
    test jsonpath NOT NULL,
    named text[] NOT NULL
);

-- {functions}
DELETE FROM storm_queue.line_check;
INSERT INTO storm_queue.line_check (action, test, named) SELECT * FROM storm_queue.line_checks();

-- Version 1: the schema records its version. A storm made before this
-- (storm-queue at 5cbddde and earlier) has no version table: version 0.
-- Every migration ends by recording the version it carries the schema to.
CREATE TABLE storm_queue.version (
    id integer PRIMARY KEY CHECK (id = 1),
    version integer NOT NULL
);
INSERT INTO storm_queue.version (id, version) VALUES (1, 1);

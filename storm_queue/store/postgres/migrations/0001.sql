-- Schema version 1: the schema records its version. A storm made before
-- this (storm-queue at 5cbddde and earlier) has no version table: it is
-- version 0, the tables of schema.sql without this one.
CREATE TABLE storm_queue.version (
    id integer PRIMARY KEY CHECK (id = 1),
    version integer NOT NULL
);
INSERT INTO storm_queue.version (id, version) VALUES (1, 0);

-- Version 11, from version 10: a database storm holds one lane (issue 33,
-- item 3). storm_queue.run keeps the hold in force (its line's seq, time,
-- principal and reason; held_seq NULL: not held), folded from hold and
-- unhold lines (functions/fold_line.sql), and the insert check admits
-- those lines (line_field). Run again over its own result, it changes
-- nothing.
ALTER TABLE storm_queue.run
    ADD COLUMN IF NOT EXISTS held_seq bigint,
    ADD COLUMN IF NOT EXISTS held_at text,
    ADD COLUMN IF NOT EXISTS held_by text,
    ADD COLUMN IF NOT EXISTS held_reason text;

INSERT INTO storm_queue.line_field (action, field, kind, need, named) VALUES
    ('hold', 'slug', 'str', 'required', true), ('hold', 'reason', 'str', 'required', false),
    ('unhold', 'slug', 'str', 'required', true), ('unhold', 'reason', 'str', 'required', false)
ON CONFLICT DO NOTHING;

-- what the fold keeps of the log (the runs and their holds, the priority
-- lane, the waivers, the keys), folded from its lines as a new storm folds
-- each one written: the tree's fold_line writes every column above, so it
-- runs here, after the last table change (a storm from version 0 is folded
-- for the first time; one at 9 or 10 never recorded a hold, whose requests
-- were refused there, and is folded again to the same rows)
UPDATE storm_queue.version SET version = 11;
-- (re-derived by the last migration, 0012: only the last re-derives, after every table change)

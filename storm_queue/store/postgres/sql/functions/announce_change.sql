-- Version 12: a change that may let a lane be claimed, or end a lease, is
-- announced (issue 32, item 2); no other is. A line of the log announces
-- unless it is a claim, a renew, a refusal or a no-op (a claim takes work,
-- a renew moves an expiry, which the waiters compute themselves, and a
-- refusal or a no-op changes nothing): a finish, a release, a cancel, an
-- add or a push, a settle, a resume, a waive, an unpark, a hold or an
-- unhold, an expire or a recover, a schedule, and the operator's rarer
-- lines (bump, declare, halt, grant, upgrade...) do. A hand edit announces
-- by its rows: a lane or settled row inserted, updated or deleted, a result
-- row updated or deleted (a result row inserted is a finish's, whose line
-- announces, or next's blocked mark, which frees nothing).
--
-- A line of the log is announced when its transaction commits (the trigger
-- is deferred), and not when that transaction also recorded a claim after
-- it and every slot the runner policy declares is then held: no waiting
-- claim could lease anything, so a runner's finish --then-claim, or a
-- claim that took an expired lease back and leased, wakes no one while the
-- storm is full (a waiting `lease --wait` wakes at the expiry it computed;
-- issue 32, item 5: 64 idle claim --wait waiters beside 8 busy runners).
-- Fired at commit, outside the serving function that inserted the line, it
-- runs as its owner (SECURITY DEFINER), as it did inside: a runner role
-- may not write the notice row itself.
--
-- The notice is one per transaction (the notice row's xmin says this
-- transaction already sent one), sent on the channel storm_queue when the
-- transaction commits, never for one rolled back. Its payload is the
-- notice's number (storm_queue.notice.sent, one more each time, so in the
-- order the notices commit: the row's lock orders them) and a MAC of it
-- under the storm's key (sha256(key || sha256(key || number)), hex): any
-- role that can connect to the database may NOTIFY storm_queue, or LISTEN
-- and copy a payload, but only the storm's members can read the key, and a
-- waiter takes a number only once and only past the last it took
-- (store/postgres/changes.py), so a stranger's notice wakes no one.
CREATE OR REPLACE FUNCTION storm_queue.announce_change()
RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET standard_conforming_strings = on AS $$
DECLARE
    v_line jsonb;
    v_sent bigint;
    v_key bytea;
BEGIN
    IF EXISTS (SELECT 1 FROM storm_queue.notice WHERE xmin = pg_current_xact_id()::xid) THEN
        RETURN NULL;  -- sent already: the checks below would each read the transaction's later lines again
    END IF;
    IF TG_TABLE_NAME = 'event' THEN
        v_line := storm_queue.line_jsonb(NEW.line);
        IF v_line->>'action' IN ('claim', 'renew', 'refused') OR v_line ? 'noop' THEN
            RETURN NULL;
        END IF;
        IF EXISTS (SELECT 1 FROM storm_queue.event e WHERE e.seq > NEW.seq
                   AND storm_queue.line_jsonb(e.line)->>'action' = 'claim')
           AND (SELECT count(*) FROM storm_queue.watch w WHERE w.lease_token IS NOT NULL)
               >= (SELECT (s.runner->>'slots')::bigint FROM storm_queue.storm s) THEN
            RETURN NULL;  -- every slot held, by this transaction's claim among them
        END IF;
    END IF;
    UPDATE storm_queue.notice SET sent = sent + 1
    WHERE xmin <> pg_current_xact_id()::xid
    RETURNING sent, key INTO v_sent, v_key;
    IF FOUND THEN
        PERFORM pg_notify('storm_queue', v_sent || ' '
                          || encode(sha256(v_key || sha256(v_key || convert_to(v_sent::text, 'UTF8'))), 'hex'));
    END IF;
    RETURN NULL;
END
$$;

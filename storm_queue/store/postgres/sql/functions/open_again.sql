-- the triggers that keep runs_at's marks and watch from a fold (or from the
-- operator's hand edit of a lane, settled or result row, which moves the
-- marks back: its own work, not the derived tables'), noted as the fold's
-- (a lane added after the queue's mark moves neither: the priority lane's
-- mark passes only lanes settled, finished, leased or quarantined)
CREATE OR REPLACE FUNCTION storm_queue.open_again() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.pos >= (SELECT open_from FROM storm_queue.runs_at) THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM set_config('storm_queue.folding', 'on', true);
    UPDATE storm_queue.runs_at SET open_from = -9223372036854775808, prio_from = -9223372036854775808,
                                  later_until = NULL, open_back = NULL, prio_back = NULL
    WHERE open_from <> -9223372036854775808 OR prio_from <> -9223372036854775808;
    RETURN NULL;
END
$$;

-- _console_cancels_rollup: counts each finished minute of the last hour not counted yet into
-- console_cancel_minutes, oldest first and at most 15 minutes a call, and deletes the rows older
-- than a day; returns how many minutes it added. The scanner's sweep calls it as it finishes
-- (scanner_run_finish), off the claim path. The bound keeps one call's work (a lookup per
-- cancel) well inside the sweep's statement timeout after a gap in the sweeps at a high cancel
-- rate; the next sweeps count the rest, and the overview counts what is not counted yet itself.
-- A minute is counted once it ended two minutes ago: closed_at is its cancel's transaction
-- start, so a cancel that commits later than that after it began would be missed (the gate's
-- cancels take milliseconds). Concurrent calls count a minute once (the key). Not granted to
-- anyone.
CREATE OR REPLACE FUNCTION ordergate._console_cancels_rollup() RETURNS integer
LANGUAGE sql SET search_path = ordergate, pg_temp AS $$
    WITH first AS (
        SELECT greatest(max(r.minute) + interval '1 minute',
                        date_trunc('minute', now()) - interval '60 minutes') AS lo
          FROM console_cancel_minutes r
    ), span AS (
        SELECT f.lo, least(date_trunc('minute', now() - interval '2 minutes'),
                           f.lo + interval '15 minutes') AS hi
          FROM first f
    ), gone AS (
        DELETE FROM console_cancel_minutes r WHERE r.minute < now() - interval '1 day'
    ), added AS (
        INSERT INTO console_cancel_minutes (minute, consumer, scanner, manual)
        SELECT c.minute, c.consumer, c.scanner, c.manual
          FROM span, _console_cancels(span.lo, span.hi) c
        ON CONFLICT (minute) DO NOTHING
        RETURNING 1
    )
    SELECT count(*)::integer FROM added;
$$;
COMMENT ON FUNCTION ordergate._console_cancels_rollup() IS
    'Internal: counts the finished minutes'' cancels into console_cancel_minutes (the scanner''s sweep)';

-- The console's cancels per minute: console_overview shows the same cancels of the last hour
-- whether the minutes come from console_cancel_minutes or from the orders; it reads the counted
-- minutes from the table (a changed count shows) and only the minutes after them from the
-- orders; _console_cancels_rollup counts a finished minute once, two minutes after it ended,
-- the last hour's at most, 15 a call oldest first, paid orders and older cancels left out, and
-- deletes rows older than a day; scanner_run_finish calls it at the end of a sweep. Each check runs in one transaction, so
-- that now() and its minute stay put.

SELECT og_reset();

-- Cancels through the gate (consumer, scanner, by hand), a payment, each later moved to its minute.
SELECT ordergate.place_order(n, 100, '[]', NULL, now() - interval '1 second')
  FROM unnest(ARRAY['K1', 'K2', 'K3', 'K4', 'K5', 'K6', 'K7', 'K8', 'L1']) n;
SELECT t_eq('consumer cancels', (SELECT count(*) FROM ordergate.claim_cancel(ARRAY['K1', 'K2', 'K6', 'K7', 'K8', 'L1'], 'timeout_consumer') WHERE outcome = 'cancelled'), 6::bigint);
SELECT t_eq('scanner cancel', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['K3'], 'timeout_scanner')), 'cancelled');
SELECT t_eq('closed by hand', (SELECT outcome FROM ordergate.close_order('K4', 'ops', 'test')), 'cancelled');
SELECT t_eq('paid', (SELECT outcome FROM ordergate.claim_payment('K5', 'T-K5', 100, 'card')), 'paid');

-- Seconds from the current minute's start each order's closed_at is moved to (triggers off: the
-- times a claim in that minute would have written).
CREATE TEMP TABLE shift (order_no text, off_s int);
INSERT INTO shift VALUES ('K1', -595), ('K2', -590), ('K3', -415), ('K4', -235), ('K5', -590),
                         ('K6', -3655), ('K7', -115), ('K8', -175), ('L1', 0);
CREATE FUNCTION pg_temp.shift_now() RETURNS void LANGUAGE sql AS $$
    SET LOCAL session_replication_role = replica;
    UPDATE ordergate.orders o SET closed_at = date_trunc('minute', now()) + s.off_s * interval '1 second'
      FROM shift s WHERE s.order_no = o.order_no;
    SET LOCAL session_replication_role = origin;
$$;
-- The overview's cancels as "minutes from now's minute:source:n".
CREATE FUNCTION pg_temp.cancels() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg((extract(epoch FROM (c ->> 'minute')::timestamptz - date_trunc('minute', now())) / 60)::int
                      || ':' || (c ->> 'source') || ':' || (c ->> 'n'), ',' ORDER BY ord)
      FROM jsonb_array_elements(ordergate.console_overview() -> 'cancels') WITH ORDINALITY AS x(c, ord);
$$;
CREATE FUNCTION pg_temp.live_from() RETURNS int LANGUAGE sql AS $$
    SELECT (extract(epoch FROM (ordergate.console_overview() ->> 'cancels_live_from')::timestamptz
                                - date_trunc('minute', now())) / 60)::int;
$$;

BEGIN;
SELECT pg_temp.shift_now();
SELECT t_eq('nothing counted yet: the hour from the orders',
            pg_temp.cancels(), '-10:consumer:2,-7:scanner:1,-4:manual:1,-3:consumer:1,-2:consumer:1,0:consumer:1');
SELECT t_eq('nothing counted yet: live from the hour''s first minute', pg_temp.live_from(), -59);
CREATE TEMP TABLE before_rollup AS SELECT ordergate.console_overview() -> 'cancels' AS c;
SELECT t_eq('rollup: the hour''s oldest 15 minutes first, zeros too', ordergate._console_cancels_rollup(), 15);
SELECT t_eq('rollup: the newest minute counted so far',
            (SELECT max(minute) FROM ordergate.console_cancel_minutes), date_trunc('minute', now()) - interval '46 minutes');
SELECT t_eq('partly counted: live from the first minute not counted', pg_temp.live_from(), -45);
SELECT t_eq('partly counted: the same cancels', ordergate.console_overview() -> 'cancels', (SELECT c FROM before_rollup));
SELECT t_eq('rollup: the next 15, 15, then the 13 that ended two minutes ago',
            ordergate._console_cancels_rollup() || ',' || ordergate._console_cancels_rollup() || ','
            || ordergate._console_cancels_rollup(), '15,15,13');
SELECT t_eq('rollup: counts, not the paid one, not the one 61 minutes ago, not the minute still open',
            (SELECT sum(consumer) || '/' || sum(scanner) || '/' || sum(manual) FROM ordergate.console_cancel_minutes), '3/1/1');
SELECT t_eq('rollup: the newest minute counted ended two to three minutes ago',
            (SELECT max(minute) FROM ordergate.console_cancel_minutes), date_trunc('minute', now()) - interval '3 minutes');
SELECT t_eq('rollup again: nothing new', ordergate._console_cancels_rollup(), 0);
SELECT t_eq('counted: the overview shows the same cancels', ordergate.console_overview() -> 'cancels', (SELECT c FROM before_rollup));
SELECT t_eq('counted: live from the first minute not counted', pg_temp.live_from(), -2);
-- The overview reads the counts (a count changed in the table shows), and the orders after them.
UPDATE ordergate.console_cancel_minutes SET scanner = 5 WHERE minute = date_trunc('minute', now()) - interval '7 minutes';
SELECT t_eq('counted minutes read from the table',
            pg_temp.cancels(), '-10:consumer:2,-7:scanner:5,-4:manual:1,-3:consumer:1,-2:consumer:1,0:consumer:1');
INSERT INTO ordergate.console_cancel_minutes (minute, consumer, scanner, manual)
VALUES (date_trunc('minute', now()) - interval '2 days', 1, 0, 0);
SELECT t_eq('rollup with nothing new', ordergate._console_cancels_rollup(), 0);
SELECT t_eq('a row older than a day deleted by it',
            (SELECT count(*) FROM ordergate.console_cancel_minutes WHERE minute < now() - interval '1 day'), 0::bigint);
ROLLBACK;

-- The scanner's sweep counts the minutes as it finishes.
BEGIN;
SELECT pg_temp.shift_now();
SELECT run_id AS sweep FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '1 minute', NULL) WHERE kind = 'run' \gset
SELECT t_eq('no counts before the sweep finishes', (SELECT count(*) FROM ordergate.console_cancel_minutes), 0::bigint);
SELECT t_eq('sweep finishes', (SELECT status FROM ordergate.scanner_run_finish(:sweep, 'done', 'complete', NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0)), 'done');
SELECT t_eq('the sweep counted the hour''s oldest 15 minutes',
            (SELECT count(*) || ':' || min(minute - date_trunc('minute', now())) FROM ordergate.console_cancel_minutes), '15:-01:00:00');
-- The sweeps after it count the rest (the same call, again: one a sweep).
SELECT ordergate._console_cancels_rollup() FROM generate_series(1, 3);
SELECT t_eq('the sweeps counted the hour''s finished minutes',
            (SELECT count(*) || ':' || sum(consumer) || '/' || sum(scanner) || '/' || sum(manual) FROM ordergate.console_cancel_minutes), '58:3/1/1');
ROLLBACK;

-- The claim path writes no counts.
SELECT t_eq('claims wrote no counts', (SELECT count(*) FROM ordergate.console_cancel_minutes), 0::bigint);

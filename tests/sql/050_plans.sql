-- Plan stability: the gate keeps its plan whatever the statistics say and however often a session
-- has called it. PostgreSQL switches a cached statement to a generic plan (one plan for every
-- argument value) after five custom ones; with no statistics yet (a flash sale's first minute),
-- the generic plan of the cancel's lock pass walked every overdue pending order and tested it
-- against the array, instead of looking up the listed orders: a batch of 500 among 20,000 went
-- from 40 ms to 400 ms at the sixth call (the 0.1.0 functions read all 20,000 entries here).
-- force_generic_plan makes every call generic; the count of index entries read shows which plan
-- ran (work, not time: no flake).

SELECT og_reset();
-- 20,000 orders placed through place_order on 40 hot SKUs, due at once, as in a flash sale
-- (tools/bench/sql/bench_flash_sale.sh); autovacuum is kept away, the state below is planted.
ALTER TABLE ordergate.orders SET (autovacuum_enabled = false);
SELECT ordergate.add_stock('P' || i, 100000000) FROM generate_series(1, 40) i;
SELECT ordergate.add_coupon('PC' || i) FROM generate_series(1, 5001) i;
DO $$
BEGIN
    FOR i IN 1..20000 LOOP
        PERFORM ordergate.place_order('PL' || lpad(i::text, 5, '0'), 1000,
            jsonb_build_array(jsonb_build_object('sku', 'P' || (1 + i % 40), 'qty', 1),
                              jsonb_build_object('sku', 'P' || (1 + (i * 7) % 40), 'qty', 2)),
            CASE WHEN i % 4 = 0 THEN 'PC' || (i / 4) END, now() - interval '1 second');
    END LOOP;
END
$$;
-- What autovacuum does on its own a minute into such a sale: a VACUUM for the inserts (since
-- PostgreSQL 13), which sets the table's size for the planner, and no ANALYZE yet.
VACUUM ordergate.orders;

-- A backend flushes its counters when it goes idle: force that flush in one statement, read the
-- counter in the next (pg_stat_force_next_flush, then a fresh snapshot).
CREATE FUNCTION pg_temp.overdue_idx_reads() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_stat_clear_snapshot();
    RETURN (SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'orders_overdue_idx');
END
$$;

-- Each call cancels 500 listed orders; a plan that walks the overdue index reads ~20,000 entries
-- (and compares each with the 500 of the array).
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r0 \gset
SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'PL' || lpad(i::text, 5, '0') FROM generate_series(1, 500) i), 'timeout_consumer');
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r1 \gset
SELECT t_check('claim_cancel under generic plans looks the listed orders up',
               :r1 - :r0 < 2000, format('%s overdue index entries read for 500 orders', :r1 - :r0));
SELECT t_eq('claim_cancel under generic plans cancels',
            (SELECT count(*) FROM ordergate.orders WHERE order_no <= 'PL00500' AND status = 'cancelled'), 500::bigint);

-- The sixth call of a session, in the default mode.
RESET plan_cache_mode;
SELECT count(*) FROM generate_series(0, 5) b,
       LATERAL ordergate.claim_cancel(ARRAY(SELECT 'PL' || lpad((500 + b * 500 + i)::text, 5, '0')
                                              FROM generate_series(1, 20) i), 'timeout_consumer');
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r2 \gset
SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'PL' || lpad(i::text, 5, '0') FROM generate_series(3501, 4000) i), 'timeout_consumer');
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r3 \gset
SELECT t_check('claim_cancel after a session''s sixth call looks the listed orders up',
               :r3 - :r2 < 2000, format('%s overdue index entries read for 500 orders', :r3 - :r2));

-- With statistics (autovacuum analyzes a table that grew by 10 %: minutes into a sale), the generic
-- plan of a lookup by an array changes again.
ANALYZE ordergate.orders;
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS a0 \gset
SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'PL' || lpad(i::text, 5, '0') FROM generate_series(4001, 4500) i), 'timeout_consumer');
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS a1 \gset
SELECT t_check('claim_cancel under generic plans, analyzed, looks the listed orders up',
               :a1 - :a0 < 2000, format('%s overdue index entries read for 500 orders', :a1 - :a0));
RESET plan_cache_mode;

-- close_order shares the lock pass.
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r4 \gset
SELECT * FROM ordergate.close_order('PL10000', 'ops', 'plan test');
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r5 \gset
SELECT t_check('close_order under generic plans looks the order up',
               :r5 - :r4 < 2000, format('%s overdue index entries read for 1 order', :r5 - :r4));
RESET plan_cache_mode;
ALTER TABLE ordergate.orders RESET (autovacuum_enabled);
SELECT t_eq('plans: books balance', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- due_times (the consumer's schedule lookup) has the same shape of argument.
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r6 \gset
SELECT t_eq('due_times under generic plans',
            (SELECT count(*) FROM ordergate.due_times(ARRAY(SELECT 'PL' || lpad(i::text, 5, '0') FROM generate_series(15001, 15500) i))),
            500::bigint);
SELECT pg_stat_force_next_flush();
SELECT pg_temp.overdue_idx_reads() AS r7 \gset
SELECT t_check('due_times under generic plans looks the listed orders up',
               :r7 - :r6 < 2000, format('%s overdue index entries read for 500 orders', :r7 - :r6));
RESET plan_cache_mode;

-- Plan stability without statistics: the cancel path reads what it claims and no more, in the
-- state a new database, a restore, a pg_upgrade or a flash sale's first minute leaves the tables
-- in: never vacuumed nor analyzed (pg_class.reltuples -1, no pg_statistic rows), then vacuumed
-- but not analyzed (sizes known, no column statistics). Planned from defaults, the winners'
-- lines became a hash join over every order_items row (or a merge join along the whole primary
-- key), the claim a sequential scan of orders and the coupons update one of coupons: each call
-- cost more the bigger the tables. Counted as rows read per table (work, not time: no flake).

SELECT og_reset();
-- og_reset truncates (reltuples -1 again); 050_plans analyzed orders: forget its statistics.
DELETE FROM pg_statistic
 WHERE starelid IN ('ordergate.orders'::regclass, 'ordergate.order_items'::regclass,
                    'ordergate.coupons'::regclass, 'ordergate.inventory'::regclass);
ALTER TABLE ordergate.orders SET (autovacuum_enabled = false);
ALTER TABLE ordergate.order_items SET (autovacuum_enabled = false);
ALTER TABLE ordergate.coupons SET (autovacuum_enabled = false);
ALTER TABLE ordergate.inventory SET (autovacuum_enabled = false);

-- 30,000 due orders with 2 lines each over 50 SKUs and a locked coupon on one in three, loaded
-- in bulk with the triggers off (as a restore would), stock set to what they hold.
SET session_replication_role = replica;
INSERT INTO ordergate.inventory (sku, available, total)
SELECT 'NS' || s, 1000000, 1000000 FROM generate_series(0, 49) s;
INSERT INTO ordergate.coupons (coupon_id, state)
SELECT 'NSC' || i, 'locked' FROM generate_series(1, 30000) i WHERE i % 3 = 0;
INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at, original_expire_at)
SELECT 'NS' || lpad(i::text, 5, '0'), 'pending_payment', 1000,
       CASE WHEN i % 3 = 0 THEN 'NSC' || i END, now() - interval '1 minute', now() - interval '1 minute'
  FROM generate_series(1, 30000) i;
INSERT INTO ordergate.order_items (order_no, sku, qty)
SELECT 'NS' || lpad(i::text, 5, '0'), 'NS' || ((i * 7 + j * 13) % 50), 1 + j
  FROM generate_series(1, 30000) i, generate_series(0, 1) j;
UPDATE ordergate.inventory v SET total = v.available + h.q
  FROM (SELECT sku, sum(qty) AS q FROM ordergate.order_items GROUP BY sku) h
 WHERE h.sku = v.sku;
RESET session_replication_role;

SELECT t_eq('no statistics: orders never vacuumed nor analyzed',
            (SELECT reltuples FROM pg_class WHERE oid = 'ordergate.orders'::regclass), -1::real);
SELECT t_eq('no statistics: no column statistics',
            (SELECT count(*) FROM pg_statistic
              WHERE starelid IN ('ordergate.orders'::regclass, 'ordergate.order_items'::regclass,
                                 'ordergate.coupons'::regclass)), 0::bigint);

-- Rows this backend read from each table, sequentially and through indexes, so far; flushed
-- first (pg_stat_force_next_flush in the statement before).
CREATE FUNCTION pg_temp.rows_read(p_rel regclass) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_stat_clear_snapshot();
    RETURN (SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
              FROM pg_stat_user_tables WHERE relid = p_rel);
END
$$;
CREATE FUNCTION pg_temp.index_reads(p_rel regclass) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_stat_clear_snapshot();
    RETURN (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relid = p_rel);
END
$$;

-- One call of 500 orders (a batch of the consumer) from p_first, then the counters' flush; the
-- caller reads them in its next statement. About 500 orders, 1,000 lines and 167 coupons are
-- what it must read; the plans from defaults read 30,000, 60,000 and 10,000.
CREATE FUNCTION pg_temp.claim_500(p_first int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) FILTER (WHERE outcome = 'cancelled') INTO n
      FROM ordergate.claim_cancel(ARRAY(SELECT 'NS' || lpad((p_first + i)::text, 5, '0')
                                          FROM generate_series(0, 499) i), 'timeout_consumer');
    PERFORM pg_stat_force_next_flush();
    RETURN n;
END
$$;

-- What this backend has read from each table so far.
CREATE FUNCTION pg_temp.snap() RETURNS TABLE (o bigint, i bigint, x bigint, c bigint) LANGUAGE sql AS $$
    SELECT pg_temp.rows_read('ordergate.orders'), pg_temp.rows_read('ordergate.order_items'),
           pg_temp.index_reads('ordergate.order_items'), pg_temp.rows_read('ordergate.coupons')
$$;

SELECT pg_stat_force_next_flush();
SELECT o AS o0, i AS i0, x AS x0, c AS c0 FROM pg_temp.snap() \gset
SELECT pg_temp.claim_500(1) AS won1 \gset
SELECT o AS o1, i AS i1, x AS x1, c AS c1 FROM pg_temp.snap() \gset
SELECT t_eq('no statistics: the call cancels its 500', :won1::bigint, 500::bigint);
SELECT t_check('no statistics: the claim reads the orders it claims',
               :o1 - :o0 < 3000, format('%s orders rows read for 500 orders', :o1 - :o0));
SELECT t_check('no statistics: the winners'' lines are probed, not scanned',
               :i1 - :i0 < 3000 AND :x1 - :x0 < 3000,
               format('%s order_items rows and %s index entries read for 1000 lines', :i1 - :i0, :x1 - :x0));
SELECT t_check('no statistics: the coupons are looked up',
               :c1 - :c0 < 1000, format('%s coupons rows read for 167 coupons', :c1 - :c0));

-- Vacuumed, still not analyzed (autovacuum's insert VACUUM comes first in a sale).
VACUUM ordergate.orders;
VACUUM ordergate.order_items;
VACUUM ordergate.coupons;
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
SELECT o AS o2, i AS i2, x AS x2, c AS c2 FROM pg_temp.snap() \gset
SELECT pg_temp.claim_500(501) AS won2 \gset
SELECT o AS o3, i AS i3, x AS x3, c AS c3 FROM pg_temp.snap() \gset
RESET plan_cache_mode;
SELECT t_eq('vacuumed, no statistics, generic plans: the call cancels its 500', :won2::bigint, 500::bigint);
SELECT t_check('vacuumed, no statistics, generic plans: the claim reads the orders it claims',
               :o3 - :o2 < 3000, format('%s orders rows read for 500 orders', :o3 - :o2));
SELECT t_check('vacuumed, no statistics, generic plans: the winners'' lines are probed, not walked',
               :i3 - :i2 < 3000 AND :x3 - :x2 < 3000,
               format('%s order_items rows and %s index entries read for 1000 lines', :i3 - :i2, :x3 - :x2));
SELECT t_check('vacuumed, no statistics, generic plans: the coupons are looked up',
               :c3 - :c2 < 1000, format('%s coupons rows read for 167 coupons', :c3 - :c2));

ALTER TABLE ordergate.orders RESET (autovacuum_enabled);
ALTER TABLE ordergate.order_items RESET (autovacuum_enabled);
ALTER TABLE ordergate.coupons RESET (autovacuum_enabled);
ALTER TABLE ordergate.inventory RESET (autovacuum_enabled);
SELECT t_eq('no statistics: books balance', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- Planned from defaults the claim's estimated cost passes jit_above_cost: compiling it cost about
-- 300 ms per call for a statement that runs in about 10 (the first five calls of a session, until
-- the generic plan). The pins live on the function, not on the hooks' side of it.
SELECT t_check('the claim pins its planner settings',
               (SELECT proconfig @> ARRAY['enable_seqscan=off', 'jit=off']
                  FROM pg_proc WHERE oid = 'ordergate._cancel_orders_claim'::regproc),
               (SELECT array_to_string(proconfig, ' ') FROM pg_proc WHERE oid = 'ordergate._cancel_orders_claim'::regproc));
SELECT t_check('the stock given back after the hooks pins them too',
               (SELECT proconfig @> ARRAY['enable_seqscan=off', 'jit=off']
                  FROM pg_proc WHERE oid = 'ordergate._cancel_orders_restock'::regproc),
               (SELECT array_to_string(proconfig, ' ') FROM pg_proc WHERE oid = 'ordergate._cancel_orders_restock'::regproc));
SELECT t_check('the hooks run outside the pinned settings',
               (SELECT NOT coalesce(proconfig @> ARRAY['jit=off'], false)
                  FROM pg_proc WHERE oid = 'ordergate._cancel_orders'::regproc),
               'ordergate._cancel_orders must not pin planner settings: the hooks run in it');

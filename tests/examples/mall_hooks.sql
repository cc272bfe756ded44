-- examples_mall_hooks: the hooks and the privilege model of examples/mall, one case at a time,
-- in the database examples/mall/run.sh --sql sets up (ordergate, schema.sql, hooks.sql, the
-- race's catalogue; no race). Each case raises when its outcome is wrong, so psql fails.
\set ON_ERROR_STOP on
\o /dev/null
SET search_path = mall, pg_temp;

CREATE FUNCTION pg_temp.expect(ok boolean, what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN RAISE EXCEPTION 'mall_hooks: %', what; END IF;
END $$;

-- A shop order placed as the service places it (gate first, then the shop's rows), with a coupon.
SET ROLE mall_app;
BEGIN;
SELECT pg_temp.expect(ordergate.place_order('H-1', 1490, '[]', NULL, now() - interval '1 s') = 'placed', 'H-1 placed');
UPDATE sms_coupon_history SET use_status = 1, order_sn = 'H-1'
 WHERE id = (SELECT min(id) FROM sms_coupon_history WHERE use_status = 0);
UPDATE pms_sku_stock SET lock_stock = lock_stock + 2 WHERE id = 1;
INSERT INTO oms_order (member_id, coupon_id, order_sn, total_amount, pay_amount, coupon_amount,
                       receiver_name, receiver_phone)
VALUES (1, 1, 'H-1', 19.90, 14.90, 5.00, 'r', 'p');
INSERT INTO oms_order_item (order_id, order_sn, product_price, product_quantity, product_sku_id)
SELECT id, 'H-1', 9.95, 2, 1 FROM oms_order WHERE order_sn = 'H-1';
COMMIT;

-- The service may not move an order, stock or sales itself, nor call a hook.
DO $$
BEGIN
    BEGIN
        UPDATE mall.oms_order SET status = 4 WHERE order_sn = 'H-1';
        RAISE EXCEPTION 'mall_hooks: mall_app changed oms_order.status';
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
    BEGIN
        UPDATE mall.pms_sku_stock SET stock = stock + 1 WHERE id = 1;
        RAISE EXCEPTION 'mall_hooks: mall_app changed pms_sku_stock.stock';
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
    BEGIN
        PERFORM mall.hook_cancelled(ARRAY['H-1'], 'manual');
        RAISE EXCEPTION 'mall_hooks: mall_app called mall.hook_cancelled';
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
END $$;

-- The scanner's cancel, as the triggers' role (the order service's may not cancel): the shop
-- order closes, its coupon and stock come back, once.
RESET ROLE;
SET ROLE ordergate_trigger;
SELECT pg_temp.expect(outcome = 'cancelled', 'H-1 cancelled')
  FROM ordergate.claim_cancel(ARRAY['H-1'], 'timeout_scanner');
RESET ROLE;
SELECT pg_temp.expect(status = 4, 'H-1 closed in oms_order') FROM oms_order WHERE order_sn = 'H-1';
SELECT pg_temp.expect(use_status = 0, 'H-1 coupon back') FROM sms_coupon_history WHERE order_sn = 'H-1';
SELECT pg_temp.expect(lock_stock = 0, 'H-1 stock released') FROM pms_sku_stock WHERE id = 1;
SELECT pg_temp.expect(count(*) = 1, 'one cancelled hook call for H-1')
  FROM ordergate_hook_call WHERE event = 'cancelled' AND order_sns = ARRAY['H-1'] AND source = 'timeout_scanner';

-- A late payment: the order stays closed, noted once.
SELECT pg_temp.expect(outcome = 'late_payment', 'H-1 late payment')
  FROM ordergate.claim_payment('H-1', 'TX-H1', 1490, 'alipay');
SELECT pg_temp.expect(count(*) = 2 AND bool_and(order_status = 4), 'H-1 history: close and late note')
  FROM oms_order_operate_history h JOIN oms_order o ON o.id = h.order_id WHERE o.order_sn = 'H-1';

-- Gate orders the shop does not know: every hook records an anomaly and returns; the claims
-- succeed (a raise would make the consumer and the scanner retry them forever).
SELECT pg_temp.expect(ordergate.place_order('F-1', 100, '[]', NULL, now() - interval '1 s') = 'placed', 'F-1 placed');
SELECT pg_temp.expect(ordergate.place_order('F-2', 100, '[]', NULL, now() + interval '1 h') = 'placed', 'F-2 placed');
SELECT pg_temp.expect(outcome = 'cancelled', 'F-1 cancelled') FROM ordergate.claim_cancel(ARRAY['F-1'], 'timeout_scanner');
SELECT pg_temp.expect(outcome = 'paid', 'F-2 paid') FROM ordergate.claim_payment('F-2', 'TX-F2', 100, 'wechat');
SELECT pg_temp.expect(outcome = 'late_payment', 'F-1 late') FROM ordergate.claim_payment('F-1', 'TX-F1', 100, 'wechat');
SELECT pg_temp.expect(array_agg(event || ':' || order_sn || ':' || problem ORDER BY id)
                      = ARRAY['cancelled:F-1:not in oms_order', 'paid:F-2:not in oms_order',
                              'late_payment:F-1:not in oms_order'], 'anomalies for F-1, F-2')
  FROM ordergate_hook_anomaly;
SELECT pg_temp.expect(count(*) = 0, 'no hook call recorded for unknown orders')
  FROM ordergate_hook_call WHERE 'F-1' = ANY (order_sns) OR 'F-2' = ANY (order_sns);

-- ordergate's books are exact through all of it.
SELECT pg_temp.expect(sum(violations) = 0, 'reconcile clean') FROM ordergate.reconcile();
\o
\echo 'mall_hooks: all cases passed'

-- The state machine trigger and least privilege.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.add_coupon('C1');
SELECT ordergate.place_order('G1', 100, '[{"sku":"S1","qty":1}]', 'C1', now() - interval '1 minute');
SELECT ordergate.place_order('G2', 100, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('G3', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.claim_cancel(ARRAY['G1'], 'timeout_scanner');
SELECT * FROM ordergate.claim_payment('G2', 'TG2', 100, 'card');

-- Superuser, direct SQL: only pending -> paid|cancelled|released, released -> paid.
SELECT t_error('guard cancelled -> pending', $q$UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'G1'$q$, 'OG001');
SELECT t_error('guard cancelled -> paid', $q$UPDATE ordergate.orders SET status = 'paid' WHERE order_no = 'G1'$q$, 'OG001');
SELECT t_error('guard paid -> cancelled', $q$UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'G2'$q$, 'OG001');
SELECT t_error('guard paid -> pending', $q$UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'G2'$q$, 'OG001');
SELECT t_error('guard unknown status', $q$UPDATE ordergate.orders SET status = 'shipped' WHERE order_no = 'G3'$q$, 'OG001');
SELECT t_error('guard amount of a paid order immutable', $q$UPDATE ordergate.orders SET amount_cents = 1 WHERE order_no = 'G2'$q$, 'OG002');
SELECT t_error('guard amount of a cancelled order immutable', $q$UPDATE ordergate.orders SET amount_cents = 1 WHERE order_no = 'G1'$q$, 'OG002');
SELECT t_error('guard order_no immutable', $q$UPDATE ordergate.orders SET order_no = 'G4' WHERE order_no = 'G3'$q$, 'OG002');
SELECT t_error('guard coupon immutable', $q$UPDATE ordergate.orders SET coupon_id = NULL WHERE order_no = 'G1'$q$, 'OG002');
SELECT t_error('guard expire of closed order', $q$UPDATE ordergate.orders SET expire_at = now() WHERE order_no = 'G1'$q$, 'OG002');
SELECT t_error('guard closed_at of a closed order', $q$UPDATE ordergate.orders SET closed_at = now() - interval '1 day' WHERE order_no = 'G1'$q$, 'OG002');
SELECT t_error('guard closed_at of a pending order', $q$UPDATE ordergate.orders SET closed_at = now() WHERE order_no = 'G3'$q$, 'OG002');
SELECT t_eq('guard allows expire_at of a pending order', (SELECT count(*) FROM (SELECT 1 FROM ordergate.orders WHERE order_no = 'G3' FOR UPDATE) x), 1::bigint);
SELECT t_eq('gate sets closed_at', (SELECT count(*) FROM ordergate.orders WHERE status <> 'pending_payment' AND closed_at IS NULL), 0::bigint);
SELECT t_error('guard delete paid', $q$DELETE FROM ordergate.orders WHERE order_no = 'G2'$q$, 'OG003');
SELECT t_error('guard delete cancelled', $q$DELETE FROM ordergate.orders WHERE order_no = 'G1'$q$, 'OG003');
SELECT t_error('status_log append-only update', $q$UPDATE ordergate.status_log SET actor = 'x'$q$, 'OG004');
SELECT t_error('status_log append-only delete', $q$DELETE FROM ordergate.status_log$q$, 'OG004');
SELECT t_error('second log row for an order', $q$INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key) VALUES ('G1', 'pending_payment', 'cancelled', 'manual', 'G1')$q$, '23505');
SELECT t_error('coupon on two live orders', $q$INSERT INTO ordergate.orders (order_no, amount_cents, coupon_id, expire_at) VALUES ('G5', 1, 'C1', now()); INSERT INTO ordergate.orders (order_no, amount_cents, coupon_id, expire_at) VALUES ('G6', 1, 'C1', now())$q$, '23505');
SELECT t_error('order_no check', $q$INSERT INTO ordergate.orders (order_no, amount_cents, expire_at) VALUES ('bad no', 1, now())$q$, '23514');
SELECT t_error('status check', $q$INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at) VALUES ('G7', 'open', 1, now())$q$, '23514');
SELECT t_error('coupon state check', $q$INSERT INTO ordergate.coupons (coupon_id, state) VALUES ('C9', 'gone')$q$, '23514');
SELECT t_error('source check', $q$INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key) VALUES ('G3', 'pending_payment', 'cancelled', 'cron', 'G3')$q$, '23514');
SELECT t_error('qty check', $q$INSERT INTO ordergate.order_items (order_no, sku, qty) VALUES ('G3', 'S1', 0)$q$, '23514');
SELECT t_error('txn_no check', $q$INSERT INTO ordergate.payments (txn_no, order_no, amount_cents) VALUES ('t x', 'G3', 1)$q$, '23514');
SELECT t_error('available >= 0', $q$UPDATE ordergate.inventory SET available = -1$q$, '23514');

-- Allowed direct transitions (pending -> paid, pending -> cancelled), and listed-columns inserts.
BEGIN;
UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'G3';
SELECT t_eq('direct pending -> cancelled allowed, closed_at set', (SELECT closed_at IS NOT NULL FROM ordergate.orders WHERE order_no = 'G3' AND status = 'cancelled'), true);
INSERT INTO ordergate.inventory (sku, available) VALUES ('S2', 7);
SELECT t_eq('inventory total defaults to available', (SELECT total FROM ordergate.inventory WHERE sku = 'S2'), 7::bigint);
INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at) VALUES ('G8', 'pending_payment', 5, NULL, now());
SELECT t_eq('orders original_expire_at defaults to expire_at', (SELECT original_expire_at = expire_at FROM ordergate.orders WHERE order_no = 'G8'), true);
INSERT INTO ordergate.coupons (coupon_id, state) VALUES ('C8', 'available');
INSERT INTO ordergate.orders (order_no, status, amount_cents, coupon_id, expire_at) VALUES ('G10', 'paid', 5, NULL, now());
SELECT t_eq('closed order inserted as such gets closed_at', (SELECT closed_at IS NOT NULL FROM ordergate.orders WHERE order_no = 'G10'), true);
INSERT INTO ordergate.order_items (order_no, sku, qty) VALUES ('G8', 'S2', 1);
ROLLBACK;

-- Least privilege: the service role writes nothing directly.
SET ROLE ordergate_service;
SELECT t_error('service cannot update orders', $q$UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'G3'$q$, '42501');
SELECT t_error('service cannot insert orders', $q$INSERT INTO ordergate.orders (order_no, amount_cents, expire_at) VALUES ('G9', 1, now())$q$, '42501');
SELECT t_error('service cannot delete orders', $q$DELETE FROM ordergate.orders WHERE order_no = 'G3'$q$, '42501');
SELECT t_error('service cannot update inventory', $q$UPDATE ordergate.inventory SET available = 1000$q$, '42501');
SELECT t_error('service cannot update coupons', $q$UPDATE ordergate.coupons SET state = 'available'$q$, '42501');
SELECT t_error('service cannot write status_log', $q$INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key) VALUES ('G3', 'pending_payment', 'cancelled', 'manual', 'G3')$q$, '42501');
SELECT t_error('service cannot write outbox', $q$UPDATE ordergate.outbox SET published_at = now()$q$, '42501');
SELECT t_error('service cannot call _cancel_orders', $q$SELECT ordergate._cancel_orders(ARRAY['G3'], 'manual', 'me', NULL)$q$, '42501');
SELECT t_error('service cannot add_stock', $q$SELECT ordergate.add_stock('S1', 1)$q$, '42501');
SELECT t_error('service cannot set_setting', $q$SELECT ordergate.set_setting('auto_refund_limit_cents', '1')$q$, '42501');
SELECT t_eq('service can read orders', (SELECT count(*) FROM ordergate.orders), 3::bigint);
SELECT t_eq('service can call hold', (SELECT outcome FROM ordergate.hold_for_payment('G3', 60)), 'held');
RESET ROLE;
SET ROLE ordergate_admin;
SELECT t_eq('admin can add_stock', ordergate.add_stock('S1', 5), 13::bigint);
SELECT t_eq('admin add_coupon', ordergate.add_coupon('C1'), 'exists');
SELECT t_eq('admin set_setting returns old', ordergate.set_setting('auto_refund_limit_cents', '6000'), '5000');
SELECT t_error('admin set_setting unknown key', $q$SELECT ordergate.set_setting('x', '1')$q$, '22023');
SELECT t_error('admin cannot update orders', $q$UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'G3'$q$, '42501');
RESET ROLE;
SELECT t_error('public cannot call the gate', $q$CREATE ROLE t_nobody; SET LOCAL ROLE t_nobody; SELECT * FROM ordergate.claim_cancel(ARRAY['G3'], 'timeout_consumer')$q$, '42501');
SELECT t_eq('every function pins search_path', (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'ordergate' AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')), 0::bigint);
SELECT t_eq('no ordergate function executable by PUBLIC', (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'ordergate' AND has_function_privilege('public', p.oid, 'EXECUTE')), 0::bigint);
SELECT t_eq('every ordergate object owned by ordergate_owner', (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ordergate' AND pg_get_userbyid(c.relowner) <> 'ordergate_owner') + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'ordergate' AND pg_get_userbyid(p.proowner) <> 'ordergate_owner'), 0::bigint);

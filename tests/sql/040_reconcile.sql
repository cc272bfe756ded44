-- reconcile(): clean books report 0 on all eighteen rows (invariants 1-18); each planted violation is found, with a
-- sample; reconcile_repair() creates the missing late_payment exception.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 100);
SELECT ordergate.add_coupon('C1');
SELECT ordergate.add_coupon('C2');
SELECT ordergate.place_order('R1', 100, '[{"sku":"S1","qty":1}]', 'C1', now() - interval '1 minute');
SELECT ordergate.place_order('R2', 100, '[{"sku":"S1","qty":2}]', 'C2', now() - interval '1 minute');
SELECT ordergate.place_order('R3', 100, '[{"sku":"S1","qty":3}]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('R4', 100, '[{"sku":"S1","qty":4}]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.claim_cancel(ARRAY['R1'], 'timeout_consumer');
SELECT * FROM ordergate.claim_payment('R1', 'TR1', 100, 'card');
SELECT * FROM ordergate.claim_payment('R2', 'TR2', 100, 'card');

SELECT t_eq('reconcile returns eighteen rows', (SELECT count(*) FROM ordergate.reconcile()), 18::bigint);
SELECT t_eq('reconcile invariants 1..18', (SELECT array_agg(invariant ORDER BY invariant) FROM ordergate.reconcile()), ARRAY[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]);
SELECT t_eq('reconcile clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SELECT t_eq('reconcile clean samples empty', (SELECT bool_and(sample IS NULL OR cardinality(sample) = 0) FROM ordergate.reconcile()), true);

-- 6: an order pending past expire_at + grace + scan interval.
SELECT t_eq('inv6 within default interval', t_viol(6), 0::bigint);
SELECT t_eq('inv6 with no interval', (SELECT violations FROM ordergate.reconcile('-infinity', '0 seconds', '0 seconds') WHERE invariant = 6), 1::bigint);
SELECT t_eq('inv6 sample', (SELECT sample FROM ordergate.reconcile('-infinity', '0 seconds', '0 seconds') WHERE invariant = 6), ARRAY['R3']);
SELECT t_eq('inv6 never windowed by p_since', (SELECT violations FROM ordergate.reconcile(now() + interval '1 second', '0 seconds', '0 seconds') WHERE invariant = 6), 1::bigint);

-- Each plant in its own transaction, rolled back.
BEGIN;
UPDATE ordergate.inventory SET available = available + 1 WHERE sku = 'S1';
SELECT t_eq('inv2 stock drift', t_viol(2), 1::bigint);
SELECT t_eq('inv2 sample', (SELECT sample FROM ordergate.reconcile() WHERE invariant = 2), ARRAY['S1']);
ROLLBACK;
BEGIN;
SELECT t_eq('add_stock keeps inv2', ordergate.add_stock('S1', 5) > 0 AND t_viol(2) = 0, true);
ROLLBACK;

BEGIN;
UPDATE ordergate.coupons SET state = 'available' WHERE coupon_id = 'C2';
SELECT t_eq('inv3 coupon of paid order available', t_viol(3), 1::bigint);
ROLLBACK;
BEGIN;
UPDATE ordergate.coupons SET state = 'locked' WHERE coupon_id = 'C1';
SELECT t_eq('inv3 coupon of cancelled order locked', t_viol(3), 1::bigint);
ROLLBACK;

BEGIN;
UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'R4';   -- a transition without log or event
SELECT t_eq('inv4 transition without log', t_viol(4), 1::bigint);
SELECT t_eq('inv7 transition without event', t_viol(7), 1::bigint);
SELECT t_eq('inv2 cancelled without restock', t_viol(2), 1::bigint);
ROLLBACK;

BEGIN;
ALTER TABLE ordergate.status_log DISABLE TRIGGER status_log_append_only;
UPDATE ordergate.status_log SET from_status = 'paid' WHERE order_no = 'R1';
SELECT t_eq('inv1 illegal logged move', t_viol(1), 1::bigint);
UPDATE ordergate.status_log SET from_status = 'pending_payment', source = 'payment_callback' WHERE order_no = 'R1';
SELECT t_eq('inv4 wrong source for a cancel', t_viol(4), 1::bigint);
ROLLBACK;

BEGIN;
INSERT INTO ordergate.status_log (order_no, from_status, to_status, source, idempotency_key)
VALUES ('R9', 'pending_payment', 'cancelled', 'manual', 'R9');
SELECT t_eq('inv1 log row of no order', t_viol(1), 1::bigint);
ROLLBACK;

SELECT t_error('inv7 a second transition event is refused', $q$INSERT INTO ordergate.outbox (event_type, order_no) VALUES ('order_cancelled', 'R1')$q$, '23505');
SELECT t_error('inv7 a transition event of the other kind is refused', $q$INSERT INTO ordergate.outbox (event_type, order_no) VALUES ('order_paid', 'R1')$q$, '23505');
-- The same unique index holds every event of an order: any number of other events are accepted.
BEGIN;
INSERT INTO ordergate.outbox (event_type, order_no, payload) VALUES ('refund_requested', 'R1', '{"t": 1}'), ('refund_requested', 'R1', '{"t": 1}'), ('reconciliation_alert', 'R1', '{"t": 1}');
SELECT t_eq('inv7 other events of the order accepted', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'R1' AND payload::text = '{"t": 1}'), 3::bigint);
ROLLBACK;
BEGIN;
INSERT INTO ordergate.outbox (event_type, order_no) VALUES ('order_paid', 'R4');
SELECT t_eq('inv7 event for a pending order', t_viol(7), 1::bigint);
INSERT INTO ordergate.outbox (event_type, order_no) VALUES ('order_cancelled', 'R9');
SELECT t_eq('inv7 event for a missing order', (SELECT sample FROM ordergate.reconcile() WHERE invariant = 7), ARRAY['R4', 'R9']);
ROLLBACK;
BEGIN;
DELETE FROM ordergate.outbox WHERE order_no = 'R2' AND event_type = 'order_paid';
SELECT t_eq('inv7 missing event', (SELECT sample FROM ordergate.reconcile() WHERE invariant = 7), ARRAY['R2']);
ROLLBACK;

-- 5 and the repair.
BEGIN;
DELETE FROM ordergate.exceptions WHERE txn_no = 'TR1';
SELECT t_eq('inv5 late payment without exception', t_viol(5), 1::bigint);
SELECT t_eq('inv5 sample', (SELECT sample FROM ordergate.reconcile() WHERE invariant = 5), ARRAY['TR1']);
SET LOCAL ROLE ordergate_service;
SELECT t_eq('repair creates one', ordergate.reconcile_repair(), 1::bigint);
SELECT t_eq('repair again creates none', ordergate.reconcile_repair(), 0::bigint);
RESET ROLE;
SELECT t_eq('repaired exception', (SELECT kind || '/' || resolution FROM ordergate.exceptions WHERE txn_no = 'TR1'), 'late_payment/manual_review');
SELECT t_eq('repair alert event', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'R1' AND event_type = 'reconciliation_alert' AND (payload ->> 'repaired')::boolean), 1::bigint);
SELECT t_eq('inv5 clean after repair', t_viol(5), 0::bigint);
ROLLBACK;

BEGIN;
INSERT INTO ordergate.exceptions (order_no, kind, txn_no) VALUES ('R2', 'double_payment', 'TR2');
SELECT t_eq('inv5 exception on a clean payment is fine', t_viol(5), 0::bigint);
ROLLBACK;

SELECT t_eq('reconcile clean at the end', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SET ROLE ordergate_service;
SELECT t_eq('service can reconcile', (SELECT count(*) FROM ordergate.reconcile()), 18::bigint);
RESET ROLE;

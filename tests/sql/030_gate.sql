-- Gate outcomes and side effects, one session (the races are in tests/isolation).

SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.add_stock('S2', 3);
SELECT ordergate.add_coupon('C1');
SELECT ordergate.add_coupon('C2');
SET ROLE ordergate_service;

-- place_order: success, and failures that leave no trace.
SELECT t_eq('place placed', ordergate.place_order('P1', 1000, '[{"sku":"S1","qty":2},{"sku":"S2","qty":1},{"sku":"S1","qty":1}]', 'C1', now() - interval '1 minute'), 'placed');
SELECT t_eq('place sums repeated skus', (SELECT qty FROM ordergate.order_items WHERE order_no = 'P1' AND sku = 'S1'), 3);
SELECT t_eq('place reserves stock', (SELECT string_agg(sku || '=' || available, ',' ORDER BY sku) FROM ordergate.inventory), 'S1=7,S2=2');
SELECT t_eq('place locks coupon', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C1'), 'locked');
SELECT t_eq('place duplicate', ordergate.place_order('P1', 5, '[{"sku":"S2","qty":1}]', 'C2', now()), 'duplicate');
SELECT t_eq('place out_of_stock', ordergate.place_order('P2', 5, '[{"sku":"S1","qty":1},{"sku":"S2","qty":3}]', 'C2', now()), 'out_of_stock');
SELECT t_eq('place unknown sku is out_of_stock', ordergate.place_order('P2', 5, '[{"sku":"NOPE","qty":1}]', NULL, now()), 'out_of_stock');
SELECT t_eq('place coupon in use', ordergate.place_order('P2', 5, '[{"sku":"S1","qty":1}]', 'C1', now()), 'coupon_unavailable');
SELECT t_eq('place unknown coupon', ordergate.place_order('P2', 5, '[{"sku":"S1","qty":1}]', 'NOPE', now()), 'coupon_unavailable');
SELECT t_eq('place failures leave no order', (SELECT count(*) FROM ordergate.orders), 1::bigint);
SELECT t_eq('place failures leave stock', (SELECT string_agg(sku || '=' || available, ',' ORDER BY sku) FROM ordergate.inventory), 'S1=7,S2=2');
SELECT t_eq('place failures leave coupon C2', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C2'), 'available');
SELECT t_eq('place P3', ordergate.place_order('P3', 2000, '[{"sku":"S2","qty":1}]', 'C2', now() + interval '1 hour'), 'placed');
SELECT t_eq('place P4', ordergate.place_order('P4', 9000, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute'), 'placed');
SELECT t_eq('place P5', ordergate.place_order('P5', 300, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute'), 'placed');

-- claim_cancel: one row per distinct order number, in order of first appearance.
SELECT t_eq('cancel empty array', (SELECT count(*) FROM ordergate.claim_cancel('{}', 'timeout_consumer')), 0::bigint);
SELECT t_eq('cancel outcomes',
    (SELECT string_agg(order_no || ':' || outcome || ':' || coalesce(status, '-'), ' ')
       FROM ordergate.claim_cancel(ARRAY['P3', 'P1', 'NOPE', 'P1', 'P3'], 'timeout_consumer')),
    'P3:not_due:pending_payment P1:cancelled:cancelled NOPE:not_found:-');
SELECT t_eq('cancel restocks', (SELECT string_agg(sku || '=' || available, ',' ORDER BY sku) FROM ordergate.inventory), 'S1=8,S2=2');
SELECT t_eq('cancel returns coupon', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C1'), 'available');
SELECT t_eq('cancel log row',
    (SELECT string_agg(concat_ws('|', from_status, to_status, source, idempotency_key, actor), ',') FROM ordergate.status_log WHERE order_no = 'P1'),
    'pending_payment|cancelled|timeout_consumer|P1|' || current_setting('application_name'));
SELECT t_eq('cancel outbox event', (SELECT string_agg(event_type || ':' || (payload ->> 'source') || ':' || (payload ->> 'amount_cents'), ',') FROM ordergate.outbox WHERE order_no = 'P1'), 'order_cancelled:timeout_consumer:1000');
SELECT t_eq('cancel again', (SELECT string_agg(outcome, ',') FROM ordergate.claim_cancel(ARRAY['P1'], 'timeout_scanner')), 'already_cancelled');
SELECT t_eq('cancel again writes nothing', (SELECT count(*) FROM ordergate.status_log) + (SELECT count(*) FROM ordergate.outbox), 2::bigint);

-- The cancel event's payload: a coupon id that needs JSON escaping survives intact.
RESET ROLE;
SELECT ordergate.add_coupon(E'C"q\\b\n');
SET ROLE ordergate_service;
SELECT t_eq('place with an odd coupon id', ordergate.place_order('P9', 700, '[{"sku":"S1","qty":1}]', E'C"q\\b\n', now() - interval '1 minute'), 'placed');
SELECT t_eq('cancel it', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['P9'], 'timeout_scanner')), 'cancelled');
SELECT t_eq('payload keys', (SELECT array_agg(k ORDER BY k) FROM ordergate.outbox b, json_object_keys(b.payload) k WHERE b.order_no = 'P9'), ARRAY['actor', 'amount_cents', 'cancelled_at', 'coupon_id', 'currency', 'event', 'items', 'order_no', 'shop', 'source', 'v']);
SELECT t_eq('payload coupon id escaped', (SELECT payload ->> 'coupon_id' FROM ordergate.outbox WHERE order_no = 'P9'), E'C"q\\b\n');
SELECT t_eq('payload amount is a number', (SELECT json_typeof(payload -> 'amount_cents') || ':' || (payload ->> 'amount_cents') FROM ordergate.outbox WHERE order_no = 'P9'), 'number:700');
SELECT t_eq('payload cancelled_at is the close time', (SELECT (payload ->> 'cancelled_at')::timestamptz = o.closed_at FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no) WHERE b.order_no = 'P9'), true);
SELECT t_eq('payload text as written', (SELECT b.payload::text FROM ordergate.outbox b WHERE b.order_no = 'P9'),
    (SELECT format('{"v": 1, "event": "order_cancelled", "order_no": "P9", "source": "timeout_scanner", "actor": %s, "amount_cents": 700, "coupon_id": %s, "items": [{"sku": "S1", "qty": 1}], "shop": null, "cancelled_at": %s, "currency": "USD"}',
                   to_json(current_setting('application_name')), to_json(E'C"q\\b\n'::text), to_json(o.closed_at))
       FROM ordergate.orders o WHERE o.order_no = 'P9'));
-- The same byte for byte for an order with shop data and no coupon (the event writes a missing
-- coupon's null and the shop's text through other branches than P9's).
SELECT t_eq('place with shop data and no coupon', ordergate.place_order('P9S', 800, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute', '{"k": [1, "x\"y"]}'), 'placed');
SELECT t_eq('cancel it too', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['P9S'], 'timeout_scanner')), 'cancelled');
SELECT t_eq('payload text as written, shop data and no coupon', (SELECT b.payload::text FROM ordergate.outbox b WHERE b.order_no = 'P9S'),
    (SELECT format('{"v": 1, "event": "order_cancelled", "order_no": "P9S", "source": "timeout_scanner", "actor": %s, "amount_cents": 800, "coupon_id": null, "items": [{"sku": "S1", "qty": 1}], "shop": {"k": [1, "x\"y"]}, "cancelled_at": %s, "currency": "USD"}',
                   to_json(current_setting('application_name')), to_json(o.closed_at))
       FROM ordergate.orders o WHERE o.order_no = 'P9S'));

-- The cancel event's items are the order's lines in sku order, whatever order they were given
-- in, for each order of a batch (the claim aggregates the lines as it reads them, sorted).
RESET ROLE;
SELECT ordergate.add_stock('IT-c', 10), ordergate.add_stock('IT-a', 10), ordergate.add_stock('IT-b', 10);
SET ROLE ordergate_service;
SELECT t_eq('place lines out of sku order', ordergate.place_order('P10', 500, '[{"sku":"IT-c","qty":3},{"sku":"IT-a","qty":1},{"sku":"IT-b","qty":2}]', NULL, now() - interval '1 minute'), 'placed');
SELECT t_eq('place another', ordergate.place_order('P11', 500, '[{"sku":"IT-b","qty":4},{"sku":"IT-a","qty":5}]', NULL, now() - interval '1 minute'), 'placed');
-- An order whose lines are stored out of sku order (written directly, as an adopted book may be).
RESET ROLE;
INSERT INTO ordergate.orders (order_no, amount_cents, expire_at) VALUES ('P12', 500, now() - interval '1 minute');
INSERT INTO ordergate.order_items (order_no, sku, qty) VALUES ('P12', 'IT-c', 1), ('P12', 'IT-a', 1), ('P12', 'IT-b', 1);
UPDATE ordergate.inventory SET available = available - 1 WHERE sku LIKE 'IT-%';
SET ROLE ordergate_service;
SELECT t_eq('cancel the three', (SELECT string_agg(outcome, ',') FROM ordergate.claim_cancel(ARRAY['P12', 'P11', 'P10'], 'timeout_consumer')), 'cancelled,cancelled,cancelled');
SELECT t_eq('payload items in sku order', (SELECT string_agg(b.order_no || '=' || (b.payload -> 'items')::text, ' ' ORDER BY b.order_no) FROM ordergate.outbox b WHERE b.order_no IN ('P10', 'P11', 'P12') AND b.event_type = 'order_cancelled'),
    'P10=[{"sku": "IT-a", "qty": 1}, {"sku": "IT-b", "qty": 2}, {"sku": "IT-c", "qty": 3}] P11=[{"sku": "IT-a", "qty": 5}, {"sku": "IT-b", "qty": 4}] P12=[{"sku": "IT-a", "qty": 1}, {"sku": "IT-b", "qty": 1}, {"sku": "IT-c", "qty": 1}]');
SELECT t_eq('their stock back', (SELECT string_agg(sku || ':' || available, ',' ORDER BY sku) FROM ordergate.inventory WHERE sku LIKE 'IT-%'), 'IT-a:10,IT-b:10,IT-c:10');

-- The items' skus are the bytes to_json gives, whichever character a sku holds: the claim
-- splices a batch's skus as they are when none of them needs escaping, and escapes every sku of
-- a batch where one does. Each character from U+0001 to U+007F and two beyond, in a sku of its
-- own order cancelled alone (the sku decides the batch's way), then all of them in one batch
-- beside plain skus.
RESET ROLE;
CREATE TEMP TABLE esc_chars AS
    SELECT c, 'K' || c || 'z' AS sku
      FROM (SELECT chr(g) AS c FROM generate_series(1, 127) g UNION ALL VALUES ('ü'), ('€')) x;
GRANT SELECT ON esc_chars TO PUBLIC;
SELECT count(ordergate.add_stock(sku, 10)) FROM esc_chars;
SELECT ordergate.add_stock('K-plain', 387);
INSERT INTO ordergate.orders (order_no, amount_cents, expire_at)
SELECT 'E' || ascii(c), 100, now() - interval '1 minute' FROM esc_chars;
INSERT INTO ordergate.order_items (order_no, sku, qty) SELECT 'E' || ascii(c), sku, 2 FROM esc_chars;
INSERT INTO ordergate.orders (order_no, amount_cents, expire_at)
SELECT 'F' || ascii(c), 100, now() - interval '1 minute' FROM esc_chars;
INSERT INTO ordergate.order_items (order_no, sku, qty)
SELECT 'F' || ascii(c), sku, 1 FROM esc_chars UNION ALL SELECT 'F' || ascii(c), 'K-plain', 3 FROM esc_chars;
UPDATE ordergate.inventory i SET available = available - (SELECT sum(qty) FROM ordergate.order_items t WHERE t.sku = i.sku)
 WHERE i.sku IN (SELECT sku FROM esc_chars UNION ALL VALUES ('K-plain'));
SET ROLE ordergate_service;
SELECT t_eq('cancel each alone', (SELECT count(*) FILTER (WHERE (SELECT outcome FROM ordergate.claim_cancel(ARRAY['E' || ascii(c)], 'timeout_consumer')) = 'cancelled') FROM esc_chars), 129::bigint);
SELECT t_eq('each sku as to_json writes it',
    (SELECT string_agg(e.c, '' ORDER BY e.c) FROM esc_chars e JOIN ordergate.outbox b ON b.order_no = 'E' || ascii(e.c)
      WHERE (b.payload -> 'items')::text IS DISTINCT FROM format('[{"sku": %s, "qty": 2}]', to_json(e.sku))), NULL::text);
SELECT t_eq('cancel all in one batch', (SELECT count(*) FROM ordergate.claim_cancel(ARRAY(SELECT 'F' || ascii(c) FROM esc_chars), 'timeout_consumer') WHERE outcome = 'cancelled'), 129::bigint);
SELECT t_eq('each sku as to_json writes it, one batch',
    (SELECT string_agg(e.c, '' ORDER BY e.c) FROM esc_chars e JOIN ordergate.outbox b ON b.order_no = 'F' || ascii(e.c)
      WHERE (b.payload -> 'items')::text IS DISTINCT FROM
            CASE WHEN e.sku < 'K-plain' COLLATE "C" THEN format('[{"sku": %s, "qty": 1}, {"sku": "K-plain", "qty": 3}]', to_json(e.sku))
                 ELSE format('[{"sku": "K-plain", "qty": 3}, {"sku": %s, "qty": 1}]', to_json(e.sku)) END), NULL::text);
SELECT t_eq('their stock back too', (SELECT string_agg(DISTINCT i.available::text, ',') FROM ordergate.inventory i WHERE i.sku IN (SELECT sku FROM esc_chars UNION ALL VALUES ('K-plain'))), '10,387');

-- claim_payment outcomes.
SELECT t_eq('pay late small', (SELECT concat_ws(',', outcome, status, first_outcome) FROM ordergate.claim_payment('P1', 'T1', 1000, 'card')), 'late_payment,cancelled,late_payment');
SELECT t_eq('late small -> auto_refund', (SELECT kind || '/' || resolution || '/' || state FROM ordergate.exceptions WHERE txn_no = 'T1'), 'late_payment/auto_refund/open');
SELECT t_eq('late small -> refund_requested', (SELECT string_agg(event_type, ',') FROM ordergate.outbox WHERE order_no = 'P1' AND event_type <> 'order_cancelled'), 'refund_requested');
SELECT t_eq('pay duplicate', (SELECT concat_ws(',', outcome, status, first_outcome) FROM ordergate.claim_payment('P1', 'T1', 1000, 'card')), 'duplicate,cancelled,late_payment');
SELECT t_eq('duplicate writes nothing', (SELECT count(*) FROM ordergate.exceptions), 1::bigint);
SELECT t_eq('pay mismatch', (SELECT concat_ws(',', outcome, status, first_outcome) FROM ordergate.claim_payment('P3', 'T2', 1999, 'card')), 'amount_mismatch,pending_payment,amount_mismatch');
SELECT t_eq('mismatch -> manual_review', (SELECT kind || '/' || resolution FROM ordergate.exceptions WHERE txn_no = 'T2'), 'amount_mismatch/manual_review');
SELECT t_eq('pay paid (after expire_at, before any cancel)', (SELECT concat_ws(',', outcome, status, first_outcome) FROM ordergate.claim_payment('P4', 'T3', 9000, 'card')), 'paid,paid,paid');
SELECT t_eq('paid log row', (SELECT concat_ws('|', source, idempotency_key) FROM ordergate.status_log WHERE order_no = 'P4'), 'payment_callback|T3');
SELECT t_eq('paid event', (SELECT string_agg(event_type || ':' || (payload ->> 'txn_no'), ',') FROM ordergate.outbox WHERE order_no = 'P4'), 'order_paid:T3');
SELECT t_eq('pay double', (SELECT concat_ws(',', outcome, status, first_outcome) FROM ordergate.claim_payment('P4', 'T4', 9000, 'card')), 'double_payment,paid,double_payment');
SELECT t_eq('double large -> manual_review + alert', (SELECT e.kind || '/' || e.resolution || '/' || b.event_type FROM ordergate.exceptions e JOIN ordergate.outbox b ON (b.payload ->> 'exception_id')::bigint = e.id WHERE e.txn_no = 'T4'), 'double_payment/manual_review/reconciliation_alert');
SELECT t_eq('pay unknown order', (SELECT concat_ws(',', outcome, coalesce(status, '-'), first_outcome) FROM ordergate.claim_payment('NOPE', 'T5', 100, 'card')), 'not_found,-,not_found');
SELECT t_eq('unknown order recorded', (SELECT outcome FROM ordergate.payments WHERE txn_no = 'T5'), 'not_found');
SELECT t_eq('pay P3 right amount', (SELECT outcome FROM ordergate.claim_payment('P3', 'T6', 2000, 'card')), 'paid');
SELECT t_eq('paid coupon used', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C2'), 'used');
SELECT t_eq('paid keeps stock', (SELECT available FROM ordergate.inventory WHERE sku = 'S2'), 2::bigint);
SELECT t_eq('duplicate txn on another order', (SELECT concat_ws(',', outcome, status, first_outcome) FROM ordergate.claim_payment('P5', 'T6', 300, 'card')), 'duplicate,paid,paid');
SELECT t_eq('P5 still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'P5'), 'pending_payment');
SELECT t_eq('no processing rows', (SELECT count(*) FROM ordergate.payments WHERE outcome = 'processing'), 0::bigint);
RESET ROLE;
SELECT ordergate.set_setting('auto_refund_limit_cents', '100');
SET ROLE ordergate_service;
SELECT ordergate.claim_cancel(ARRAY['P5'], 'timeout_consumer');
SELECT t_eq('late payment above a lowered limit', (SELECT outcome FROM ordergate.claim_payment('P5', 'T7', 300, 'card')), 'late_payment');
SELECT t_eq('late above limit -> manual_review', (SELECT resolution FROM ordergate.exceptions WHERE txn_no = 'T7'), 'manual_review');

-- hold_for_payment.
SELECT t_eq('place H1', ordergate.place_order('H1', 100, '[{"sku":"S1","qty":1}]', NULL, now() - interval '100 seconds'), 'placed');
BEGIN;  -- one transaction: now() is fixed
SELECT t_eq('hold extends', (SELECT outcome || ':' || (expire_at = now() + interval '120 seconds') FROM ordergate.hold_for_payment('H1', 120)), 'held:true');
SELECT t_eq('hold never shortens', (SELECT outcome || ':' || (expire_at = now() + interval '120 seconds') FROM ordergate.hold_for_payment('H1', 5)), 'held:true');
SELECT t_eq('hold bounded by original + max', (SELECT expire_at = (SELECT original_expire_at FROM ordergate.orders WHERE order_no = 'H1') + interval '900 seconds' FROM ordergate.hold_for_payment('H1', 900)), true);
COMMIT;
SELECT t_eq('hold writes no log', (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'H1'), 0::bigint);
SELECT t_eq('hold not_pending', (SELECT outcome FROM ordergate.hold_for_payment('P1', 60)), 'not_pending');
SELECT t_eq('hold not_found', (SELECT outcome || ':' || coalesce(expire_at::text, '-') FROM ordergate.hold_for_payment('NOPE', 60)), 'not_found:-');

-- close_order: any time, manual source, operator and reason.
SELECT t_eq('close pending not due', (SELECT outcome || ':' || status FROM ordergate.close_order('H1', ' alice ', 'fraud check')), 'cancelled:cancelled');
SELECT t_eq('close log', (SELECT concat_ws('|', source, idempotency_key, actor, note) FROM ordergate.status_log WHERE order_no = 'H1'), 'manual|H1|alice|fraud check');
SELECT t_eq('close event', (SELECT event_type || ':' || (payload ->> 'source') FROM ordergate.outbox WHERE order_no = 'H1'), 'order_cancelled:manual');
SELECT t_eq('close again', (SELECT outcome || ':' || status FROM ordergate.close_order('H1', 'bob', 'again')), 'already_cancelled:cancelled');
SELECT t_eq('close paid', (SELECT outcome || ':' || status FROM ordergate.close_order('P4', 'bob', 'x')), 'already_paid:paid');
SELECT t_eq('close unknown', (SELECT outcome || ':' || coalesce(status, '-') FROM ordergate.close_order('NOPE', 'bob', 'x')), 'not_found:-');

-- Outbox relay functions.
SELECT t_eq('backlog', ordergate.outbox_backlog(), (SELECT count(*) FROM ordergate.outbox));
SELECT t_eq('lock batch in id order', (SELECT array_agg(id ORDER BY id) = (SELECT (array_agg(id ORDER BY id))[1:3] FROM ordergate.outbox) FROM ordergate.outbox_lock_batch(3)), true);
SELECT t_eq('lock batch payload is json text', (SELECT bool_and(payload::jsonb ? 'order_no') FROM ordergate.outbox_lock_batch(100)), true);
SELECT t_eq('mark published', ordergate.outbox_mark_published(ARRAY[1, 2, 2, 999]::bigint[]), 2::bigint);
SELECT t_eq('mark published twice', ordergate.outbox_mark_published(ARRAY[1]::bigint[]), 0::bigint);
SELECT t_eq('backlog after', ordergate.outbox_backlog(), (SELECT count(*) FROM ordergate.outbox) - 2);
SELECT t_eq('lock batch skips published', (SELECT min(id) FROM ordergate.outbox_lock_batch(10)), 3::bigint);
RESET ROLE;

SELECT t_eq('payload null coupon', (SELECT json_typeof(payload -> 'coupon_id') FROM ordergate.outbox WHERE order_no = 'P5' AND event_type = 'order_cancelled'), 'null');
SELECT t_eq('reconcile clean after gate tests', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- Bad arguments: SQLSTATE 22023, nothing changes.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.place_order('V1', 100, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute');

SET ROLE ordergate_service;

-- place_order
SELECT t_error('place_order null order_no', $q$SELECT ordergate.place_order(NULL, 1, '[{"sku":"S1","qty":1}]', NULL, now())$q$, '22023');
SELECT t_error('place_order bad order_no chars', $q$SELECT ordergate.place_order('a b', 1, '[{"sku":"S1","qty":1}]', NULL, now())$q$, '22023');
SELECT t_error('place_order order_no too long', format($q$SELECT ordergate.place_order(%L, 1, '[{"sku":"S1","qty":1}]', NULL, now())$q$, repeat('x', 65)), '22023');
SELECT t_error('place_order zero amount', $q$SELECT ordergate.place_order('V2', 0, '[{"sku":"S1","qty":1}]', NULL, now())$q$, '22023');
SELECT t_error('place_order null expire', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":1}]', NULL, NULL)$q$, '22023');
SELECT t_error('place_order infinite expire', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":1}]', NULL, 'infinity')$q$, '22023');
SELECT t_error('place_order empty coupon', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":1}]', '', now())$q$, '22023');
SELECT t_error('place_order items not array', $q$SELECT ordergate.place_order('V2', 1, '{"sku":"S1","qty":1}', NULL, now())$q$, '22023');
-- items '[]' is a gate-only order (tests/sql/060_adoption.sql); a JSON null or a string is not.
SELECT t_error('place_order items JSON null', $q$SELECT ordergate.place_order('V2', 1, 'null', NULL, now())$q$, '22023');
SELECT t_error('place_order qty zero', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":0}]', NULL, now())$q$, '22023');
SELECT t_error('place_order qty fraction', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":1.5}]', NULL, now())$q$, '22023');
SELECT t_error('place_order qty string', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":"abc"}]', NULL, now())$q$, '22023');
SELECT t_error('place_order qty negative', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":-1}]', NULL, now())$q$, '22023');
SELECT t_error('place_order sku missing', $q$SELECT ordergate.place_order('V2', 1, '[{"qty":1}]', NULL, now())$q$, '22023');
SELECT t_error('place_order sku empty', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"","qty":1}]', NULL, now())$q$, '22023');
SELECT t_error('place_order summed qty overflow', $q$SELECT ordergate.place_order('V2', 1, '[{"sku":"S1","qty":2147483647},{"sku":"S1","qty":1}]', NULL, now())$q$, '22023');

-- claim_cancel
SELECT t_error('claim_cancel null array', $q$SELECT * FROM ordergate.claim_cancel(NULL, 'timeout_consumer')$q$, '22023');
SELECT t_error('claim_cancel null element', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1', NULL], 'timeout_consumer')$q$, '22023');
SELECT t_error('claim_cancel invalid order_no', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1', 'bad no'], 'timeout_consumer')$q$, '22023');
-- The elements are checked joined by spaces: none may pass by holding a space, an empty or
-- overlong one, or a character outside the class at either end; the message names the bad one.
SELECT t_error('claim_cancel element of two names', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1 V2'], 'timeout_consumer')$q$, '22023');
SELECT t_error('claim_cancel leading space', $q$SELECT * FROM ordergate.claim_cancel(ARRAY[' V1'], 'timeout_consumer')$q$, '22023');
SELECT t_error('claim_cancel empty element', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1', ''], 'timeout_consumer')$q$, '22023');
SELECT t_error('claim_cancel element too long', format($q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1', %L], 'timeout_consumer')$q$, repeat('x', 65)), '22023');
SELECT t_error('claim_cancel trailing newline', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1', E'V2\n'], 'timeout_consumer')$q$, '22023');
DO $$
DECLARE
    v_msg text;
BEGIN
    BEGIN
        PERFORM * FROM ordergate.claim_cancel(ARRAY['V1', 'V2 V3', 'V4'], 'timeout_consumer');
    EXCEPTION WHEN invalid_parameter_value THEN
        GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    END;
    PERFORM t_eq('claim_cancel names the bad element', v_msg,
                 'claim_cancel: invalid order number V2 V3 (1..64 characters of [A-Za-z0-9._:-], no NULL)');
END
$$;
SELECT t_eq('claim_cancel 64 characters accepted', (SELECT string_agg(outcome, ',') FROM ordergate.claim_cancel(ARRAY['V9', repeat('x', 64)], 'timeout_consumer')), 'not_found,not_found');
SELECT t_error('claim_cancel 2-d array', $q$SELECT * FROM ordergate.claim_cancel(ARRAY[ARRAY['V1','V2']], 'timeout_consumer')$q$, '22023');
SELECT t_error('claim_cancel source manual', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1'], 'manual')$q$, '22023');
SELECT t_error('claim_cancel source payment_callback', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1'], 'payment_callback')$q$, '22023');
SELECT t_error('claim_cancel source null', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['V1'], NULL)$q$, '22023');
SELECT t_error('claim_cancel over 10000', $q$SELECT * FROM ordergate.claim_cancel(array_fill('V1'::text, ARRAY[10001]), 'timeout_consumer')$q$, '22023');
SELECT t_eq('claim_cancel 10000 accepted', (SELECT count(*) FROM ordergate.claim_cancel(array_fill('V9'::text, ARRAY[10000]), 'timeout_consumer')), 1::bigint);

-- claim_payment
SELECT t_error('claim_payment bad order_no', $q$SELECT * FROM ordergate.claim_payment('', 'T1', 100, 'card')$q$, '22023');
SELECT t_error('claim_payment null txn', $q$SELECT * FROM ordergate.claim_payment('V1', NULL, 100, 'card')$q$, '22023');
SELECT t_error('claim_payment bad txn', $q$SELECT * FROM ordergate.claim_payment('V1', 'T 1', 100, 'card')$q$, '22023');
SELECT t_error('claim_payment zero amount', $q$SELECT * FROM ordergate.claim_payment('V1', 'T1', 0, 'card')$q$, '22023');
SELECT t_error('claim_payment null amount', $q$SELECT * FROM ordergate.claim_payment('V1', 'T1', NULL, 'card')$q$, '22023');
SELECT t_error('claim_payment empty channel', $q$SELECT * FROM ordergate.claim_payment('V1', 'T1', 100, '')$q$, '22023');

-- hold_for_payment
SELECT t_error('hold zero seconds', $q$SELECT * FROM ordergate.hold_for_payment('V1', 0)$q$, '22023');
SELECT t_error('hold over max', $q$SELECT * FROM ordergate.hold_for_payment('V1', 901)$q$, '22023');
SELECT t_error('hold null seconds', $q$SELECT * FROM ordergate.hold_for_payment('V1', NULL)$q$, '22023');
SELECT t_error('hold bad order_no', $q$SELECT * FROM ordergate.hold_for_payment('x y', 10)$q$, '22023');

-- close_order
SELECT t_error('close no operator', $q$SELECT * FROM ordergate.close_order('V1', '', 'why')$q$, '22023');
SELECT t_error('close blank operator', $q$SELECT * FROM ordergate.close_order('V1', '   ', 'why')$q$, '22023');
SELECT t_error('close no reason', $q$SELECT * FROM ordergate.close_order('V1', 'ops', NULL)$q$, '22023');
SELECT t_error('close bad order_no', $q$SELECT * FROM ordergate.close_order(NULL, 'ops', 'why')$q$, '22023');

-- outbox
SELECT t_error('outbox_lock_batch zero', $q$SELECT * FROM ordergate.outbox_lock_batch(0)$q$, '22023');
SELECT t_error('outbox_mark_published null', $q$SELECT ordergate.outbox_mark_published(NULL)$q$, '22023');

RESET ROLE;
-- Nothing changed by any of the above.
SELECT t_eq('validation: order V1 still pending', (SELECT status FROM ordergate.orders WHERE order_no = 'V1'), 'pending_payment');
SELECT t_eq('validation: one order only', (SELECT count(*) FROM ordergate.orders), 1::bigint);
SELECT t_eq('validation: no payments', (SELECT count(*) FROM ordergate.payments), 0::bigint);
SELECT t_eq('validation: no log rows', (SELECT count(*) FROM ordergate.status_log), 0::bigint);
SELECT t_eq('validation: stock', (SELECT available FROM ordergate.inventory WHERE sku = 'S1'), 9::bigint);

-- Money: currencies, payments in parts, payments taken by staff, the per-currency refund limit,
-- the cancel of an order with captured parts; every refusal changes nothing.

SELECT og_reset();
-- What a refusal must leave as it was: every row the gate writes, in one digest.
CREATE FUNCTION pg_temp.m_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(o::text, ',' ORDER BY o.order_no) FROM ordergate.orders o),
        (SELECT string_agg(p::text, ',' ORDER BY p.txn_no) FROM ordergate.payments p),
        (SELECT string_agg(x::text, ',' ORDER BY x.id) FROM ordergate.exceptions x),
        (SELECT string_agg(b::text, ',' ORDER BY b.id) FROM ordergate.outbox b),
        (SELECT string_agg(l::text, ',' ORDER BY l.order_no) FROM ordergate.status_log l),
        (SELECT string_agg(s::text, ',' ORDER BY s.key) FROM ordergate.settings s)))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.m_state() TO PUBLIC;

-- The currencies: the ISO 4217 codes with their minor units.
SELECT t_eq('currencies seeded', (SELECT count(*) >= 150 FROM ordergate.currencies), true);
SELECT t_eq('exponents', (SELECT string_agg(code || '=' || exponent, ',' ORDER BY code) FROM ordergate.currencies
                           WHERE code IN ('EUR', 'JPY', 'KWD', 'CLF', 'USD')), 'CLF=4,EUR=2,JPY=0,KWD=3,USD=2');
SELECT t_eq('default_currency setting', (SELECT value FROM ordergate.settings WHERE key = 'default_currency'), 'USD');

-- set_setting: default_currency must be a known code; auto_refund_limit.<CODE> for a known code.
SET ROLE ordergate_admin;
SELECT pg_temp.m_state() AS s0 \gset
SELECT t_error('default_currency lowercase', $q$SELECT ordergate.set_setting('default_currency', 'eur')$q$, '22023');
SELECT t_error('default_currency unknown', $q$SELECT ordergate.set_setting('default_currency', 'XXY')$q$, '22023');
SELECT t_error('default_currency NULL', $q$SELECT ordergate.set_setting('default_currency', NULL)$q$, '22023');
SELECT t_error('limit of an unknown code', $q$SELECT ordergate.set_setting('auto_refund_limit.XXY', '10')$q$, '22023');
SELECT t_error('limit of a lowercase code', $q$SELECT ordergate.set_setting('auto_refund_limit.eur', '10')$q$, '22023');
SELECT t_error('limit not a number', $q$SELECT ordergate.set_setting('auto_refund_limit.EUR', 'ten')$q$, '22023');
SELECT t_eq('refused settings change nothing', pg_temp.m_state(), :'s0');
SELECT t_eq('limit of EUR set', ordergate.set_setting('auto_refund_limit.EUR', '1000'), NULL::text);
SELECT t_eq('limit of JPY set', ordergate.set_setting('auto_refund_limit.JPY', '500'), NULL::text);
RESET ROLE;

SET ROLE ordergate_order_service;
-- place_order: currency and allow_partial; refusals write nothing.
SELECT pg_temp.m_state() AS s1 \gset
SELECT t_error('place lowercase currency', $q$SELECT ordergate.place_order('M0', 100, '[]', NULL, now() + interval '1 hour', NULL, 'eur')$q$, '22023');
SELECT t_error('place two-letter currency', $q$SELECT ordergate.place_order('M0', 100, '[]', NULL, now() + interval '1 hour', NULL, 'EU')$q$, '22023');
SELECT t_error('place unknown currency', $q$SELECT ordergate.place_order('M0', 100, '[]', NULL, now() + interval '1 hour', NULL, 'XXY')$q$, '22023');
SELECT t_error('place amount beyond 10^15', $q$SELECT ordergate.place_order('M0', 1000000000000001, '[]', NULL, now() + interval '1 hour')$q$, '22023');
SELECT t_eq('place refusals write nothing', pg_temp.m_state(), :'s1');
SELECT t_eq('place at 10^15', ordergate.place_order('MBIG', 1000000000000000, '[]', NULL, now() + interval '1 hour'), 'placed');
SELECT t_eq('five arguments: default currency', (SELECT currency || ':' || allow_partial FROM ordergate.orders WHERE order_no = 'MBIG'), 'USD:false');
SELECT t_eq('place EUR in parts', ordergate.place_order('M1', 1000, '[]', NULL, now() + interval '1 hour', NULL, 'EUR', true), 'placed');
SELECT t_eq('place JPY in parts', ordergate.place_order('M2', 5000, '[]', NULL, now() + interval '1 hour', NULL, 'JPY', true), 'placed');
SELECT t_eq('place EUR whole', ordergate.place_order('M3', 700, '[]', NULL, now() + interval '1 hour', '{"k": 1}', 'EUR'), 'placed');
SELECT t_eq('place USD in parts', ordergate.place_order('M4', 9000, '[]', NULL, now() + interval '1 hour', NULL, NULL, true), 'placed');
SELECT t_eq('place KWD in parts', ordergate.place_order('M5', 3000, '[]', NULL, now() + interval '1 hour', NULL, 'KWD', true), 'placed');
SELECT t_eq('orders keep currency and parts', (SELECT string_agg(order_no || ':' || currency || ':' || allow_partial || ':' || captured_cents, ' ' ORDER BY order_no) FROM ordergate.orders WHERE order_no LIKE 'M_'),
    'M1:EUR:true:0 M2:JPY:true:0 M3:EUR:false:0 M4:USD:true:0 M5:KWD:true:0');

-- claim_payment refusals: nothing written, not even the payments row.
SELECT pg_temp.m_state() AS s2 \gset
SELECT t_error('pay lowercase currency', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'card', 'eur')$q$, '22023');
SELECT t_error('pay two-letter currency', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'card', 'EU')$q$, '22023');
SELECT t_error('pay unknown currency', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'card', 'XXY')$q$, '22023');
SELECT t_error('pay amount beyond 10^15', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 1000000000000001, 'card')$q$, '22023');
SELECT t_error('pay operator without reason', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'manual', NULL, NULL, 'alice', NULL)$q$, '22023');
SELECT t_error('pay reason without operator', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'manual', NULL, NULL, NULL, 'cash')$q$, '22023');
SELECT t_error('pay blank operator', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'manual', NULL, NULL, '  ', 'cash')$q$, '22023');
SELECT t_error('pay operator on channel card', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'card', NULL, NULL, 'alice', 'cash')$q$, '22023');
SELECT t_error('pay malformed charge_ref', $q$SELECT * FROM ordergate.claim_payment('M1', 'TX0', 100, 'card', NULL, 'bad ref')$q$, '22023');
SELECT t_eq('pay refusals write nothing', pg_temp.m_state(), :'s2');

-- currency_mismatch: its exception and alert, nothing else (the order unchanged).
SELECT (SELECT o::text FROM ordergate.orders o WHERE order_no = 'M3') AS m3 \gset
SELECT t_eq('currency_mismatch', (SELECT outcome || ':' || status FROM ordergate.claim_payment('M3', 'TX1', 700, 'card', 'USD')), 'currency_mismatch:pending_payment');
SELECT t_eq('mismatch leaves the order', (SELECT o::text FROM ordergate.orders o WHERE order_no = 'M3'), :'m3');
SELECT t_eq('mismatch exception', (SELECT kind || ':' || amount_cents || ':' || currency || ':' || resolution FROM ordergate.exceptions WHERE txn_no = 'TX1'), 'currency_mismatch:700:USD:manual_review');
SELECT t_eq('mismatch payment row', (SELECT outcome || ':' || currency FROM ordergate.payments WHERE txn_no = 'TX1'), 'currency_mismatch:USD');
SELECT t_eq('mismatch alert only', (SELECT string_agg(event_type || ':' || (payload->>'currency') || ':' || (payload->>'kind'), ',') FROM ordergate.outbox WHERE order_no = 'M3'), 'reconciliation_alert:USD:currency_mismatch');
SELECT t_eq('mismatch no log', (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'M3'), 0::bigint);
SELECT t_eq('mismatch duplicate', (SELECT outcome || ':' || first_outcome FROM ordergate.claim_payment('M3', 'TX1', 700, 'card', 'USD')), 'duplicate:currency_mismatch');
-- The order's own currency, named or not, pays it.
SELECT t_eq('named currency pays', (SELECT outcome FROM ordergate.claim_payment('M3', 'TX2', 700, 'card', 'EUR')), 'paid');
SELECT t_eq('paid event currency', (SELECT payload->>'currency' FROM ordergate.outbox WHERE order_no = 'M3' AND event_type = 'order_paid'), 'EUR');
-- A whole order paid with another amount: amount_mismatch, as before.
SELECT t_eq('place M6', ordergate.place_order('M6', 500, '[]', NULL, now() + interval '1 hour', NULL, 'EUR'), 'placed');
SELECT t_eq('whole order, part amount', (SELECT outcome FROM ordergate.claim_payment('M6', 'TX3', 200, 'card')), 'amount_mismatch');
SELECT t_eq('mismatch keeps captured 0', (SELECT captured_cents FROM ordergate.orders WHERE order_no = 'M6'), 0::bigint);

-- Parts: below the amount partial, the part that reaches it paid; parts sum to the amount.
SELECT t_eq('part 1', (SELECT outcome || ':' || status || ':' || first_outcome FROM ordergate.claim_payment('M1', 'TP1', 300, 'card')), 'partial:pending_payment:partial');
SELECT t_eq('part 2', (SELECT outcome FROM ordergate.claim_payment('M1', 'TP2', 300, 'card', 'EUR')), 'partial');
SELECT t_eq('parts captured', (SELECT status || ':' || captured_cents || ':' || (closed_at IS NULL) FROM ordergate.orders WHERE order_no = 'M1'), 'pending_payment:600:true');
SELECT t_eq('parts write no exception, event or log', (SELECT count(*) FROM ordergate.exceptions WHERE order_no = 'M1') + (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'M1') + (SELECT count(*) FROM ordergate.status_log WHERE order_no = 'M1'), 0::bigint);
SELECT t_eq('part duplicate', (SELECT outcome || ':' || status || ':' || first_outcome FROM ordergate.claim_payment('M1', 'TP1', 300, 'card')), 'duplicate:pending_payment:partial');
SELECT t_eq('part in another currency', (SELECT outcome FROM ordergate.claim_payment('M1', 'TP9', 400, 'card', 'GBP')), 'currency_mismatch');
SELECT t_eq('mismatch captures nothing', (SELECT captured_cents FROM ordergate.orders WHERE order_no = 'M1'), 600::bigint);
SELECT t_eq('last part pays', (SELECT outcome || ':' || status FROM ordergate.claim_payment('M1', 'TP3', 400, 'card')), 'paid:paid');
SELECT t_eq('paid by parts', (SELECT status || ':' || captured_cents || ':' || (closed_at IS NOT NULL) FROM ordergate.orders WHERE order_no = 'M1'), 'paid:1000:true');
SELECT t_eq('parts sum to paid', (SELECT sum(amount_cents) FROM ordergate.payments WHERE order_no = 'M1' AND outcome IN ('partial', 'paid')), 1000::numeric);
SELECT t_eq('paid log keyed by the last part', (SELECT source || ':' || idempotency_key FROM ordergate.status_log WHERE order_no = 'M1'), 'payment_callback:TP3');
SELECT t_eq('a part after paid', (SELECT outcome FROM ordergate.claim_payment('M1', 'TP4', 100, 'card')), 'double_payment');
SELECT t_eq('double payment in EUR within its limit', (SELECT kind || ':' || currency || ':' || resolution FROM ordergate.exceptions WHERE txn_no = 'TP4'), 'double_payment:EUR:auto_refund');

-- Overpaid: the excess is an exception, decided by the currency's limit (JPY 500).
SELECT t_eq('JPY part', (SELECT outcome FROM ordergate.claim_payment('M2', 'TJ1', 4000, 'card')), 'partial');
SELECT t_eq('JPY overpaid', (SELECT outcome || ':' || status || ':' || first_outcome FROM ordergate.claim_payment('M2', 'TJ2', 1400, 'card')), 'overpaid:paid:overpaid');
SELECT t_eq('overpaid exception', (SELECT kind || ':' || amount_cents || ':' || currency || ':' || resolution FROM ordergate.exceptions WHERE txn_no = 'TJ2'), 'overpaid:400:JPY:auto_refund');
SELECT t_eq('overpaid events', (SELECT string_agg(event_type || ':' || (payload->>'currency') || ':' || coalesce(payload->>'kind', '-') || ':' || (payload->>'amount_cents'), ',' ORDER BY id) FROM ordergate.outbox WHERE order_no = 'M2'),
    'order_paid:JPY:-:1400,refund_requested:JPY:overpaid:400');
SELECT t_eq('KWD part', (SELECT outcome FROM ordergate.claim_payment('M5', 'TK1', 1000, 'card')), 'partial');
SELECT t_eq('KWD overpaid beyond its limit (none: 0)', (SELECT outcome FROM ordergate.claim_payment('M5', 'TK2', 2500, 'card')), 'overpaid');
SELECT t_eq('KWD excess reviewed', (SELECT kind || ':' || amount_cents || ':' || resolution FROM ordergate.exceptions WHERE txn_no = 'TK2'), 'overpaid:500:manual_review');
SELECT t_eq('KWD alert', (SELECT event_type FROM ordergate.outbox WHERE order_no = 'M5' AND payload->>'kind' = 'overpaid'), 'reconciliation_alert');
SELECT t_eq('one paid per order', (SELECT count(*) FROM ordergate.payments WHERE order_no = 'M5' AND outcome IN ('paid', 'overpaid')), 1::bigint);

-- Staff payment: source manual_payment, actor the operator, note the reason.
SELECT t_eq('staff part', (SELECT outcome FROM ordergate.claim_payment('M4', 'TS1', 4000, 'manual', NULL, NULL, 'alice', 'cash at the till')), 'partial');
SELECT t_eq('staff payment pays', (SELECT outcome FROM ordergate.claim_payment('M4', 'TS2', 5000, 'manual', 'USD', NULL, ' bob ', 'card terminal offline')), 'paid');
SELECT t_eq('staff log', (SELECT source || ':' || actor || ':' || note FROM ordergate.status_log WHERE order_no = 'M4'), 'manual_payment:bob:card terminal offline');
SELECT t_eq('staff payments rows', (SELECT string_agg(txn_no || ':' || operator || ':' || reason, ',' ORDER BY txn_no) FROM ordergate.payments WHERE order_no = 'M4'), 'TS1:alice:cash at the till,TS2:bob:card terminal offline');
SELECT t_eq('staff paid event', (SELECT payload->>'source' || ':' || (payload->>'actor') FROM ordergate.outbox WHERE order_no = 'M4' AND event_type = 'order_paid'), 'manual_payment:bob');

-- Cancel with captured parts: one cancelled_part exception and refund event per part.
SELECT t_eq('place M7', ordergate.place_order('M7', 10000, '[]', NULL, now() - interval '1 minute', NULL, 'EUR', true), 'placed');
SELECT t_eq('M7 part 1', (SELECT outcome FROM ordergate.claim_payment('M7', 'TC1', 800, 'card')), 'partial');
SELECT t_eq('M7 part 2', (SELECT outcome FROM ordergate.claim_payment('M7', 'TC2', 3000, 'card')), 'partial');
SELECT t_eq('place M8 (no parts)', ordergate.place_order('M8', 100, '[]', NULL, now() - interval '1 minute', NULL, 'EUR', true), 'placed');
RESET ROLE;
SET ROLE ordergate_trigger;
SELECT t_eq('cancel with parts', (SELECT string_agg(order_no || ':' || outcome, ' ' ORDER BY order_no) FROM ordergate.claim_cancel(ARRAY['M7', 'M8'], 'timeout_consumer')), 'M7:cancelled M8:cancelled');
RESET ROLE;
SET ROLE ordergate_order_service;
SELECT t_eq('cancelled_part exceptions', (SELECT string_agg(txn_no || ':' || amount_cents || ':' || currency || ':' || resolution, ',' ORDER BY txn_no) FROM ordergate.exceptions WHERE kind = 'cancelled_part'),
    'TC1:800:EUR:auto_refund,TC2:3000:EUR:manual_review');
SELECT t_eq('cancelled_part events', (SELECT string_agg(event_type || ':' || (payload->>'txn_no') || ':' || (payload->>'currency'), ',' ORDER BY id) FROM ordergate.outbox WHERE order_no = 'M7' AND payload->>'kind' = 'cancelled_part'),
    'refund_requested:TC1:EUR,reconciliation_alert:TC2:EUR');
SELECT t_eq('order without parts: no exception', (SELECT count(*) FROM ordergate.exceptions WHERE order_no = 'M8'), 0::bigint);
SELECT t_eq('cancel event currency', (SELECT payload->>'currency' FROM ordergate.outbox WHERE order_no = 'M7' AND event_type = 'order_cancelled'), 'EUR');
SELECT t_eq('a part after the cancel is late', (SELECT outcome FROM ordergate.claim_payment('M7', 'TC3', 500, 'card')), 'late_payment');
SELECT t_eq('late part exception', (SELECT kind || ':' || currency || ':' || resolution FROM ordergate.exceptions WHERE txn_no = 'TC3'), 'late_payment:EUR:auto_refund');
SELECT t_eq('captured stays after the cancel', (SELECT captured_cents FROM ordergate.orders WHERE order_no = 'M7'), 3800::bigint);

-- close_order goes through the same chain.
SELECT t_eq('place M9', ordergate.place_order('M9', 900, '[]', NULL, now() + interval '1 hour', NULL, NULL, true), 'placed');
SELECT t_eq('M9 part', (SELECT outcome FROM ordergate.claim_payment('M9', 'TM1', 100, 'card')), 'partial');
SELECT t_eq('close with a part', (SELECT outcome FROM ordergate.close_order('M9', 'carol', 'buyer asked')), 'cancelled');
SELECT t_eq('close: cancelled_part in USD within auto_refund_limit_cents', (SELECT kind || ':' || currency || ':' || resolution FROM ordergate.exceptions WHERE txn_no = 'TM1'), 'cancelled_part:USD:auto_refund');

-- An unknown order: the named currency, else the default.
SELECT t_eq('unknown order', (SELECT outcome FROM ordergate.claim_payment('NOPE', 'TU1', 100, 'card')), 'not_found');
SELECT t_eq('unknown order currency', (SELECT currency FROM ordergate.exceptions WHERE txn_no = 'TU1'), 'USD');

-- order_report and exception_list carry currency and parts.
SELECT t_eq('report parts', (SELECT r->>'currency' || ':' || (r->>'allow_partial') || ':' || (r->>'captured_cents') FROM ordergate.order_report('M7') r), 'EUR:true:3800');
SELECT t_eq('report payment currency', (SELECT r->'payments'->0->>'currency' FROM ordergate.order_report('M4') r), 'USD');
SELECT t_eq('report staff payment', (SELECT r->'payments'->0->>'operator' FROM ordergate.order_report('M4') r), 'alice');
SELECT t_eq('report exception currency', (SELECT r->'exceptions'->0->>'currency' FROM ordergate.order_report('M2') r), 'JPY');
SELECT t_eq('exception_list currency last', (SELECT currency FROM ordergate.exception_list('all', 100) WHERE txn_no = 'TJ2'), 'JPY');

-- The guard: currency and allow_partial immutable, captured_cents only while pending.
RESET ROLE;
SELECT t_error('currency immutable', $q$UPDATE ordergate.orders SET currency = 'USD' WHERE order_no = 'M6'$q$, 'OG002');
SELECT t_error('allow_partial immutable', $q$UPDATE ordergate.orders SET allow_partial = true WHERE order_no = 'M6'$q$, 'OG002');
SELECT t_error('captured of a closed order', $q$UPDATE ordergate.orders SET captured_cents = 1 WHERE order_no = 'M7'$q$, 'OG002');
SELECT t_error('captured never goes down', $q$UPDATE ordergate.orders SET captured_cents = 0 WHERE order_no = 'M4'$q$, 'OG002');
SELECT t_error('parts only on allow_partial', $q$UPDATE ordergate.orders SET captured_cents = 1 WHERE order_no = 'M6'$q$, '23514');

-- A new default currency: orders placed without one take it, with auto_refund_limit_cents.
SET ROLE ordergate_admin;
SELECT t_eq('default to EUR', ordergate.set_setting('default_currency', 'EUR'), 'USD');
RESET ROLE;
SET ROLE ordergate_order_service;
SELECT t_eq('place under EUR default', ordergate.place_order('M10', 100, '[]', NULL, now() + interval '1 hour'), 'placed');
SELECT t_eq('takes EUR', (SELECT currency FROM ordergate.orders WHERE order_no = 'M10'), 'EUR');
RESET ROLE;

-- Every valid state above keeps the books clean, the money invariants included.
SELECT t_eq('reconcile clean', (SELECT string_agg(invariant || '=' || violations, ',' ORDER BY invariant) FROM ordergate.reconcile() WHERE violations <> 0), NULL::text);

-- The money invariants catch what they are for (planted, rolled back).
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE ordergate.orders SET captured_cents = captured_cents + 1 WHERE order_no = 'M4';
SELECT t_eq('invariant 10: captured sum off', t_viol(10), 1::bigint);
ROLLBACK;
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE ordergate.orders SET status = 'paid' WHERE order_no = 'M9';
SELECT t_eq('invariant 11: paid below the amount', t_viol(11) >= 1, true);
ROLLBACK;
BEGIN;
DELETE FROM ordergate.exceptions WHERE txn_no = 'TC1';
SELECT t_eq('invariant 12: a cancelled part without its exception', t_viol(12), 1::bigint);
ROLLBACK;
BEGIN;
UPDATE ordergate.exceptions SET currency = 'USD' WHERE txn_no = 'TJ2';
SELECT t_eq('invariant 13: exception in another currency', t_viol(13), 1::bigint);
ROLLBACK;

-- An order's life besides paid and cancelled: release_order, amend_order and set_deadline, every
-- outcome and every refusal (each refusal 22023 with the database unchanged), the released
-- status through every other path (claim_cancel, close_order, hold_for_payment, begin_charge,
-- claim_payment's released branch, archive, order_report) and reconcile's invariants 15 and 16
-- with a violation of each planted. The races are in tests/isolation (life_*.spec).

SELECT og_reset();
SELECT ordergate.set_setting('schedule_cancels', '1');
SELECT ordergate.add_stock('LA', 10);
SELECT ordergate.add_stock('LB', 10);
SELECT ordergate.add_coupon('LC1');
SELECT ordergate.add_coupon('LC2');
-- L1 with a coupon and lines, L2 lines, L3 gate-only overdue, L4 paid, L5 cancelled, L6 paid in
-- parts, L7 gate-only, L8 with lines and a coupon.
SELECT ordergate.place_order('L1', 1000, '[{"sku":"LA","qty":2}]', 'LC1', now() + interval '1 hour');
SELECT ordergate.place_order('L2', 500, '[{"sku":"LA","qty":1},{"sku":"LB","qty":3}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('L3', 300, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('L4', 400, '[]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('L5', 500, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('L6', 900, '[]', NULL, now() + interval '1 hour', allow_partial => true);
SELECT ordergate.place_order('L7', 700, '[]', NULL, now() + interval '1 hour', '{"ref": 7}');
SELECT ordergate.place_order('L8', 800, '[{"sku":"LB","qty":1}]', 'LC2', now() + interval '1 hour');
SELECT ordergate.claim_payment('L4', 'TL4', 400, 'card');
SELECT ordergate.claim_cancel(ARRAY['L5'], 'timeout_scanner');

-- Everything the three functions may write, for "refused calls changed nothing".
CREATE FUNCTION pg_temp.t_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('/',
        (SELECT string_agg(concat_ws('|', o.order_no, o.status, o.amount_cents, o.expire_at, o.shop, o.closed_at), ',' ORDER BY o.order_no) FROM ordergate.orders o),
        (SELECT string_agg(concat_ws('|', i.order_no, i.sku, i.qty), ',' ORDER BY i.order_no, i.sku) FROM ordergate.order_items i),
        (SELECT string_agg(concat_ws('|', i.sku, i.available), ',' ORDER BY i.sku) FROM ordergate.inventory i),
        (SELECT string_agg(concat_ws('|', c.coupon_id, c.state), ',' ORDER BY c.coupon_id) FROM ordergate.coupons c),
        (SELECT count(*) FROM ordergate.outbox), (SELECT count(*) FROM ordergate.status_log),
        (SELECT count(*) FROM ordergate.amendments), (SELECT count(*) FROM ordergate.deadline_changes)))
$$;
SELECT pg_temp.t_state() AS s0 \gset

SET ROLE ordergate_order_service;
-- Refusals: 22023, nothing written.
SELECT t_error('release: malformed order_no', $q$SELECT * FROM ordergate.release_order('L 1', 'ops', 'cod')$q$, '22023');
SELECT t_error('release: NULL order_no', $q$SELECT * FROM ordergate.release_order(NULL, 'ops', 'cod')$q$, '22023');
SELECT t_error('release: blank operator', $q$SELECT * FROM ordergate.release_order('L1', '  ', 'cod')$q$, '22023');
SELECT t_error('release: NULL operator', $q$SELECT * FROM ordergate.release_order('L1', NULL, 'cod')$q$, '22023');
SELECT t_error('release: operator too long', format($q$SELECT * FROM ordergate.release_order('L1', %L, 'cod')$q$, repeat('o', 129)), '22023');
SELECT t_error('release: NULL reason', $q$SELECT * FROM ordergate.release_order('L1', 'ops', NULL)$q$, '22023');
SELECT t_error('release: blank reason', $q$SELECT * FROM ordergate.release_order('L1', 'ops', ' ')$q$, '22023');
SELECT t_error('release: reason too long', format($q$SELECT * FROM ordergate.release_order('L1', 'ops', %L)$q$, repeat('r', 2001)), '22023');
SELECT t_error('amend: malformed order_no', $q$SELECT * FROM ordergate.amend_order('L 2', 500, '[]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: amount 0', $q$SELECT * FROM ordergate.amend_order('L2', 0, '[{"sku":"LA","qty":1}]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: amount NULL', $q$SELECT * FROM ordergate.amend_order('L2', NULL, '[{"sku":"LA","qty":1}]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: amount above 10^15', $q$SELECT * FROM ordergate.amend_order('L2', 1000000000000001, '[{"sku":"LA","qty":1}]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: items NULL', $q$SELECT * FROM ordergate.amend_order('L2', 500, NULL, NULL, 'ops')$q$, '22023');
SELECT t_error('amend: items not an array', $q$SELECT * FROM ordergate.amend_order('L2', 500, '{"sku":"LA"}', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: qty 0', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"sku":"LA","qty":0}]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: qty fraction', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"sku":"LA","qty":1.5}]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: sku missing', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"qty":1}]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: shop not an object', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"sku":"LA","qty":1}]', '[1]', 'ops')$q$, '22023');
SELECT t_error('amend: shop too large', format($q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"sku":"LA","qty":1}]', jsonb_build_object('x', %L), 'ops')$q$, repeat('x', 16400)), '22023');
SELECT t_error('amend: NULL operator', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"sku":"LA","qty":1}]', NULL, NULL)$q$, '22023');
SELECT t_error('amend: blank operator', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[{"sku":"LA","qty":1}]', NULL, ' ')$q$, '22023');
SELECT t_error('amend: lines to gate-only', $q$SELECT * FROM ordergate.amend_order('L2', 500, '[]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: gate-only to lines', $q$SELECT * FROM ordergate.amend_order('L7', 700, '[{"sku":"LA","qty":1}]', NULL, 'ops')$q$, '22023');
SELECT t_error('deadline: malformed order_no', $q$SELECT * FROM ordergate.set_deadline('L 2', now(), 'ops')$q$, '22023');
SELECT t_error('deadline: NULL deadline', $q$SELECT * FROM ordergate.set_deadline('L2', NULL, 'ops')$q$, '22023');
SELECT t_error('deadline: infinite', $q$SELECT * FROM ordergate.set_deadline('L2', 'infinity', 'ops')$q$, '22023');
SELECT t_error('deadline: beyond the horizon', $q$SELECT * FROM ordergate.set_deadline('L2', now() + interval '367 days', 'ops')$q$, '22023');
SELECT t_error('deadline: NULL operator', $q$SELECT * FROM ordergate.set_deadline('L2', now(), NULL)$q$, '22023');
SELECT t_error('deadline: operator too long', format($q$SELECT * FROM ordergate.set_deadline('L2', now(), %L)$q$, repeat('o', 129)), '22023');
RESET ROLE;
SELECT t_eq('refusals changed nothing', pg_temp.t_state(), :'s0');

-- A part captured on L6, then an amount at or below it is refused.
SELECT ordergate.claim_payment('L6', 'TL6a', 300, 'card');
SELECT pg_temp.t_state() AS s1 \gset
SELECT t_error('amend: amount at the captured parts', $q$SELECT * FROM ordergate.amend_order('L6', 300, '[]', NULL, 'ops')$q$, '22023');
SELECT t_error('amend: amount below the captured parts', $q$SELECT * FROM ordergate.amend_order('L6', 200, '[]', NULL, 'ops')$q$, '22023');
SELECT t_eq('amount refusals changed nothing', pg_temp.t_state(), :'s1');

-- release_order: outcomes.
SET ROLE ordergate_order_service;
SELECT t_eq('release L1', (SELECT row(r.outcome, r.status)::text FROM ordergate.release_order('L1', ' ops ', ' cash on delivery ') r), '(released,released)');
SELECT t_eq('release L1 again', (SELECT row(r.outcome, r.status)::text FROM ordergate.release_order('L1', 'ops', 'again') r), '(not_pending,released)');
SELECT t_eq('release paid L4', (SELECT row(r.outcome, r.status)::text FROM ordergate.release_order('L4', 'ops', 'x') r), '(not_pending,paid)');
SELECT t_eq('release cancelled L5', (SELECT row(r.outcome, r.status)::text FROM ordergate.release_order('L5', 'ops', 'x') r), '(not_pending,cancelled)');
SELECT t_eq('release unknown', (SELECT row(r.outcome, r.status)::text FROM ordergate.release_order('NOPE', 'ops', 'x') r), '(not_found,)');
RESET ROLE;
SELECT t_eq('released: log row', (SELECT row(l.from_status, l.to_status, l.source, l.idempotency_key, l.actor, l.note)::text FROM ordergate.status_log l WHERE l.order_no = 'L1'),
            '(pending_payment,released,manual,L1,ops,"cash on delivery")');
SELECT t_check('released: closed_at set', (SELECT closed_at IS NOT NULL FROM ordergate.orders WHERE order_no = 'L1'));
SELECT t_eq('released: coupon used', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'LC1'), 'used');
SELECT t_eq('released: stock kept', (SELECT available FROM ordergate.inventory WHERE sku = 'LA'), 7::bigint);
SELECT t_eq('released: one event', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'L1' AND event_type = 'order_released'), 1::bigint);
SELECT t_eq('released: event payload', (SELECT jsonb_build_array(payload->'actor', payload->'reason', payload->'amount_cents', payload->'currency', payload->'coupon_id', payload->'items', payload->'source')::text
                                          FROM ordergate.outbox WHERE order_no = 'L1' AND event_type = 'order_released'),
            '["ops", "cash on delivery", 1000, "USD", "LC1", [{"qty": 2, "sku": "LA"}], "manual"]');

-- The released order through every other path.
SELECT t_eq('claim_cancel on released', (SELECT row(c.outcome, c.status)::text FROM ordergate.claim_cancel(ARRAY['L1'], 'timeout_scanner') c), '(already_released,released)');
SELECT t_eq('claim_cancel mixed batch', (SELECT string_agg(c.order_no || ':' || c.outcome, ',') FROM ordergate.claim_cancel(ARRAY['L1', 'L3'], 'timeout_consumer') c), 'L1:already_released,L3:cancelled');
SELECT t_eq('close_order on released', (SELECT row(c.outcome, c.status)::text FROM ordergate.close_order('L1', 'ops', 'x') c), '(already_released,released)');
SELECT t_eq('hold on released', (SELECT h.outcome FROM ordergate.hold_for_payment('L1', 60) h), 'not_pending');
SELECT t_eq('begin_charge on released', (SELECT b.outcome FROM ordergate.begin_charge('L1', 'CHL1', 60) b), 'not_pending');
SELECT t_eq('amend on released', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L1', 10, '[{"sku":"LA","qty":1}]', NULL, 'ops') a), '(not_pending,released)');
SELECT t_eq('deadline on released', (SELECT d.outcome FROM ordergate.set_deadline('L1', now(), 'ops') d), 'not_pending');
SELECT t_eq('released: still released', (SELECT status FROM ordergate.orders WHERE order_no = 'L1'), 'released');
SELECT t_eq('released: no charge recorded', (SELECT count(*) FROM ordergate.charges WHERE order_no = 'L1'), 0::bigint);
SELECT t_eq('released: stock still kept', (SELECT available FROM ordergate.inventory WHERE sku = 'LA'), 7::bigint);
SELECT t_eq('invariants clean after release', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- A payment of a released order: paid, released -> paid, nothing else moves; a second is double.
SELECT t_eq('mismatched payment of released', (SELECT row(p.outcome, p.status)::text FROM ordergate.claim_payment('L1', 'TL1x', 999, 'card') p), '(amount_mismatch,released)');
SELECT t_eq('payment of released', (SELECT row(p.outcome, p.status)::text FROM ordergate.claim_payment('L1', 'TL1', 1000, 'card') p), '(paid,paid)');
SELECT t_eq('second payment of released', (SELECT row(p.outcome, p.status)::text FROM ordergate.claim_payment('L1', 'TL1b', 1000, 'card') p), '(double_payment,paid)');
SELECT t_eq('released then paid: two log rows', (SELECT string_agg(l.from_status || '>' || l.to_status || ':' || l.source || ':' || l.idempotency_key, ',' ORDER BY l.id) FROM ordergate.status_log l WHERE l.order_no = 'L1'),
            'pending_payment>released:manual:L1,released>paid:payment_callback:TL1');
SELECT t_eq('released then paid: coupon used', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'LC1'), 'used');
SELECT t_eq('released then paid: stock unchanged', (SELECT available FROM ordergate.inventory WHERE sku = 'LA'), 7::bigint);
SELECT t_eq('released then paid: order_paid', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'L1' AND event_type = 'order_paid'), 1::bigint);
SELECT t_check('released then paid: closed_at is the release''s', (SELECT o.closed_at = l.created_at FROM ordergate.orders o JOIN ordergate.status_log l ON l.order_no = o.order_no AND l.to_status = 'released' WHERE o.order_no = 'L1'));

-- A released allow_partial order takes parts as a pending one.
SELECT ordergate.release_order('L6', 'ops', 'invoice');
SELECT t_eq('part of released', (SELECT row(p.outcome, p.status)::text FROM ordergate.claim_payment('L6', 'TL6b', 200, 'card') p), '(partial,released)');
SELECT t_eq('last part of released', (SELECT row(p.outcome, p.status)::text FROM ordergate.claim_payment('L6', 'TL6c', 400, 'card') p), '(paid,paid)');
SELECT t_eq('parts of released: captured', (SELECT captured_cents FROM ordergate.orders WHERE order_no = 'L6'), 900::bigint);

-- amend_order: outcomes.
SET ROLE ordergate_order_service;
SELECT t_eq('amend L2', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L2', 650, '[{"sku":"LA","qty":2},{"sku":"LA","qty":1},{"sku":"LB","qty":1}]', '{"edit": 1}', ' clerk ') a), '(amended,pending_payment)');
SELECT t_eq('amend out of stock', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L2', 650, '[{"sku":"LA","qty":50}]', NULL, 'clerk') a), '(out_of_stock,pending_payment)');
SELECT t_eq('amend unknown sku', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L2', 650, '[{"sku":"NOSKU","qty":1}]', NULL, 'clerk') a), '(out_of_stock,pending_payment)');
SELECT t_eq('amend paid', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L4', 10, '[]', NULL, 'clerk') a), '(not_pending,paid)');
SELECT t_eq('amend cancelled', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L5', 10, '[]', NULL, 'clerk') a), '(not_pending,cancelled)');
SELECT t_eq('amend unknown', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('NOPE', 10, '[]', NULL, 'clerk') a), '(not_found,)');
SELECT t_eq('amend gate-only', (SELECT row(a.outcome, a.status)::text FROM ordergate.amend_order('L7', 750, '[]', NULL, 'clerk') a), '(amended,pending_payment)');
RESET ROLE;
SELECT t_eq('amended: lines', (SELECT string_agg(sku || ':' || qty, ',' ORDER BY sku) FROM ordergate.order_items WHERE order_no = 'L2'), 'LA:3,LB:1');
SELECT t_eq('amended: stock by the difference', (SELECT string_agg(sku || ':' || available, ',' ORDER BY sku) FROM ordergate.inventory), 'LA:5,LB:8');
SELECT t_eq('amended: amount and shop', (SELECT row(amount_cents, shop)::text FROM ordergate.orders WHERE order_no = 'L2'), '(650,"{""edit"": 1}")');
SELECT t_eq('amended: gate-only keeps its shop', (SELECT row(amount_cents, shop)::text FROM ordergate.orders WHERE order_no = 'L7'), '(750,"{""ref"": 7}")');
SELECT t_eq('amended: row', (SELECT jsonb_build_array(operator, before, after)::text FROM ordergate.amendments WHERE order_no = 'L2'),
            '["clerk", {"shop": null, "items": [{"qty": 1, "sku": "LA"}, {"qty": 3, "sku": "LB"}], "amount_cents": 500}, {"shop": {"edit": 1}, "items": [{"qty": 3, "sku": "LA"}, {"qty": 1, "sku": "LB"}], "amount_cents": 650}]');
SELECT t_eq('amended: event', (SELECT jsonb_build_array(payload->'amount_cents', payload->'currency', payload->'actor', payload->'before'->'amount_cents')::text FROM ordergate.outbox WHERE order_no = 'L2' AND event_type = 'order_amended'),
            '[650, "USD", "clerk", 500]');
SELECT t_eq('amended: refusals wrote no amendment', (SELECT count(*) FROM ordergate.amendments), 2::bigint);
SELECT t_eq('old amount is a mismatch', (SELECT p.outcome FROM ordergate.claim_payment('L2', 'TL2a', 500, 'card') p), 'amount_mismatch');
SELECT t_eq('new amount pays', (SELECT p.outcome FROM ordergate.claim_payment('L2', 'TL2b', 650, 'card') p), 'paid');
SELECT t_eq('invariants clean after amendments', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- set_deadline: outcomes, log, event and the cancel message.
SELECT ordergate.place_order('L9', 900, '[]', NULL, now() + interval '1 hour');
SELECT count(*) AS msgs0, now() + interval '2 hours' AS t2 FROM ordergate.outbox WHERE order_no = 'L9' AND event_type = 'cancel_scheduled' \gset
SET ROLE ordergate_order_service;
SELECT t_eq('deadline longer', (SELECT d.outcome FROM ordergate.set_deadline('L9', :'t2', 'ops') d), 'set');
SELECT t_eq('deadline paid', (SELECT d.outcome FROM ordergate.set_deadline('L4', now(), 'ops') d), 'not_pending');
SELECT t_eq('deadline unknown', (SELECT row(d.outcome, d.expire_at)::text FROM ordergate.set_deadline('NOPE', now(), 'ops') d), '(not_found,)');
RESET ROLE;
SELECT t_eq('deadline: expire_at', (SELECT expire_at FROM ordergate.orders WHERE order_no = 'L9'), :'t2'::timestamptz);
SELECT t_eq('deadline: one message, rewritten', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'L9' AND event_type = 'cancel_scheduled'), :msgs0::bigint);
SELECT t_eq('deadline: message due at the new deadline', (SELECT (payload->>'due_at')::timestamptz FROM ordergate.outbox WHERE order_no = 'L9' AND event_type = 'cancel_scheduled'), :'t2'::timestamptz);
SELECT t_eq('deadline: logged', (SELECT row(operator, after)::text FROM ordergate.deadline_changes WHERE order_no = 'L9'), row('ops', :'t2'::timestamptz)::text);
SELECT t_eq('deadline: event', (SELECT jsonb_build_array(payload->'actor', payload->'currency')::text FROM ordergate.outbox WHERE order_no = 'L9' AND event_type = 'order_deadline_changed'), '["ops", "USD"]');
-- Published message: a shorter deadline needs a new one (the published one is due too late).
UPDATE ordergate.outbox SET published_at = now() WHERE order_no = 'L9' AND event_type = 'cancel_scheduled';
SELECT t_eq('deadline into the past', (SELECT d.outcome FROM ordergate.set_deadline('L9', now() - interval '1 day', 'ops') d), 'set');
SELECT t_check('deadline past: a new message due now', (SELECT (payload->>'due_at')::timestamptz BETWEEN now() - interval '10 seconds' AND now() FROM ordergate.outbox WHERE order_no = 'L9' AND event_type = 'cancel_scheduled' AND published_at IS NULL));
SELECT t_eq('deadline past: due for the cancel', (SELECT c.outcome FROM ordergate.claim_cancel(ARRAY['L9'], 'timeout_consumer') c), 'cancelled');
SELECT t_eq('deadline changes kept', (SELECT count(*) FROM ordergate.deadline_changes WHERE order_no = 'L9'), 2::bigint);

-- order_report shows them.
SELECT t_eq('report: released then paid history', (SELECT jsonb_array_length(ordergate.order_report('L1')->'history')), 2);
SELECT t_eq('report: amendments', (SELECT ordergate.order_report('L2')->'amendments'->0->>'operator'), 'clerk');
SELECT t_eq('report: deadline changes', (SELECT jsonb_array_length(ordergate.order_report('L9')->'deadline_changes')), 2);

SELECT t_eq('invariants clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- Invariant 15: a released order cancelled behind the gate's back, a coupon given back.
SELECT ordergate.release_order('L8', 'ops', 'terms');
BEGIN;
ALTER TABLE ordergate.orders DISABLE TRIGGER orders_guard_update;
UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'L8';
SELECT t_check('invariant 15 sees a released order cancelled', t_viol(15) = 1, format('%s', t_viol(15)));
ROLLBACK;
BEGIN;
UPDATE ordergate.coupons SET state = 'available' WHERE coupon_id = 'LC2';
SELECT t_check('invariant 15 sees a released order''s coupon given back', t_viol(15) = 1, format('%s', t_viol(15)));
ROLLBACK;
-- Invariant 2 counts a released order's stock: given back, it is a violation.
BEGIN;
UPDATE ordergate.inventory SET available = available + 1 WHERE sku = 'LB';
SELECT t_check('invariant 2 sees a released order''s stock given back', t_viol(2) = 1, format('%s', t_viol(2)));
ROLLBACK;
-- Invariant 16: lines changed without an amendment.
SELECT ordergate.place_order('L10', 100, '[{"sku":"LB","qty":1}]', NULL, now() + interval '1 hour');
SELECT ordergate.amend_order('L10', 120, '[{"sku":"LB","qty":2}]', NULL, 'ops');
SELECT ordergate.amend_order('L10', 130, '[{"sku":"LA","qty":1}]', NULL, 'ops');
SELECT t_eq('two amendments clean', t_viol(16), 0::bigint);
BEGIN;
UPDATE ordergate.order_items SET qty = 2 WHERE order_no = 'L10';
SELECT t_check('invariant 16 sees lines changed behind the amendments', t_viol(16) = 1, format('%s', t_viol(16)));
ROLLBACK;
BEGIN;
UPDATE ordergate.orders SET amount_cents = 140 WHERE order_no = 'L10';
SELECT t_check('invariant 16 sees an amount changed behind the amendments', t_viol(16) = 1, format('%s', t_viol(16)));
ROLLBACK;
SELECT t_eq('invariants clean at the end', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- The guard: released -> cancelled and released -> pending refused, amount of a released order
-- immutable.
SELECT t_error('guard released -> cancelled', $q$UPDATE ordergate.orders SET status = 'cancelled' WHERE order_no = 'L8'$q$, 'OG001');
SELECT t_error('guard released -> pending', $q$UPDATE ordergate.orders SET status = 'pending_payment' WHERE order_no = 'L8'$q$, 'OG001');
SELECT t_error('guard paid -> released', $q$UPDATE ordergate.orders SET status = 'released' WHERE order_no = 'L4'$q$, 'OG001');
SELECT t_error('guard amount of released', $q$UPDATE ordergate.orders SET amount_cents = 5 WHERE order_no = 'L8'$q$, 'OG002');
SELECT t_error('guard deadline of released', $q$UPDATE ordergate.orders SET expire_at = now() WHERE order_no = 'L8'$q$, 'OG002');

-- archive() moves released orders (stock into archived_qty, coupon counted), amendments and
-- deadline changes with their order.
UPDATE ordergate.outbox SET published_at = now() WHERE published_at IS NULL;
UPDATE ordergate.exceptions SET state = 'resolved', resolved_at = now(), resolved_by = 't' WHERE state = 'open';
SELECT * FROM ordergate.archive(now());
SELECT t_eq('archive: released order moved', (SELECT status FROM ordergate.archived_orders WHERE order_no = 'L8'), 'released');
SELECT t_eq('archive: amendments moved', (SELECT count(*) FROM ordergate.archived_amendments WHERE order_no = 'L2'), 1::bigint);
SELECT t_eq('archive: deadline changes moved', (SELECT count(*) FROM ordergate.archived_deadline_changes WHERE order_no = 'L9'), 2::bigint);
SELECT t_eq('archive: released stock counted', (SELECT archived_qty FROM ordergate.inventory WHERE sku = 'LB'), 2::bigint);
SELECT t_eq('invariants clean after archive', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SELECT t_eq('payment of an archived released order is reviewed', (SELECT row(p.outcome, p.status)::text FROM ordergate.claim_payment('L8', 'TL8', 800, 'card') p), '(amount_mismatch,released)');
SELECT t_eq('archived released: reviewed by hand', (SELECT resolution FROM ordergate.exceptions WHERE txn_no = 'TL8'), 'manual_review');

-- The shop's hooks for the three acts, with their context (a three-argument hook).
DROP SCHEMA IF EXISTS lh CASCADE;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lh_shop') THEN CREATE ROLE lh_shop NOLOGIN; END IF;
END $$;
CREATE SCHEMA lh AUTHORIZATION lh_shop;
GRANT USAGE ON SCHEMA lh TO ordergate_owner, ordergate_admin;
SET ROLE lh_shop;
CREATE TABLE lh.calls (seq bigserial, order_nos text[], source text, context jsonb);
CREATE FUNCTION lh.record(order_nos text[], source text, context jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = lh, pg_temp AS $$
    INSERT INTO calls (order_nos, source, context) VALUES (order_nos, source, context);
$$;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA lh FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lh TO ordergate_owner;
RESET ROLE;
SELECT ordergate.add_hook('released', 'lh.record(text[],text,jsonb)'::regprocedure);
SELECT ordergate.add_hook('amended', 'lh.record(text[],text,jsonb)'::regprocedure);
SELECT ordergate.add_hook('deadline_changed', 'lh.record(text[],text,jsonb)'::regprocedure);
SELECT ordergate.place_order('L11', 100, '[]', NULL, now() + interval '1 hour', '{"s": 11}');
SELECT now() + interval '3 hours' AS t3 \gset
SELECT ordergate.amend_order('L11', 110, '[]', NULL, 'amy');
SELECT ordergate.set_deadline('L11', :'t3', 'dan');
SELECT ordergate.release_order('L11', 'rob', 'invoice 7');
SELECT t_eq('hooks: one call per act', (SELECT string_agg(array_to_string(order_nos, ',') || ':' || source, ' ' ORDER BY seq) FROM lh.calls), 'L11:manual L11:manual L11:manual');
SELECT t_eq('hook amended: context', (SELECT jsonb_build_array(context->'L11'->'operator', context->'L11'->'before'->'amount_cents', context->'L11'->'after'->'amount_cents', context->'L11'->'shop')::text FROM lh.calls WHERE seq = 1),
            '["amy", 100, 110, {"s": 11}]');
SELECT t_eq('hook deadline_changed: context', (SELECT row(context->'L11'->>'operator', (context->'L11'->>'after')::timestamptz)::text FROM lh.calls WHERE seq = 2), row('dan', :'t3'::timestamptz)::text);
SELECT t_eq('hook released: context', (SELECT jsonb_build_array(context->'L11'->'operator', context->'L11'->'reason')::text FROM lh.calls WHERE seq = 3), '["rob", "invoice 7"]');
SELECT ordergate.drop_hook(h.id) FROM ordergate.hooks h WHERE h.event IN ('released', 'amended', 'deadline_changed');
DROP SCHEMA lh CASCADE;

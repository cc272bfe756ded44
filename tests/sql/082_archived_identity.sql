-- Archived history keeps its identities: an archived order number cannot be placed again; a
-- row archive() cannot move (its key is already archived) is skipped and reported while the
-- rest of the batch moves; record_refund answers from the archive as from the hot tables; and
-- invariant 6 finds an overdue order by its deadline, whatever its payment window.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.add_coupon('C1');

-- O1 paid (with a coupon), O6 cancelled with a late payment refunded, O7 cancelled with a late
-- payment resolved by hand before any refund result; all settled and published, then archived.
SELECT ordergate.place_order('O1', 1000, '[{"sku":"S1","qty":2}]', 'C1', now() + interval '1 hour');
SELECT * FROM ordergate.claim_payment('O1', 'TO1', 1000, 'card');
SELECT ordergate.place_order('O6', 1000, '[]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.close_order('O6', 'ops', 'asked');
SELECT * FROM ordergate.claim_payment('O6', 'TL6', 1000, 'card');          -- late, auto refund
SELECT * FROM ordergate.record_refund('TL6', 'R6', 'succeeded');
SELECT ordergate.place_order('O7', 1000, '[]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.close_order('O7', 'ops', 'asked');
SELECT * FROM ordergate.claim_payment('O7', 'TL7', 1000, 'card');          -- late, auto refund
SELECT ordergate.resolve_exception(id, 'ops', 'refunded by hand') FROM ordergate.exceptions WHERE txn_no = 'TL7';
UPDATE ordergate.outbox SET published_at = now();
SELECT t_eq('identity: all archived',
            (SELECT row(orders, payments, exceptions, refunds)::text FROM ordergate.archive(now())), '(3,3,2,1)');

-- 1. An archived order number answers duplicate, and nothing is written: no order, no stock
--    reserved, the coupon untouched. Before, O1 was placed again (stock reserved twice), the old
--    payment's retry then reported the new order, and archive() failed on every later call.
SET ROLE ordergate_service;
SELECT t_eq('place: archived number is a duplicate',
            ordergate.place_order('O1', 1000, '[{"sku":"S1","qty":3}]', NULL, now() + interval '1 hour'), 'duplicate');
SELECT t_eq('place: archived gate-only number is a duplicate',
            ordergate.place_order('O6', 500, '[]', NULL, now() + interval '1 hour'), 'duplicate');
RESET ROLE;
SELECT t_eq('place: nothing written for an archived number',
            (SELECT row((SELECT count(*) FROM ordergate.orders), (SELECT count(*) FROM ordergate.order_items),
                        (SELECT available FROM ordergate.inventory WHERE sku = 'S1'),
                        (SELECT count(*) FROM ordergate.outbox))::text), '(0,0,8,0)');
SELECT t_eq('place: old payment still answers its archived order',
            (SELECT row(outcome, status, first_outcome)::text FROM ordergate.claim_payment('O1', 'TO1', 1000, 'card')), '(duplicate,paid,paid)');
SELECT t_eq('place: archive keeps working', (SELECT orders FROM ordergate.archive(now())), 0::bigint);
SELECT t_eq('place: books clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- 3. record_refund answers from the archive exactly as from the hot tables.
SET ROLE ordergate_service;
SELECT t_eq('refund: archived repeat is a duplicate',
            (SELECT row(result, state, resolution)::text FROM ordergate.record_refund('TL6', 'R6', 'succeeded')), '(duplicate,refunded,auto_refund)');
SELECT t_eq('refund: archived ref with another outcome is a conflict',
            (SELECT result FROM ordergate.record_refund('TL6', 'R6', 'failed')), 'conflict');
SELECT t_eq('refund: archived ref with another payment is a conflict',
            (SELECT result FROM ordergate.record_refund('TL7', 'R6', 'succeeded')), 'conflict');
SELECT t_eq('refund: second success on an archived refund is already_refunded',
            (SELECT row(result, state)::text FROM ordergate.record_refund('TL6', 'R6-again', 'succeeded')), '(already_refunded,refunded)');
SELECT t_eq('refund: archived payment without a refund request is not_requested',
            (SELECT result FROM ordergate.record_refund('TO1', 'R1', 'succeeded')), 'not_requested');
SELECT t_eq('refund: unknown payment still not_found',
            (SELECT result FROM ordergate.record_refund('T-NONE', 'R0', 'succeeded')), 'not_found');
RESET ROLE;
SELECT t_eq('refund: the answers wrote nothing',
            (SELECT row((SELECT count(*) FROM ordergate.refunds), (SELECT count(*) FROM ordergate.archived_refunds),
                        (SELECT count(*) FROM ordergate.outbox), (SELECT count(*) FROM ordergate.exceptions))::text), '(0,1,0,0)');

-- A new result for an archived exception (closed by hand before the provider answered): the
-- archived exception is not rewritten; the refund is recorded beside it in the archive (so a
-- repeat is a duplicate and a second success already_refunded) and an operator is asked to
-- check (reconciliation_alert refund_after_archive): the answer is manual_review.
SET ROLE ordergate_service;
SELECT t_eq('refund: new result for an archived exception',
            (SELECT row(result, state, resolution)::text FROM ordergate.record_refund('TL7', 'R7', 'succeeded')), '(manual_review,resolved,auto_refund)');
SELECT t_eq('refund: its repeat is a duplicate',
            (SELECT result FROM ordergate.record_refund('TL7', 'R7', 'succeeded')), 'duplicate');
SELECT t_eq('refund: a second success is already_refunded',
            (SELECT result FROM ordergate.record_refund('TL7', 'R7-b', 'succeeded')), 'already_refunded');
RESET ROLE;
SELECT t_eq('refund: recorded in the archive',
            (SELECT string_agg(refund_ref || ':' || txn_no || ':' || outcome, ',' ORDER BY refund_ref) FROM ordergate.archived_refunds), 'R6:TL6:succeeded,R7:TL7:succeeded');
SELECT t_eq('refund: archived exception untouched',
            (SELECT row(state, resolution, resolved_by)::text FROM ordergate.archived_exceptions WHERE txn_no = 'TL7'), '(resolved,auto_refund,ops)');
SELECT t_eq('refund: one alert for the operator',
            (SELECT string_agg(event_type || ':' || (payload->>'kind') || ':' || (payload->>'refund_ref') || ':' || (payload->>'outcome'), ',') FROM ordergate.outbox),
            'reconciliation_alert:refund_after_archive:R7:succeeded');
SELECT t_eq('refund: books clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- A hot exception cannot reuse an archived refund reference.
SELECT ordergate.place_order('O8', 1000, '[]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.close_order('O8', 'ops', 'asked');
SELECT * FROM ordergate.claim_payment('O8', 'TL8', 1000, 'card');
SET ROLE ordergate_service;
SELECT t_eq('refund: archived ref on a hot payment is a conflict',
            (SELECT result FROM ordergate.record_refund('TL8', 'R6', 'succeeded')), 'conflict');
RESET ROLE;
SELECT t_eq('refund: hot exception still open', (SELECT state FROM ordergate.exceptions WHERE txn_no = 'TL8'), 'open');

-- 2. A row archive() cannot move is skipped and reported (kept), the rest of the batch moves.
--    Planted: K1's number already archived (what a re-placed number left behind), K2's payment
--    key already archived (the move fails on it, then every key is probed), a detached
--    exception and a detached event whose ids are archived; K3 is clean.
SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.place_order('K1', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('K2', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('K3', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.claim_payment('K1', 'TK1', 100, 'card');
SELECT * FROM ordergate.claim_payment('K2', 'TK2', 100, 'card');
SELECT * FROM ordergate.claim_payment('K3', 'TK3', 100, 'card');
SELECT * FROM ordergate.claim_payment('GONE', 'TG', 100, 'card');        -- unknown: detached rows
SELECT ordergate.resolve_exception(id, 'ops', 'sent back') FROM ordergate.exceptions WHERE txn_no = 'TG';
UPDATE ordergate.outbox SET published_at = now();
INSERT INTO ordergate.archived_orders (order_no, status, amount_cents, expire_at, original_expire_at, created_at, closed_at)
VALUES ('K1', 'cancelled', 100, now() - interval '1 day', now() - interval '1 day', now() - interval '2 days', now() - interval '1 day');
INSERT INTO ordergate.archived_payments (txn_no, order_no, amount_cents, channel, outcome)
VALUES ('TK2', 'ELSEWHERE', 100, 'card', 'not_found');
INSERT INTO ordergate.archived_exceptions (id, order_no, kind, txn_no, amount_cents, resolution, state, created_at)
SELECT x.id, 'ELSEWHERE', 'unknown_order', 'T-ELSEWHERE', 100, 'manual_review', 'resolved', x.created_at
  FROM ordergate.exceptions x WHERE x.order_no = 'GONE';
INSERT INTO ordergate.archived_outbox (id, event_type, order_no, payload, created_at, published_at)
SELECT b.id, 'reconciliation_alert', 'ELSEWHERE', '{}', b.created_at, b.published_at FROM ordergate.outbox b WHERE b.order_no = 'GONE';
SET ROLE ordergate_admin;
SELECT t_eq('skip: the batch moves the rest and reports the skipped rows',
            (SELECT row(orders, payments, exceptions, outbox, kept, more)::text FROM ordergate.archive(now())), '(1,1,0,1,4,f)');
SELECT t_eq('skip: a batch of one at the conflicts reports them',
            (SELECT row(orders, kept)::text FROM ordergate.archive(now(), 1)), '(0,3)');
RESET ROLE;
SELECT t_eq('skip: the skipped orders stay whole in the hot tables',
            (SELECT string_agg(o.order_no || ':' || (SELECT count(*) FROM ordergate.payments p WHERE p.order_no = o.order_no)
                               || ':' || (SELECT count(*) FROM ordergate.status_log l WHERE l.order_no = o.order_no)
                               || ':' || (SELECT count(*) FROM ordergate.order_items i WHERE i.order_no = o.order_no)
                               || ':' || (SELECT count(*) FROM ordergate.outbox b WHERE b.order_no = o.order_no), ',' ORDER BY o.order_no)
               FROM ordergate.orders o), 'K1:1:1:1:1,K2:1:1:1:1');
SELECT t_eq('skip: the clean order moved', (SELECT count(*) FROM ordergate.archived_orders WHERE order_no = 'K3'), 1::bigint);
SELECT t_eq('skip: the detached exception, its payment and event stay',
            (SELECT row((SELECT count(*) FROM ordergate.exceptions WHERE order_no = 'GONE'),
                        (SELECT count(*) FROM ordergate.payments WHERE order_no = 'GONE'),
                        (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'GONE'))::text), '(1,1,1)');
SELECT t_eq('skip: the planted rows untouched',
            (SELECT row((SELECT status FROM ordergate.archived_orders WHERE order_no = 'K1'),
                        (SELECT order_no FROM ordergate.archived_payments WHERE txn_no = 'TK2'))::text), '(cancelled,ELSEWHERE)');
SELECT t_eq('skip: stock counted once', (SELECT row(available, archived_qty)::text FROM ordergate.inventory), '(7,1)');
SELECT t_eq('skip: books clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- The probes read the archive by key, never whole: a batch over a large archive (statistics
-- taken) scans no archive table sequentially.
SELECT og_reset();
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO ordergate.archived_orders (order_no, status, amount_cents, expire_at, original_expire_at, created_at, closed_at)
SELECT 'A' || g, 'cancelled', 100, now(), now(), now(), now() FROM generate_series(1, 20000) g;
INSERT INTO ordergate.archived_outbox (id, event_type, order_no, payload, created_at, published_at)
SELECT 1000000 + g, 'order_cancelled', 'A' || g, '{}', now(), now() FROM generate_series(1, 20000) g;
COMMIT;
SELECT ordergate.place_order('M' || g, 100, '[]', NULL, now() + interval '1 hour') FROM generate_series(1, 50) g;
SELECT ordergate.close_order('M' || g, 'ops', 'asked') FROM generate_series(1, 50) g;
SELECT * FROM ordergate.claim_payment('GONE', 'TG', 100, 'card');
UPDATE ordergate.outbox SET published_at = now();
ANALYZE ordergate.archived_orders, ordergate.archived_outbox, ordergate.orders, ordergate.outbox;
BEGIN;
CREATE TEMP TABLE scans_before ON COMMIT DROP AS
SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = 'ordergate';
SELECT t_eq('reads: the batch moves',
            (SELECT row(orders, kept)::text FROM ordergate.archive(now())), '(50,0)');
SELECT t_eq('reads: no archive table scanned whole',
            (SELECT string_agg(a.relname, ',' ORDER BY a.relname)
               FROM pg_stat_xact_user_tables a JOIN scans_before b USING (relname)
              WHERE a.schemaname = 'ordergate' AND a.relname LIKE 'archived%' AND a.seq_scan > b.seq_scan), NULL::text);
COMMIT;

-- 5. Invariant 6 is not windowed: an order with a 9-day payment window, created 9 days ago and
--    now overdue, is found by the 7-day window the scanner's reconciliation uses (it filtered on
--    created_at before and never saw it), and by any shorter one; one still ahead is not.
SELECT og_reset();
INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at, created_at)
VALUES ('L9', 'pending_payment', 100, now() - interval '1 hour', now() - interval '9 days'),
       ('L8', 'pending_payment', 100, now() + interval '1 hour', now() - interval '9 days');
SELECT t_eq('inv6: overdue order with a long window reported',
            (SELECT row(violations, sample)::text FROM ordergate.reconcile(now() - interval '7 days') WHERE invariant = 6), '(1,{L9})');
SELECT t_eq('inv6: not windowed: an overdue order is reported whatever p_since',
            (SELECT row(violations, sample)::text FROM ordergate.reconcile(now() - interval '30 minutes') WHERE invariant = 6), '(1,{L9})');
SELECT og_reset();

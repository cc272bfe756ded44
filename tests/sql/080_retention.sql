-- archive(): closed, old, settled orders move to the archived_* tables with all their rows;
-- pending orders, open exceptions, unpublished events and young orders stay; the books reconcile
-- before and after; a second run moves nothing; bad arguments are 22023 and change nothing; only
-- an admin may call it; status_log and closed orders stay undeletable for everyone else;
-- payments for archived orders answer as before and never reopen them.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 100);
SELECT ordergate.add_stock('S2', 50);
SELECT ordergate.add_coupon('C1');
SELECT ordergate.add_coupon('C2');
SELECT ordergate.add_coupon('C3');

SELECT ordergate.place_order('A1', 1000, '[{"sku":"S1","qty":2},{"sku":"S2","qty":1}]', 'C1', now() + interval '1 hour');
SELECT ordergate.place_order('A2', 1000, '[{"sku":"S1","qty":3}]', 'C2', now() + interval '1 hour');
SELECT ordergate.place_order('A3', 1000, '[{"sku":"S2","qty":4}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('A4', 1000, '[{"sku":"S1","qty":5}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('A5', 1000, '[{"sku":"S1","qty":1}]', 'C3', now() + interval '1 hour');
SELECT ordergate.place_order('P1', 1000, '[{"sku":"S2","qty":2}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('B1', 1000, '[{"sku":"S1","qty":7}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('G1', 1000, '[]', NULL, now() + interval '1 hour', '{"lines": [{"sku_id": 4, "qty": 1}]}');

SELECT * FROM ordergate.claim_payment('A1', 'TA1', 1000, 'card');
SELECT * FROM ordergate.close_order('A2', 'ops', 'asked');
SELECT * FROM ordergate.claim_payment('A3', 'TA3', 1000, 'card');
SELECT * FROM ordergate.claim_payment('A3', 'TA3B', 9000, 'card');          -- double, manual review: open
SELECT * FROM ordergate.close_order('A4', 'ops', 'asked');
SELECT * FROM ordergate.claim_payment('A4', 'TA4', 1000, 'card');           -- late, auto refund
SELECT * FROM ordergate.record_refund('TA4', 'R-A4', 'succeeded');          -- refunded: closed
SELECT * FROM ordergate.claim_payment('A5', 'TA5', 1000, 'card');
SELECT * FROM ordergate.close_order('G1', 'ops', 'gate only');
SELECT * FROM ordergate.claim_payment('NOPE', 'TU1', 1000, 'card');         -- unknown order
SELECT ordergate.resolve_exception(id, 'ops', 'sent back') FROM ordergate.exceptions WHERE txn_no = 'TU1';
INSERT INTO ordergate.scanner_runs (status, finished_at) VALUES ('done', now()), ('done', now()), ('failed', now());
SELECT ordergate.reconcile_run_record(now(), NULL, r, '{}', 0, NULL) FROM unnest(ARRAY['violated', 'clean']) r;
-- Every event published but A5's.
UPDATE ordergate.outbox SET published_at = now() WHERE order_no <> 'A5';

CREATE TEMP TABLE mark AS SELECT clock_timestamp() AS t;
GRANT SELECT ON mark TO PUBLIC;
SELECT pg_sleep(0.01);
SELECT * FROM ordergate.claim_payment('B1', 'TB1', 1000, 'card');          -- closed after the mark
UPDATE ordergate.outbox SET published_at = now() WHERE order_no = 'B1';

SELECT t_eq('retention: books clean before', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

CREATE TEMP TABLE counts_before AS
SELECT (SELECT count(*) FROM ordergate.orders) AS o, (SELECT count(*) FROM ordergate.status_log) AS l,
       (SELECT count(*) FROM ordergate.payments) AS p, (SELECT count(*) FROM ordergate.outbox) AS b,
       (SELECT count(*) FROM ordergate.exceptions) AS x, (SELECT count(*) FROM ordergate.archived_orders) AS a;

-- Bad arguments: 22023, nothing changes.
SELECT t_error('archive: NULL before', $q$SELECT * FROM ordergate.archive(NULL)$q$, '22023');
SELECT t_error('archive: before in the future', $q$SELECT * FROM ordergate.archive(now() + interval '1 minute')$q$, '22023');
SELECT t_error('archive: batch 0', $q$SELECT * FROM ordergate.archive(now(), 0)$q$, '22023');
SELECT t_error('archive: batch negative', $q$SELECT * FROM ordergate.archive(now(), -5)$q$, '22023');
SELECT t_error('archive: batch NULL', $q$SELECT * FROM ordergate.archive(now(), NULL)$q$, '22023');
SELECT t_error('archive: batch too large', $q$SELECT * FROM ordergate.archive(now(), 100001)$q$, '22023');
SELECT t_eq('archive: bad arguments changed nothing',
            (SELECT row(o, l, p, b, x, a)::text FROM counts_before),
            (SELECT row((SELECT count(*) FROM ordergate.orders), (SELECT count(*) FROM ordergate.status_log),
                        (SELECT count(*) FROM ordergate.payments), (SELECT count(*) FROM ordergate.outbox),
                        (SELECT count(*) FROM ordergate.exceptions), (SELECT count(*) FROM ordergate.archived_orders))::text));

-- Privileges: the service may not archive; nobody deletes status_log or closed orders directly.
SET ROLE ordergate_service;
SELECT t_error('archive: service refused', $q$SELECT * FROM ordergate.archive(now())$q$, '42501');
RESET ROLE;
SELECT t_error('status_log still append-only', $q$DELETE FROM ordergate.status_log WHERE order_no = 'A1'$q$, 'OG004');
SELECT t_error('status_log: the setting alone admits nothing',
               $q$SELECT set_config('ordergate.archiving', pg_current_xact_id()::text, true); DELETE FROM ordergate.status_log WHERE order_no = 'A1'$q$, 'OG004');
SELECT t_error('closed order still undeletable', $q$DELETE FROM ordergate.orders WHERE order_no = 'A2'$q$, 'OG003');

-- Batches: one order at a time, more = true while some are left.
SET ROLE ordergate_admin;
SELECT t_eq('archive: first batch of 1',
            (SELECT row(orders, more)::text FROM ordergate.archive((SELECT t FROM mark), 1)), '(1,t)');
SELECT t_eq('archive: the rest',
            (SELECT row(orders, order_items, status_log, payments, exceptions, refunds, outbox, scanner_runs)::text
               FROM ordergate.archive((SELECT t FROM mark))),
            -- A2, A4, G1 (the first batch took A1, and one of each other kind: TU1's exception,
            -- payment and alert, one scanner run): lines of A2 and A4; 3 log rows; TA4; A4's
            -- exception and refund; events A2, A4 cancelled + A4 refund + G1 cancelled; the
            -- second of the three runs (the newest stays).
            '(3,2,3,1,1,1,4,1)');
SELECT t_eq('archive: nothing left', (SELECT row(orders, order_items, status_log, payments, exceptions, refunds, outbox, scanner_runs, more)::text
               FROM ordergate.archive((SELECT t FROM mark))), '(0,0,0,0,0,0,0,0,f)');
RESET ROLE;

SELECT t_eq('archive: hot orders left', (SELECT string_agg(order_no, ',' ORDER BY order_no) FROM ordergate.orders), 'A3,A5,B1,P1');
SELECT t_eq('archive: archived orders', (SELECT string_agg(order_no || ':' || status, ',' ORDER BY order_no) FROM ordergate.archived_orders), 'A1:paid,A2:cancelled,A4:cancelled,G1:cancelled');
SELECT t_eq('archive: log rows moved', (SELECT string_agg(order_no, ',' ORDER BY order_no) FROM ordergate.archived_status_log), 'A1,A2,A4,G1');
SELECT t_eq('archive: log rows kept', (SELECT string_agg(order_no, ',' ORDER BY order_no) FROM ordergate.status_log), 'A3,A5,B1');
SELECT t_eq('archive: lines moved', (SELECT string_agg(order_no || ':' || sku || ':' || qty, ',' ORDER BY order_no, sku) FROM ordergate.archived_order_items), 'A1:S1:2,A1:S2:1,A2:S1:3,A4:S1:5');
SELECT t_eq('archive: payments moved', (SELECT string_agg(txn_no || ':' || outcome, ',' ORDER BY txn_no) FROM ordergate.archived_payments), 'TA1:paid,TA4:late_payment,TU1:not_found');
SELECT t_eq('archive: payments kept', (SELECT string_agg(txn_no, ',' ORDER BY txn_no) FROM ordergate.payments), 'TA3,TA3B,TA5,TB1');
SELECT t_eq('archive: open exception kept', (SELECT string_agg(txn_no || ':' || state, ',') FROM ordergate.exceptions), 'TA3B:open');
SELECT t_eq('archive: closed exceptions moved', (SELECT string_agg(txn_no || ':' || state, ',' ORDER BY txn_no) FROM ordergate.archived_exceptions), 'TA4:refunded,TU1:resolved');
SELECT t_eq('archive: refund moved', (SELECT string_agg(refund_ref, ',') FROM ordergate.archived_refunds), 'R-A4');
SELECT t_eq('archive: unpublished event kept', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'A5' AND published_at IS NULL), 1::bigint);
SELECT t_eq('archive: events moved', (SELECT string_agg(order_no || ':' || event_type, ',' ORDER BY order_no, event_type) FROM ordergate.archived_outbox),
            'A1:order_paid,A2:order_cancelled,A4:order_cancelled,A4:refund_requested,G1:order_cancelled,NOPE:reconciliation_alert');
SELECT t_eq('archive: sold qty kept per sku', (SELECT string_agg(sku || ':' || archived_qty, ',' ORDER BY sku) FROM ordergate.inventory), 'S1:2,S2:1');
SELECT t_eq('archive: newest scanner run kept', (SELECT count(*) FROM ordergate.scanner_runs), 1::bigint);
SELECT t_eq('archive: newest reconciliation kept', (SELECT string_agg(result, ',') FROM ordergate.reconcile_runs), 'clean');
SELECT t_eq('archive: column values kept', (SELECT row(a.amount_cents, a.coupon_id, a.closed_at IS NOT NULL)::text FROM ordergate.archived_orders a WHERE order_no = 'A1'), '(1000,C1,t)');
SELECT t_eq('archive: shop data kept', (SELECT a.shop FROM ordergate.archived_orders a WHERE order_no = 'G1'), '{"lines": [{"sku_id": 4, "qty": 1}]}'::jsonb);
SELECT t_eq('retention: books clean after', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SELECT t_eq('retention: coupon of an archived paid order still used', (SELECT state FROM ordergate.coupons WHERE coupon_id = 'C1'), 'used');

-- Invariants 2 and 3 still catch what they caught.
BEGIN;
UPDATE ordergate.inventory SET archived_qty = archived_qty + 1 WHERE sku = 'S1';
SELECT t_eq('inv2 counts archived qty', t_viol(2), 1::bigint);
ROLLBACK;
BEGIN;
UPDATE ordergate.coupons SET state = 'available' WHERE coupon_id = 'C1';
SELECT t_eq('inv3 sees archived paid coupon', t_viol(3), 1::bigint);
ROLLBACK;

-- Payments for archived orders: as before, and nothing reopens.
SET ROLE ordergate_service;
SELECT t_eq('archived: retried payment is a duplicate', (SELECT row(outcome, status, first_outcome)::text FROM ordergate.claim_payment('A1', 'TA1', 1000, 'card')), '(duplicate,paid,paid)');
SELECT t_eq('archived: retried late payment is a duplicate', (SELECT row(outcome, status, first_outcome)::text FROM ordergate.claim_payment('A4', 'TA4', 1000, 'card')), '(duplicate,cancelled,late_payment)');
SELECT t_eq('archived: a new payment on a cancelled order is late', (SELECT row(outcome, status)::text FROM ordergate.claim_payment('A2', 'TA2', 1000, 'card')), '(late_payment,cancelled)');
SELECT t_eq('archived: a new payment on a paid order is double', (SELECT row(outcome, status)::text FROM ordergate.claim_payment('A1', 'TA1B', 1000, 'card')), '(double_payment,paid)');
SELECT t_eq('archived: cancel message finds nothing', (SELECT row(outcome, status)::text FROM ordergate.claim_cancel(ARRAY['A2'], 'timeout_consumer')), '(not_found,)');
RESET ROLE;
SELECT t_eq('archived: no duplicate left in payments', (SELECT count(*) FROM ordergate.payments WHERE txn_no IN ('TA1', 'TA4')), 0::bigint);
SELECT t_eq('archived: exceptions for the new payments', (SELECT string_agg(txn_no || ':' || kind || ':' || order_no, ',' ORDER BY txn_no) FROM ordergate.exceptions WHERE txn_no IN ('TA2', 'TA1B')), 'TA1B:double_payment:A1,TA2:late_payment:A2');
SELECT t_eq('archived: nothing reopened', (SELECT count(*) FROM ordergate.orders WHERE order_no IN ('A1', 'A2')), 0::bigint);
SELECT t_eq('archived: stock untouched by late payments', (SELECT string_agg(sku || ':' || available || ':' || archived_qty, ',' ORDER BY sku) FROM ordergate.inventory), 'S1:90:2,S2:43:1');
SELECT t_eq('retention: books clean after late payments', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- Those exceptions, once closed and their events published, follow their orders.
SELECT ordergate.resolve_exception(id, 'ops', 'sent back') FROM ordergate.exceptions WHERE txn_no IN ('TA2', 'TA1B');
UPDATE ordergate.outbox SET published_at = now() WHERE published_at IS NULL AND order_no IN ('A1', 'A2');
SELECT t_eq('archive: late exceptions follow',
            (SELECT row(orders, payments, exceptions, outbox)::text FROM ordergate.archive(now())), '(1,3,2,3)');
SELECT t_eq('retention: books clean at the end', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

-- Dropping archive data for good, as docs/operations.md ("Retention") says: the books still
-- reconcile, and a payment for a dropped order is an unknown order (manual review).
BEGIN;
SET LOCAL ROLE ordergate_owner;
DELETE FROM ordergate.coupons c USING ordergate.archived_orders a
 WHERE a.coupon_id = c.coupon_id AND a.status = 'paid' AND a.archived_at < now() + interval '1 second';
UPDATE ordergate.inventory i SET total = i.total - s.q, archived_qty = i.archived_qty - s.q
  FROM (SELECT it.sku, sum(it.qty) AS q FROM ordergate.archived_order_items it
          JOIN ordergate.archived_orders a ON a.order_no = it.order_no
         WHERE a.status = 'paid' AND a.archived_at < now() + interval '1 second' GROUP BY it.sku) s
 WHERE s.sku = i.sku;
DELETE FROM ordergate.archived_order_items it USING ordergate.archived_orders a
 WHERE a.order_no = it.order_no AND a.archived_at < now() + interval '1 second';
DELETE FROM ordergate.archived_orders WHERE archived_at < now() + interval '1 second';
DELETE FROM ordergate.archived_status_log WHERE archived_at < now() + interval '1 second';
DELETE FROM ordergate.archived_payments WHERE archived_at < now() + interval '1 second';
DELETE FROM ordergate.archived_refunds WHERE archived_at < now() + interval '1 second';
DELETE FROM ordergate.archived_exceptions WHERE archived_at < now() + interval '1 second';
DELETE FROM ordergate.archived_outbox WHERE archived_at < now() + interval '1 second';
COMMIT;
SELECT t_eq('drop: archive empty', (SELECT count(*) FROM ordergate.archived_orders) + (SELECT count(*) FROM ordergate.archived_payments), 0::bigint);
SELECT t_eq('drop: books clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SELECT t_eq('drop: a payment for a dropped order is unknown', (SELECT outcome FROM ordergate.claim_payment('A2', 'TA2C', 1000, 'card')), 'not_found');

-- What one batch reads: never a whole table, whatever the history. The rows of no order come
-- from the detached ones only (migration 009), the candidates' open-exception and
-- unpublished-event checks are probes by order_no. Before, each batch anti-joined every event
-- and every exception against every order (at 9.4 million orders, 8.8 s of each batch), and
-- compared every candidate with every unpublished event.
SELECT og_reset();
BEGIN;
SET LOCAL session_replication_role = replica;  -- bulk rows, consistent by construction
INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at, original_expire_at, created_at, closed_at)
SELECT 'N' || g, CASE WHEN g % 2 = 0 THEN 'paid' ELSE 'cancelled' END, 100, now() - interval '2 hours', now() - interval '2 hours',
       now() - interval '3 hours', CASE WHEN g = 0 THEN now() - interval '40 days' ELSE now() - interval '1 hour' END
  FROM generate_series(0, 3000) g;
INSERT INTO ordergate.outbox (event_type, order_no, payload, created_at, published_at)
SELECT 'order_cancelled', 'N' || g, '{}', now() - interval '1 hour', now()
  FROM generate_series(0, 3000) g;
INSERT INTO ordergate.order_items (order_no, sku, qty) SELECT 'N' || g, 'S' || k, 1 FROM generate_series(0, 3000) g, generate_series(1, 2) k;
INSERT INTO ordergate.exceptions (order_no, kind, txn_no, amount_cents, resolution, state, created_at, resolved_at, resolved_by)
SELECT 'N' || g, 'late_payment', 'TN' || g, 100, 'manual_review', 'resolved', now() - interval '50 minutes',
       now() - interval '40 minutes', 'ops'
  FROM generate_series(1, 3000) g;
COMMIT;
-- A late payment for an order that is not in the hot table: its exception and event are
-- detached (the trigger marks them), and leave once closed and published.
SELECT t_eq('reads: payment for an unknown order', (SELECT outcome FROM ordergate.claim_payment('GONE-1', 'TG1', 100, 'card')), 'not_found');
SELECT t_eq('reads: its rows are detached', (SELECT row(x.detached, b.detached)::text FROM ordergate.exceptions x JOIN ordergate.outbox b ON b.order_no = x.order_no WHERE x.order_no = 'GONE-1'), '(t,t)');
SELECT t_eq('reads: a transition event is not', (SELECT bool_or(detached) FROM ordergate.outbox WHERE order_no LIKE 'N%'), false);
SELECT ordergate.resolve_exception(id, 'ops', 'unknown order, refunded by hand') FROM ordergate.exceptions WHERE order_no = 'GONE-1';
UPDATE ordergate.exceptions SET created_at = now() - interval '40 days' WHERE order_no = 'GONE-1';
UPDATE ordergate.outbox SET published_at = now(), created_at = now() - interval '40 days' WHERE order_no = 'GONE-1';
ANALYZE ordergate.orders, ordergate.outbox, ordergate.exceptions, ordergate.payments;
-- Then, unknown to the statistics (as right after a burst of claims, or a relay outage): 200
-- events unpublished and 200 exceptions open, of young orders.
UPDATE ordergate.outbox SET published_at = NULL WHERE order_no IN (SELECT 'N' || g FROM generate_series(1, 3000, 15) g);
UPDATE ordergate.exceptions SET state = 'open', resolved_at = NULL, resolved_by = NULL
 WHERE order_no IN (SELECT 'N' || g FROM generate_series(2, 3000, 15) g);
-- The backend's counters not yet reported include earlier transactions: the batch's reads are
-- the difference across the call, all in one transaction (no report happens inside it).
BEGIN;
CREATE TEMP TABLE reads_before ON COMMIT DROP AS
SELECT relname, seq_tup_read, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE schemaname = 'ordergate';
SELECT t_eq('reads: the old order and the detached rows move',
            (SELECT row(orders, payments, exceptions, outbox)::text FROM ordergate.archive(now() - interval '30 days')), '(1,1,1,2)');
-- 3,001 orders (1,501 paid), 6,002 lines, 3,003 events, 3,001 exceptions: a batch of one paid
-- order and two detached rows reads a handful of each (rows returned by sequential and index
-- scans), not thousands.
SELECT t_eq('reads: no table read whole',
            (SELECT string_agg(a.relname || ' ' || r.n || ' rows', ', ' ORDER BY a.relname)
               FROM pg_stat_xact_user_tables a JOIN reads_before b USING (relname)
              CROSS JOIN LATERAL (SELECT (a.seq_tup_read - b.seq_tup_read)
                                         + (a.idx_tup_fetch - b.idx_tup_fetch) AS n) r
              WHERE a.schemaname = 'ordergate' AND a.relname IN ('orders', 'outbox', 'exceptions')
                AND r.n > 100), NULL::text);
COMMIT;

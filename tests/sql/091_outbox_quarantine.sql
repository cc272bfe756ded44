-- Deadlines the cancel message cannot carry are refused (max_deadline_seconds); an order keeps at
-- most one cancel message waiting (hold_for_payment rewrites it, or writes nothing when a
-- published one will be re-scheduled); an outbox event the relay cannot publish is quarantined
-- with its reason, skipped by the relay, counted, listed, reported by reconcile() (invariant 9),
-- kept out of archive() with its order, and released by an admin.

------------------------------------------------------------------------------------------------
-- The horizon.
SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.set_setting('schedule_cancels', '1');
SET ROLE ordergate_service;
-- A time in epoch milliseconds read as seconds: year 57900.
SELECT t_error('place_order: epoch milliseconds refused',
    $q$SELECT ordergate.place_order('D1', 100, '[{"sku":"S1","qty":1}]', NULL, to_timestamp(1796000000000))$q$, '22023');
SELECT t_error('place_order: 367 days refused',
    $q$SELECT ordergate.place_order('D1', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '367 days')$q$, '22023');
SELECT t_error('place_order: infinity still refused',
    $q$SELECT ordergate.place_order('D1', 100, '[{"sku":"S1","qty":1}]', NULL, 'infinity')$q$, '22023');
SELECT t_error('place_order: NULL still refused',
    $q$SELECT ordergate.place_order('D1', 100, '[{"sku":"S1","qty":1}]', NULL, NULL)$q$, '22023');
SELECT t_eq('refusals wrote no order', (SELECT count(*) FROM ordergate.orders), 0::bigint);
SELECT t_eq('refusals wrote no event', (SELECT count(*) FROM ordergate.outbox), 0::bigint);
SELECT t_eq('refusals reserved no stock', (SELECT available FROM ordergate.inventory WHERE sku = 'S1'), 10::bigint);
SELECT t_eq('366 days is inside', ordergate.place_order('D2', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '366 days'), 'placed');
RESET ROLE;
SELECT t_error('max_deadline_seconds 0 refused', $q$SELECT ordergate.set_setting('max_deadline_seconds', '0')$q$, '22023');
SELECT t_error('max_deadline_seconds over 100 years refused', $q$SELECT ordergate.set_setting('max_deadline_seconds', '3153600001')$q$, '22023');
SELECT t_eq('horizon unchanged by refusals', (SELECT value FROM ordergate.settings WHERE key = 'max_deadline_seconds'), '31622400');
SELECT t_eq('horizon of 60 s', ordergate.set_setting('max_deadline_seconds', '60'), '31622400');
SET ROLE ordergate_service;
SELECT t_error('place_order beyond a 60 s horizon', $q$SELECT ordergate.place_order('D3', 100, '[]', NULL, now() + interval '61 seconds')$q$, '22023');
SELECT t_eq('place_order inside a 60 s horizon', ordergate.place_order('D4', 100, '[]', NULL, now() + interval '10 seconds'), 'placed');
-- max_hold_seconds is 900, but a hold may not go beyond the horizon either.
SELECT t_error('hold beyond the horizon', $q$SELECT * FROM ordergate.hold_for_payment('D4', 61)$q$, '22023');
SELECT t_eq('refused hold left the deadline', (SELECT expire_at = original_expire_at FROM ordergate.orders WHERE order_no = 'D4'), true);
SELECT t_eq('refused hold wrote nothing', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'D4'), 1::bigint);
SELECT t_eq('hold inside the horizon', (SELECT outcome FROM ordergate.hold_for_payment('D4', 60)), 'held');
RESET ROLE;

------------------------------------------------------------------------------------------------
-- One cancel message per order: 200 keep-alive holds.
SELECT og_reset();
SELECT ordergate.set_setting('schedule_cancels', '1');
SET ROLE ordergate_service;
SELECT ordergate.place_order('K1', 100, '[]', NULL, now() + interval '10 seconds');
-- Each hold moves the deadline by a second (one statement: now() is fixed, so seconds must grow).
SELECT t_eq('200 holds, all held',
    (SELECT count(*) FILTER (WHERE h.outcome = 'held')
       FROM generate_series(11, 210) s, LATERAL ordergate.hold_for_payment('K1', s) h), 200::bigint);
SELECT t_eq('unpublished: one message, rewritten',
    (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K1'), 1::bigint);
SELECT t_eq('the message carries the final deadline',
    (SELECT (b.payload ->> 'due_at')::timestamptz = o.expire_at AND o.expire_at > o.original_expire_at + interval '190 seconds'
       FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no) WHERE b.order_no = 'K1'), true);
SELECT t_eq('the payload is the cancel message',
    (SELECT payload::jsonb - 'due_at' FROM ordergate.outbox WHERE order_no = 'K1'), '{"v": 1, "order_no": "K1"}'::jsonb);
RESET ROLE;
-- Published (as the relay does): later holds write nothing, the consumer re-schedules the
-- message by expire_at when it answers not_due.
SELECT ordergate.outbox_mark_published(ARRAY(SELECT id FROM ordergate.outbox));
SET ROLE ordergate_service;
SELECT t_eq('200 more holds after publication',
    (SELECT count(*) FILTER (WHERE h.outcome = 'held')
       FROM generate_series(211, 410) s, LATERAL ordergate.hold_for_payment('K1', s) h), 200::bigint);
SELECT t_eq('published: nothing more written', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K1'), 1::bigint);
-- An order with no cancel message (placed while scheduling was off) gets one.
RESET ROLE;
SELECT ordergate.set_setting('schedule_cancels', '0');
SET ROLE ordergate_service;
SELECT ordergate.place_order('K2', 100, '[]', NULL, now() + interval '10 seconds');
RESET ROLE;
SELECT ordergate.set_setting('schedule_cancels', '1');
SET ROLE ordergate_service;
SELECT t_eq('hold K2', (SELECT outcome FROM ordergate.hold_for_payment('K2', 60)), 'held');
SELECT t_eq('no message before: one written',
    (SELECT count(*) FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no)
      WHERE b.order_no = 'K2' AND b.event_type = 'cancel_scheduled'
        AND (b.payload ->> 'due_at')::timestamptz = o.expire_at AND o.expire_at > o.original_expire_at), 1::bigint);
SELECT t_eq('a hold that does not move writes nothing', (SELECT outcome FROM ordergate.hold_for_payment('K2', 30)), 'held');
SELECT t_eq('still one', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K2'), 1::bigint);
RESET ROLE;
SELECT t_eq('holds keep the books', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

------------------------------------------------------------------------------------------------
-- Quarantine.
SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SET ROLE ordergate_service;
SELECT ordergate.place_order('Q1', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('Q2', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT * FROM ordergate.close_order('Q1', 'ops', 'test');   -- event 1
SELECT * FROM ordergate.close_order('Q2', 'ops', 'test');   -- event 2
SELECT t_error('quarantine needs an id', $q$SELECT ordergate.outbox_quarantine(NULL, 'x')$q$, '22023');
SELECT t_error('quarantine needs a reason', $q$SELECT ordergate.outbox_quarantine(1, ' ')$q$, '22023');
SELECT t_eq('nothing quarantined by refusals', ordergate.outbox_quarantine_count(), 0::bigint);
BEGIN;
SELECT t_eq('the relay locks both', (SELECT count(*) FROM ordergate.outbox_lock_batch(10)), 2::bigint);
SELECT t_eq('quarantined', ordergate.outbox_quarantine(1, 'Broker: Message size too large'), 1::bigint);
SELECT t_eq('again: nothing', ordergate.outbox_quarantine(1, 'again'), 0::bigint);
SELECT t_eq('the other published', ordergate.outbox_mark_published(ARRAY[2]::bigint[]), 1::bigint);
COMMIT;
SELECT t_eq('a published event is not quarantined', ordergate.outbox_quarantine(2, 'x'), 0::bigint);
SELECT t_eq('the relay skips it', (SELECT count(*) FROM ordergate.outbox_lock_batch(10)), 0::bigint);
SELECT t_eq('not backlog', ordergate.outbox_backlog(), 0::bigint);
SELECT t_eq('not the relay lag', ordergate.outbox_oldest_age(), NULL::interval);
SELECT t_eq('counted', ordergate.outbox_quarantine_count(), 1::bigint);
SELECT t_eq('listed with its reason',
    (SELECT id || ' ' || event_type || ' ' || order_no || ' ' || reason || ' ' || coalesce(due_at, '-')
       FROM ordergate.outbox_quarantine_list()), '1 order_cancelled Q1 Broker: Message size too large -');
SELECT t_error('list limit', $q$SELECT * FROM ordergate.outbox_quarantine_list(0)$q$, '22023');
SELECT t_error('the service may not release', $q$SELECT ordergate.outbox_release(1)$q$, '42501');
RESET ROLE;
SELECT t_eq('reconcile reports it', (SELECT violations || ' ' || sample::text FROM ordergate.reconcile() WHERE invariant = 9), '1 {1}');
SELECT t_eq('only invariant 9', (SELECT sum(violations) FROM ordergate.reconcile() WHERE invariant <> 9), 0::numeric);
-- archive() keeps the order of an unpublished (quarantined) event, and moves the other.
SET ROLE ordergate_admin;
SELECT t_eq('archive moves Q2 only', (SELECT orders FROM ordergate.archive(now(), 100)), 1::bigint);
SELECT t_eq('Q1 kept with its event', (SELECT count(*) FROM ordergate.orders o JOIN ordergate.outbox b USING (order_no) WHERE o.order_no = 'Q1'), 1::bigint);
SELECT t_error('release needs an id', $q$SELECT ordergate.outbox_release(NULL)$q$, '22023');
SELECT t_eq('release', ordergate.outbox_release(1), 'released');
SELECT t_eq('release again', ordergate.outbox_release(1), 'not_quarantined');
SELECT t_eq('release unknown', ordergate.outbox_release(999), 'not_found');
RESET ROLE;
SELECT t_eq('released: reason gone', (SELECT quarantine_reason IS NULL AND quarantined_at IS NULL FROM ordergate.outbox WHERE id = 1), true);
SELECT t_eq('released: the relay takes it', (SELECT string_agg(id::text, ',') FROM ordergate.outbox_lock_batch(10)), '1');
SELECT t_eq('released: reconcile clean', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
-- Both columns or neither.
SELECT t_error('reason without time refused', $q$UPDATE ordergate.outbox SET quarantine_reason = 'x' WHERE id = 1$q$, '23514');

------------------------------------------------------------------------------------------------
-- A cancel message due in year 58882 (written before the horizon existed): quarantined; once the
-- order is closed, a release rewrites it to the order's closed_at, a message the consumer reads.
SELECT og_reset();
SELECT ordergate.place_order('Y1', 100, '[]', NULL, now() + interval '1 hour');
INSERT INTO ordergate.outbox (event_type, order_no, payload)
VALUES ('cancel_scheduled', 'Y1', ordergate._cancel_message('Y1', to_timestamp(1796000000000)));
SELECT ordergate.outbox_quarantine(id, 'bad_due_at') FROM ordergate.outbox WHERE order_no = 'Y1';
SET ROLE ordergate_admin;
SELECT t_eq('pending: released as it is', ordergate.outbox_release(1), 'released');
RESET ROLE;
SELECT t_eq('pending: payload unchanged', (SELECT payload ->> 'due_at' FROM ordergate.outbox WHERE id = 1) LIKE '58882-%', true);
SELECT ordergate.outbox_quarantine(1, 'bad_due_at');
SELECT * FROM ordergate.close_order('Y1', 'ops', 'deadline in milliseconds');
SET ROLE ordergate_admin;
SELECT t_eq('closed: released', ordergate.outbox_release(1), 'released');
RESET ROLE;
SELECT t_eq('closed: due at closed_at',
    (SELECT (b.payload ->> 'due_at')::timestamptz = o.closed_at AND b.payload::jsonb - 'due_at' = '{"v": 1, "order_no": "Y1"}'::jsonb
       FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no) WHERE b.id = 1), true);
SELECT ordergate.outbox_mark_published(ARRAY(SELECT id FROM ordergate.outbox));
SET ROLE ordergate_admin;
SELECT t_eq('then archived', (SELECT orders FROM ordergate.archive(now(), 100)), 1::bigint);
RESET ROLE;

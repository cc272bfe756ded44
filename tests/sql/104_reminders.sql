-- Payment reminders: the setting (every refusal 22023, nothing changed), the rows place_order
-- writes (only offsets still ahead; none without the setting), their messages with
-- schedule_cancels = 1, every claim_reminder outcome (sent, not_due, not_pending for paid,
-- cancelled and gone, in_flight for a hold, a charge and a locked row, given up at the deadline,
-- already_sent, not_found), exactly once, refusals, scan_reminders, archive, order_report and
-- reconcile's invariants 17 and 18. The races are in tests/isolation (reminder_vs_payment.spec,
-- reminder_twice.spec).

SELECT og_reset();

-- The setting.
SELECT t_eq('setting default empty', (SELECT value FROM ordergate.settings WHERE key = 'reminder_before_seconds'), '');
SELECT t_error('setting: blank', $q$SELECT ordergate.set_setting('reminder_before_seconds', '300, 60')$q$, '22023');
SELECT t_error('setting: unit', $q$SELECT ordergate.set_setting('reminder_before_seconds', '5m')$q$, '22023');
SELECT t_error('setting: zero', $q$SELECT ordergate.set_setting('reminder_before_seconds', '300,0')$q$, '22023');
SELECT t_error('setting: repeat', $q$SELECT ordergate.set_setting('reminder_before_seconds', '60,60')$q$, '22023');
SELECT t_error('setting: trailing comma', $q$SELECT ordergate.set_setting('reminder_before_seconds', '60,')$q$, '22023');
SELECT t_error('setting: beyond 366 days', $q$SELECT ordergate.set_setting('reminder_before_seconds', '31622401')$q$, '22023');
SELECT t_error('setting: nine offsets', $q$SELECT ordergate.set_setting('reminder_before_seconds', '1,2,3,4,5,6,7,8,9')$q$, '22023');
SELECT t_error('setting: NULL', $q$SELECT ordergate.set_setting('reminder_before_seconds', NULL)$q$, '22023');
SELECT t_error('setting: negative', $q$SELECT ordergate.set_setting('reminder_before_seconds', '-60')$q$, '22023');
SELECT t_eq('refused settings changed nothing', (SELECT value FROM ordergate.settings WHERE key = 'reminder_before_seconds'), '');

-- Without the setting: no reminder rows.
SELECT ordergate.place_order('N0', 100, '[]', NULL, now() + interval '1 hour');
SELECT t_eq('no setting, no reminders', (SELECT count(*) FROM ordergate.reminders), 0::bigint);

SELECT t_eq('setting set', ordergate.set_setting('reminder_before_seconds', '600,60'), '');
SELECT t_eq('setting read back', (SELECT value FROM ordergate.settings WHERE key = 'reminder_before_seconds'), '600,60');

-- place_order: only offsets still ahead.
SELECT ordergate.place_order('M1', 1999, '[]', NULL, now() + interval '1 hour', '{"mail":"a@b"}', 'EUR');
SELECT ordergate.place_order('M2', 100, '[]', NULL, now() + interval '5 minutes');
SELECT ordergate.place_order('M3', 100, '[]', NULL, now() + interval '30 seconds');
SELECT t_eq('two offsets ahead', (SELECT string_agg(offset_seconds::text || state, ',' ORDER BY offset_seconds DESC) FROM ordergate.reminders WHERE order_no = 'M1'), '600pending,60pending');
SELECT t_eq('one offset ahead', (SELECT string_agg(offset_seconds::text, ',') FROM ordergate.reminders WHERE order_no = 'M2'), '60');
SELECT t_eq('none ahead', (SELECT count(*) FROM ordergate.reminders WHERE order_no = 'M3'), 0::bigint);
SELECT t_eq('no messages without schedule_cancels', (SELECT count(*) FROM ordergate.outbox WHERE event_type = 'reminder_scheduled'), 0::bigint);

-- With schedule_cancels = 1: one message per reminder, due at expire_at - offset.
SELECT ordergate.set_setting('schedule_cancels', '1');
SELECT ordergate.place_order('M4', 100, '[]', NULL, date_trunc('second', now()) + interval '2 hours');
SELECT t_eq('messages', (SELECT string_agg(concat_ws(' ', payload ->> 'v', payload ->> 'order_no', payload ->> 'kind', payload ->> 'offset_seconds', (payload ->> 'due_at')::timestamptz - date_trunc('second', now()), payload ->> 'due_at' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$'), ',' ORDER BY id) FROM ordergate.outbox WHERE order_no = 'M4' AND event_type = 'reminder_scheduled'),
            '1 M4 reminder 600 01:50:00 t,1 M4 reminder 60 01:59:00 t');
SELECT t_eq('the cancel message too', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'M4' AND event_type = 'cancel_scheduled'), 1::bigint);
SELECT ordergate.set_setting('schedule_cancels', '0');

-- Refusals: 22023, nothing written.
CREATE FUNCTION pg_temp.r_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('/',
        (SELECT string_agg(concat_ws('|', r.order_no, r.offset_seconds, r.state, r.due_at, r.sent_at, r.skip_reason), ',' ORDER BY r.order_no, r.offset_seconds) FROM ordergate.reminders r),
        (SELECT count(*) FROM ordergate.outbox)))
$$;
SELECT pg_temp.r_state() AS s0 \gset
SELECT expire_at - interval '600 seconds' AS m1_due FROM ordergate.orders WHERE order_no = 'M1' \gset
SET ROLE ordergate_trigger;
SELECT t_error('claim: malformed order_no', $q$SELECT * FROM ordergate.claim_reminder('M 1', 60)$q$, '22023');
SELECT t_error('claim: NULL order_no', $q$SELECT * FROM ordergate.claim_reminder(NULL, 60)$q$, '22023');
SELECT t_error('claim: offset 0', $q$SELECT * FROM ordergate.claim_reminder('M1', 0)$q$, '22023');
SELECT t_error('claim: offset NULL', $q$SELECT * FROM ordergate.claim_reminder('M1', NULL)$q$, '22023');
SELECT t_error('claim: offset too large', $q$SELECT * FROM ordergate.claim_reminder('M1', 31622401)$q$, '22023');
SELECT t_error('scan: negative grace', $q$SELECT * FROM ordergate.scan_reminders('-1 second', 10)$q$, '22023');
SELECT t_error('scan: limit 0', $q$SELECT * FROM ordergate.scan_reminders('0', 0)$q$, '22023');
RESET ROLE;
SELECT t_eq('refusals changed nothing', pg_temp.r_state(), :'s0');
SET ROLE ordergate_trigger;

-- not_due (with its due time), not_found.
SELECT t_eq('not_due', (SELECT outcome || ' ' || (due_at = :'m1_due') FROM ordergate.claim_reminder('M1', 600)), 'not_due true');
SELECT t_eq('not_found: no such offset', (SELECT outcome FROM ordergate.claim_reminder('M1', 300)), 'not_found');
SELECT t_eq('not_found: offset due at placing', (SELECT outcome FROM ordergate.claim_reminder('M3', 60)), 'not_found');
SELECT t_eq('not_found: no such order', (SELECT outcome FROM ordergate.claim_reminder('NOPE', 60)), 'not_found');
SELECT t_eq('scan: nothing due', (SELECT count(*) FROM ordergate.scan_reminders('0', 100)), 0::bigint);
RESET ROLE;
SELECT t_eq('not_due and not_found changed nothing', pg_temp.r_state(), :'s0');

-- Due: the deadline comes closer (a shortened deadline: nothing to rewrite in reminders).
UPDATE ordergate.orders SET expire_at = now() + interval '5 minutes' WHERE order_no = 'M1'
RETURNING expire_at - interval '600 seconds' AS m1_sent_due, expire_at AS m1_expire \gset
SET ROLE ordergate_trigger;
SELECT t_eq('scan: the due one', (SELECT string_agg(order_no || ':' || offset_seconds, ',') FROM ordergate.scan_reminders('0', 100)), 'M1:600');
SELECT t_eq('sent', (SELECT outcome || ' ' || (due_at = :'m1_sent_due') FROM ordergate.claim_reminder('M1', 600)), 'sent true');
SELECT t_eq('already_sent', (SELECT outcome || ' ' || (due_at = :'m1_sent_due') FROM ordergate.claim_reminder('M1', 600)), 'already_sent true');
SELECT t_eq('the other offset not_due', (SELECT outcome FROM ordergate.claim_reminder('M1', 60)), 'not_due');
SELECT t_eq('scan: sent one gone', (SELECT count(*) FROM ordergate.scan_reminders('0', 100)), 0::bigint);
RESET ROLE;
SELECT t_eq('row sent', (SELECT state || ' ' || (sent_at >= due_at) || ' ' || (due_at = :'m1_sent_due') FROM ordergate.reminders WHERE order_no = 'M1' AND offset_seconds = 600), 'sent true true');
SELECT t_eq('one event', (SELECT count(*) FROM ordergate.outbox WHERE event_type = 'payment_reminder'), 1::bigint);
SELECT t_eq('event payload', (SELECT concat_ws(' ', payload ->> 'event', payload ->> 'order_no', payload ->> 'offset_seconds', payload ->> 'currency', payload ->> 'amount_cents', payload -> 'shop' ->> 'mail', (payload ->> 'expire_at')::timestamptz = (SELECT expire_at FROM ordergate.orders WHERE order_no = 'M1'), (payload ->> 'due_at')::timestamptz = :'m1_sent_due') FROM ordergate.outbox WHERE event_type = 'payment_reminder'),
            'payment_reminder M1 600 EUR 1999 a@b t t');
SELECT t_eq('report shows reminders', (SELECT jsonb_path_query_array(ordergate.order_report('M1'), '$.reminders[*].state')), '["sent", "pending"]'::jsonb);

-- in_flight: a hold (retried at the hold's end while that is before the deadline).
SELECT ordergate.place_order('H1', 100, '[]', NULL, now() + interval '20 minutes');
UPDATE ordergate.orders SET expire_at = now() + interval '5 minutes' WHERE order_no = 'H1' RETURNING expire_at AS h1_expire \gset
SELECT now() + interval '60 seconds' AS h1_held FROM ordergate.hold_for_payment('H1', 60) \gset
SELECT t_eq('hold recorded', (SELECT held_until = :'h1_held' FROM ordergate.orders WHERE order_no = 'H1'), true);
SELECT t_eq('hold that did not move the deadline', (SELECT expire_at = :'h1_expire' FROM ordergate.orders WHERE order_no = 'H1'), true);
SET ROLE ordergate_trigger;
SELECT t_eq('in_flight: hold', (SELECT outcome || ' ' || (due_at = :'h1_held') FROM ordergate.claim_reminder('H1', 600)), 'in_flight true');
SELECT t_eq('scan leaves it out', (SELECT count(*) FROM ordergate.scan_reminders('0', 100) WHERE order_no = 'H1'), 0::bigint);
RESET ROLE;
SELECT t_eq('in_flight kept pending', (SELECT state FROM ordergate.reminders WHERE order_no = 'H1' AND offset_seconds = 600), 'pending');
-- The hold ended: sent.
UPDATE ordergate.orders SET held_until = now() - interval '1 second' WHERE order_no = 'H1';
SET ROLE ordergate_trigger;
SELECT t_eq('hold ended: sent', (SELECT outcome FROM ordergate.claim_reminder('H1', 600)), 'sent');
RESET ROLE;

-- in_flight up to the deadline: given up (skipped), never sent afterwards.
SELECT ordergate.place_order('H2', 100, '[]', NULL, now() + interval '20 minutes');
UPDATE ordergate.orders SET expire_at = now() + interval '5 minutes', held_until = now() + interval '5 minutes' WHERE order_no = 'H2';
SET ROLE ordergate_trigger;
SELECT t_eq('scan returns the one to give up', (SELECT string_agg(order_no || ':' || offset_seconds, ',') FROM ordergate.scan_reminders('0', 100) WHERE order_no = 'H2'), 'H2:600');
SELECT t_eq('in_flight: given up', (SELECT outcome || ' ' || coalesce(due_at::text, 'NULL') FROM ordergate.claim_reminder('H2', 600)), 'in_flight NULL');
SELECT t_eq('given up stays given up', (SELECT outcome FROM ordergate.claim_reminder('H2', 600)), 'not_pending');
RESET ROLE;
SELECT t_eq('skipped in_flight', (SELECT state || ' ' || skip_reason FROM ordergate.reminders WHERE order_no = 'H2' AND offset_seconds = 600), 'skipped in_flight');

-- in_flight: a pending charge, retried at its bound while that is before the deadline.
SELECT ordergate.place_order('C1', 100, '[]', NULL, now() + interval '20 minutes');
UPDATE ordergate.orders SET expire_at = now() + interval '9 minutes' WHERE order_no = 'C1';
SELECT bound_at AS c1_bound FROM ordergate.begin_charge('C1', 'CH-C1', 120) \gset
SET ROLE ordergate_trigger;
SELECT t_eq('in_flight: charge', (SELECT outcome || ' ' || (due_at = :'c1_bound') FROM ordergate.claim_reminder('C1', 600)), 'in_flight true');
RESET ROLE;
SELECT ordergate.charge_failed('C1', 'CH-C1');
SET ROLE ordergate_trigger;
SELECT t_eq('charge ended: sent', (SELECT outcome FROM ordergate.claim_reminder('C1', 600)), 'sent');
RESET ROLE;

-- not_pending: paid, cancelled; marked skipped, never sent after.
SELECT ordergate.place_order('P1', 100, '[]', NULL, now() + interval '20 minutes');
SELECT ordergate.place_order('X1', 100, '[]', NULL, now() + interval '20 minutes');
SELECT * FROM ordergate.claim_payment('P1', 'T-P1', 100, 'card');
SELECT * FROM ordergate.close_order('X1', 'ops', 'test');
SET ROLE ordergate_trigger;
SELECT t_eq('not_pending: paid', (SELECT outcome FROM ordergate.claim_reminder('P1', 600)), 'not_pending');
SELECT t_eq('not_pending: cancelled', (SELECT outcome FROM ordergate.claim_reminder('X1', 60)), 'not_pending');
SELECT t_eq('not_pending again', (SELECT outcome FROM ordergate.claim_reminder('P1', 600)), 'not_pending');
SELECT t_eq('scan never returns closed orders', (SELECT count(*) FROM ordergate.scan_reminders('0', 100) WHERE order_no IN ('P1', 'X1')), 0::bigint);
RESET ROLE;
SELECT t_eq('skipped closed', (SELECT string_agg(order_no || offset_seconds || state || coalesce(skip_reason, '-'), ',' ORDER BY order_no, offset_seconds) FROM ordergate.reminders WHERE order_no IN ('P1', 'X1')),
            'P160pending-,P1600skippedclosed,X160skippedclosed,X1600pending-');
SELECT t_eq('no event for closed orders', (SELECT count(*) FROM ordergate.outbox WHERE event_type = 'payment_reminder' AND order_no IN ('P1', 'X1', 'H2')), 0::bigint);

-- in_flight: the order row locked by another transaction (a payment being claimed): not waited
-- for. Simulated with a lock held by this session's other connection is not possible in one
-- session; the isolation spec reminder_vs_payment covers it.

-- scan: bounded, oldest due first; a page claimed leaves the next.
SELECT ordergate.place_order('S' || i, 100, '[]', NULL, now() + interval '20 minutes') FROM generate_series(1, 5) i;
UPDATE ordergate.orders SET expire_at = now() + make_interval(secs => 60 - i) FROM generate_series(1, 5) i WHERE order_no = 'S' || i;
SET ROLE ordergate_trigger;
SELECT t_eq('scan page', (SELECT string_agg(order_no || ':' || offset_seconds, ',') FROM ordergate.scan_reminders('0', 3)), 'S5:600,S4:600,S3:600');
SELECT t_eq('scan with grace', (SELECT count(*) FROM ordergate.scan_reminders('10 minutes', 100) WHERE order_no LIKE 'S%'), 0::bigint);
SELECT count(*) FROM ordergate.scan_reminders('0', 3) s, ordergate.claim_reminder(s.order_no, s.offset_seconds) c;
SELECT t_eq('next page', (SELECT string_agg(order_no || ':' || offset_seconds, ',') FROM ordergate.scan_reminders('0', 3) WHERE order_no LIKE 'S%'), 'S2:600,S1:600,S5:60');
RESET ROLE;

-- set_deadline with schedule_cancels = 1: a shortened deadline writes a message for each pending
-- reminder, due at the new expire_at - offset (now at the earliest), before the cancel's; a
-- lengthened one, a past one or one without schedule_cancels writes none; a sent one gets none.
SELECT ordergate.set_setting('schedule_cancels', '1');
SELECT ordergate.place_order('D1', 100, '[]', NULL, now() + interval '60 minutes');
SELECT max(id) AS d1_mark FROM ordergate.outbox \gset
CREATE FUNCTION pg_temp.d_msgs(p_mark bigint) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(concat_ws(' ', b.event_type, b.payload ->> 'offset_seconds',
                                (b.payload ->> 'due_at')::timestamptz
                                = greatest(o.expire_at - make_interval(secs => coalesce((b.payload ->> 'offset_seconds')::int, 0)), b.created_at)),
                      ',' ORDER BY b.id)
      FROM ordergate.outbox b JOIN ordergate.orders o USING (order_no)
     WHERE b.order_no = 'D1' AND b.id > p_mark AND b.event_type IN ('reminder_scheduled', 'cancel_scheduled')
$$;
SELECT t_eq('shortened: the reminders follow', (SELECT outcome FROM ordergate.set_deadline('D1', now() + interval '20 minutes', 'ops')), 'set');
SELECT t_eq('shortened: one message per reminder, earliest first', pg_temp.d_msgs(:d1_mark), 'reminder_scheduled 600 t,reminder_scheduled 60 t');
SELECT t_eq('shortened: the cancel message rewritten, not added', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'D1' AND event_type = 'cancel_scheduled'), 1::bigint);
SELECT max(id) AS d1_mark FROM ordergate.outbox \gset
SELECT t_eq('lengthened', (SELECT outcome FROM ordergate.set_deadline('D1', now() + interval '40 minutes', 'ops')), 'set');
SELECT t_eq('lengthened: no message', pg_temp.d_msgs(:d1_mark), NULL::text);
SELECT t_eq('shortened past a due time', (SELECT outcome FROM ordergate.set_deadline('D1', now() + interval '5 minutes', 'ops')), 'set');
SELECT t_eq('a due time passed: due now', pg_temp.d_msgs(:d1_mark), 'reminder_scheduled 600 t,reminder_scheduled 60 t');
SET ROLE ordergate_trigger;
SELECT t_eq('the one due now is sent', (SELECT outcome FROM ordergate.claim_reminder('D1', 600)), 'sent');
RESET ROLE;
SELECT max(id) AS d1_mark FROM ordergate.outbox \gset
SELECT ordergate.set_deadline('D1', now() + interval '3 minutes', 'ops');
SELECT t_eq('sent: no new message for it', pg_temp.d_msgs(:d1_mark), 'reminder_scheduled 60 t');
SELECT max(id) AS d1_mark FROM ordergate.outbox \gset
SELECT ordergate.set_setting('schedule_cancels', '0');
SELECT ordergate.set_deadline('D1', now() + interval '2 minutes', 'ops');
SELECT t_eq('without schedule_cancels: none', pg_temp.d_msgs(:d1_mark), NULL::text);
SELECT ordergate.set_setting('schedule_cancels', '1');
SELECT ordergate.set_deadline('D1', now() - interval '1 minute', 'ops');
SELECT t_eq('a past deadline: no reminder message', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'D1' AND id > :d1_mark AND event_type = 'reminder_scheduled'), 0::bigint);
SELECT t_eq('a past deadline: the cancel due now', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'D1' AND event_type = 'cancel_scheduled' AND published_at IS NULL AND (payload ->> 'due_at')::timestamptz > now() - interval '1 minute'), 1::bigint);
SELECT ordergate.set_setting('schedule_cancels', '0');
SELECT ordergate.set_deadline('D1', now() + interval '30 minutes', 'ops');

-- Invariants 17 and 18: clean, then planted.
SELECT t_eq('inv17 clean', t_viol(17), 0::bigint);
SELECT t_eq('inv18 clean', t_viol(18), 0::bigint);
BEGIN;
INSERT INTO ordergate.outbox (event_type, order_no, payload) VALUES ('payment_reminder', 'P1', '{"offset_seconds": 60}');
SELECT t_eq('inv17: a reminder after the payment', (SELECT violations || ' ' || sample::text FROM ordergate.reconcile() WHERE invariant = 17), '1 {P1:60}');
SELECT t_eq('inv18: an event without a sent row', (SELECT violations || ' ' || sample::text FROM ordergate.reconcile() WHERE invariant = 18), '1 {P1:60}');
ROLLBACK;
BEGIN;
INSERT INTO ordergate.outbox (event_type, order_no, payload) VALUES ('payment_reminder', 'M1', '{"offset_seconds": 600}');
SELECT t_eq('inv18: sent twice', (SELECT violations || ' ' || sample::text FROM ordergate.reconcile() WHERE invariant = 18), '1 {M1:600}');
ROLLBACK;
BEGIN;
UPDATE ordergate.reminders SET state = 'sent', sent_at = now(), ended_at = now() WHERE order_no = 'S1' AND offset_seconds = 60;
SELECT t_eq('inv18: sent without an event', (SELECT violations || ' ' || sample::text FROM ordergate.reconcile() WHERE invariant = 18), '1 {S1:60}');
ROLLBACK;

-- archive moves reminders with their order; the claim answers from the archive.
UPDATE ordergate.outbox SET published_at = now();
SELECT t_eq('archive', (SELECT orders FROM ordergate.archive(now())), 2::bigint);
SELECT t_eq('reminders moved', (SELECT count(*) FROM ordergate.archived_reminders WHERE order_no IN ('P1', 'X1')), 4::bigint);
SELECT t_eq('none left hot', (SELECT count(*) FROM ordergate.reminders WHERE order_no IN ('P1', 'X1')), 0::bigint);
SET ROLE ordergate_trigger;
SELECT t_eq('archived: not_pending', (SELECT outcome FROM ordergate.claim_reminder('P1', 60)), 'not_pending');
RESET ROLE;
SELECT t_eq('reconcile clean after all', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
SELECT og_reset();

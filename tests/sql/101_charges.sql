-- Charges pending at the deadline: begin_charge and charge_failed, every outcome and refusal
-- (each refusal 22023 with the database unchanged), the guard (claim_cancel not_due, due_times
-- the charge's bound, the sweep leaves the order out), the prompt cancel after a failure past the
-- deadline, the capture by claim_payment's charge_ref, archive, reconcile's invariant 14 and the
-- setting. The races are in tests/isolation (charge_begin_vs_cancel.spec,
-- charge_fail_vs_cancel.spec).

SELECT og_reset();
SELECT ordergate.set_setting('schedule_cancels', '1');
-- K1 due in an hour, K2 due a minute ago, K3 paid, K4 cancelled, K5 due a minute ago.
SELECT ordergate.place_order('K1', 100, '[]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('K2', 200, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('K3', 300, '[]', NULL, now() + interval '1 hour');
SELECT ordergate.place_order('K4', 400, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('K5', 500, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.claim_payment('K3', 'TK3', 300, 'card');
SELECT ordergate.claim_cancel(ARRAY['K4'], 'timeout_scanner');

-- Everything a charge call may write, for "refused calls changed nothing".
CREATE FUNCTION pg_temp.t_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('/',
        (SELECT string_agg(concat_ws('|', c.charge_ref, c.order_no, c.state, c.bound_at, c.ended_at, c.txn_no, c.ended_late), ',' ORDER BY c.charge_ref) FROM ordergate.charges c),
        (SELECT string_agg(concat_ws('|', o.order_no, o.status, o.expire_at, o.charge_until), ',' ORDER BY o.order_no) FROM ordergate.orders o),
        (SELECT count(*) FROM ordergate.outbox), (SELECT count(*) FROM ordergate.payments),
        (SELECT count(*) FROM ordergate.exceptions), (SELECT count(*) FROM ordergate.status_log)))
$$;
SELECT pg_temp.t_state() AS s0 \gset

SET ROLE ordergate_order_service;
-- Refusals: 22023, nothing written.
SELECT t_error('begin: malformed ref', $q$SELECT * FROM ordergate.begin_charge('K1', 'bad ref', 60)$q$, '22023');
SELECT t_error('begin: empty ref', $q$SELECT * FROM ordergate.begin_charge('K1', '', 60)$q$, '22023');
SELECT t_error('begin: NULL ref', $q$SELECT * FROM ordergate.begin_charge('K1', NULL, 60)$q$, '22023');
SELECT t_error('begin: ref too long', format($q$SELECT * FROM ordergate.begin_charge('K1', %L, 60)$q$, repeat('r', 129)), '22023');
SELECT t_error('begin: malformed order_no', $q$SELECT * FROM ordergate.begin_charge('K 1', 'CH1', 60)$q$, '22023');
SELECT t_error('begin: max_seconds 0', $q$SELECT * FROM ordergate.begin_charge('K1', 'CH1', 0)$q$, '22023');
SELECT t_error('begin: max_seconds negative', $q$SELECT * FROM ordergate.begin_charge('K1', 'CH1', -5)$q$, '22023');
SELECT t_error('begin: max_seconds NULL', $q$SELECT * FROM ordergate.begin_charge('K1', 'CH1', NULL)$q$, '22023');
SELECT t_error('begin: max_seconds above the setting', $q$SELECT * FROM ordergate.begin_charge('K1', 'CH1', 259201)$q$, '22023');
SELECT t_error('failed: malformed ref', $q$SELECT ordergate.charge_failed('K1', 'bad ref')$q$, '22023');
SELECT t_error('failed: malformed order_no', $q$SELECT ordergate.charge_failed('K/1', 'CH1')$q$, '22023');
SELECT t_error('failed: unknown ref', $q$SELECT ordergate.charge_failed('K1', 'NOPE')$q$, '22023');
SELECT t_eq('refusals changed nothing', pg_temp.t_state(), :'s0');
RESET ROLE;

-- The setting: 1..2592000, refused outside; the bound follows it.
SELECT t_error('setting 0 refused', $q$SELECT ordergate.set_setting('max_pending_charge_seconds', '0')$q$, '22023');
SELECT t_error('setting above 30 days refused', $q$SELECT ordergate.set_setting('max_pending_charge_seconds', '2592001')$q$, '22023');
SELECT t_error('setting not a number refused', $q$SELECT ordergate.set_setting('max_pending_charge_seconds', '1h')$q$, '22023');
SELECT t_eq('setting default', ordergate.set_setting('max_pending_charge_seconds', '600'), '259200');
SET ROLE ordergate_order_service;
SELECT t_error('begin: max_seconds above a lowered setting', $q$SELECT * FROM ordergate.begin_charge('K1', 'CH1', 601)$q$, '22023');
SELECT t_eq('refused setting and bound changed nothing', pg_temp.t_state(), :'s0');

-- begin_charge: pending, duplicate, not_pending, not_found.
SELECT t_eq('begin pending', (SELECT outcome || ' ' || (bound_at = now() + interval '600 seconds') FROM ordergate.begin_charge('K1', 'CH1', 600)), 'pending true');
SELECT t_eq('begin sets charge_until', (SELECT charge_until FROM ordergate.orders WHERE order_no = 'K1'), (SELECT bound_at FROM ordergate.charges WHERE charge_ref = 'CH1'));
SELECT t_eq('begin row', (SELECT concat_ws(' ', order_no, state, bound_at - begun_at, coalesce(ended_at::text, '-'), coalesce(txn_no, '-'), ended_late) FROM ordergate.charges WHERE charge_ref = 'CH1'), 'K1 pending 00:10:00 - - f');
SELECT pg_temp.t_state() AS s1 \gset
SELECT t_eq('begin again: duplicate, same bound', (SELECT outcome || ' ' || (bound_at = (SELECT c.bound_at FROM ordergate.charges c WHERE c.charge_ref = 'CH1')) FROM ordergate.begin_charge('K1', 'CH1', 30)), 'duplicate true');
SELECT t_eq('duplicate changed nothing', pg_temp.t_state(), :'s1');
SELECT t_error('begin: a ref of another order', $q$SELECT * FROM ordergate.begin_charge('K2', 'CH1', 60)$q$, '22023');
SELECT t_error('failed: a ref of another order', $q$SELECT ordergate.charge_failed('K2', 'CH1')$q$, '22023');
SELECT t_eq('ref of another order changed nothing', pg_temp.t_state(), :'s1');
SELECT t_eq('begin on a paid order', (SELECT outcome || ' ' || coalesce(bound_at::text, '-') FROM ordergate.begin_charge('K3', 'CH3', 60)), 'not_pending -');
SELECT t_eq('begin on a cancelled order', (SELECT outcome FROM ordergate.begin_charge('K4', 'CH4', 60)), 'not_pending');
SELECT t_eq('begin on an unknown order', (SELECT outcome || ' ' || coalesce(bound_at::text, '-') FROM ordergate.begin_charge('NOPE', 'CH9', 60)), 'not_found -');
SELECT t_eq('closed and unknown orders: nothing recorded', pg_temp.t_state(), :'s1');
-- A shorter second charge keeps the later bound; a longer one moves it.
SELECT t_eq('begin a shorter second charge', (SELECT outcome FROM ordergate.begin_charge('K1', 'CH1b', 60)), 'pending');
SELECT t_eq('charge_until keeps the later bound', (SELECT charge_until FROM ordergate.orders WHERE order_no = 'K1'), (SELECT bound_at FROM ordergate.charges WHERE charge_ref = 'CH1'));
SELECT t_eq('a failed charge before the deadline schedules nothing', ordergate.charge_failed('K1', 'CH1b'), 'failed');
SELECT t_eq('... charge_until unchanged', (SELECT charge_until FROM ordergate.orders WHERE order_no = 'K1'), (SELECT bound_at FROM ordergate.charges WHERE charge_ref = 'CH1'));
SELECT t_eq('... no event', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K1'), 1::bigint);

-- The guard: K2 is due, but a charge protects it.
SELECT t_eq('begin on a due order', (SELECT outcome FROM ordergate.begin_charge('K2', 'CH2', 300)), 'pending');
SELECT bound_at AS k2_bound FROM ordergate.charges WHERE charge_ref = 'CH2' \gset
RESET ROLE;
SET ROLE ordergate_trigger;
SELECT t_eq('claim_cancel: protected order is not_due', (SELECT string_agg(order_no || ':' || outcome, ' ') FROM ordergate.claim_cancel(ARRAY['K2', 'K5'], 'timeout_consumer')), 'K2:not_due K5:cancelled');
SELECT t_eq('due_times gives the bound', (SELECT expire_at FROM ordergate.due_times(ARRAY['K2'])), :'k2_bound'::timestamptz);
SELECT t_eq('due_times with an earlier charge gives the deadline', (SELECT expire_at FROM ordergate.due_times(ARRAY['K1'])) > now() + interval '3599 seconds', true);
SELECT t_eq('scan_overdue leaves it out', (SELECT count(*) FROM ordergate.scan_overdue('0', NULL, NULL, 100) WHERE order_no = 'K2'), 0::bigint);
SELECT t_eq('scan_overdue keyset page leaves it out', (SELECT count(*) FROM ordergate.scan_overdue('0', '-infinity', '', 100) WHERE order_no = 'K2'), 0::bigint);
SELECT t_eq('scan_overdue_count leaves it out', (SELECT overdue FROM ordergate.scan_overdue_count('0')), 0::bigint);
SELECT t_eq('reconcile: a protected order is not overdue (6)', t_viol(6) + t_viol(14), 0::bigint);
RESET ROLE;

-- close_order (an operator) may close an order with a pending charge; the charge stays pending.
SET ROLE ordergate_order_service;
SELECT t_eq('begin on K1 again', (SELECT outcome FROM ordergate.begin_charge('K1', 'CH1c', 60)), 'pending');
SELECT t_eq('close_order closes a protected order', (SELECT outcome FROM ordergate.close_order('K1', 'ops', 'customer called')), 'cancelled');
SELECT t_eq('... its charges stay as they were', (SELECT string_agg(charge_ref || ':' || state, ' ' ORDER BY charge_ref) FROM ordergate.charges WHERE order_no = 'K1'), 'CH1:pending CH1b:failed CH1c:pending');
SELECT t_eq('a failure after the close: failed', ordergate.charge_failed('K1', 'CH1c'), 'failed');
SELECT t_eq('... ended late', (SELECT ended_late FROM ordergate.charges WHERE charge_ref = 'CH1c'), true);
SELECT t_eq('... no cancel scheduled for a closed order', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K1' AND event_type = 'cancel_scheduled'), 1::bigint);
RESET ROLE;
SELECT t_eq('reconcile: a manual close is no violation (14)', t_viol(14), 0::bigint);
SET ROLE ordergate_order_service;

-- charge_failed past the deadline: the order is due now, a cancel_scheduled due now is written.
SELECT t_eq('fail the last charge past the deadline', ordergate.charge_failed('K2', 'CH2'), 'failed');
SELECT t_eq('... charge_until cleared', (SELECT charge_until FROM ordergate.orders WHERE order_no = 'K2'), NULL::timestamptz);
SELECT t_eq('... a cancel_scheduled due now',
    (SELECT count(*) FROM ordergate.outbox b
      WHERE b.order_no = 'K2' AND b.event_type = 'cancel_scheduled'
        AND (b.payload ->> 'due_at')::timestamptz = (SELECT c.ended_at FROM ordergate.charges c WHERE c.charge_ref = 'CH2')
        AND b.payload::jsonb ->> 'order_no' = 'K2'), 1::bigint);
SELECT pg_temp.t_state() AS s2 \gset
SELECT t_eq('fail twice: duplicate', ordergate.charge_failed('K2', 'CH2'), 'duplicate');
SELECT t_eq('... nothing written', pg_temp.t_state(), :'s2');
RESET ROLE;
SET ROLE ordergate_trigger;
SELECT t_eq('the order is due', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['K2'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('reconcile: a cancel after the failure is no violation (14)', t_viol(14), 0::bigint);
RESET ROLE;

-- With schedule_cancels = 0 no event: the scanner's next run is the path.
SELECT ordergate.set_setting('schedule_cancels', '0');
SELECT ordergate.place_order('K6', 600, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.begin_charge('K6', 'CH6', 60);
SELECT t_eq('schedule_cancels 0: failed', ordergate.charge_failed('K6', 'CH6'), 'failed');
SELECT t_eq('... no event', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K6'), 0::bigint);
SELECT t_eq('... the sweep finds it', (SELECT count(*) FROM ordergate.scan_overdue('0', NULL, NULL, 100) WHERE order_no = 'K6'), 1::bigint);
SELECT ordergate.set_setting('schedule_cancels', '1');

-- The capture: claim_payment with charge_ref.
SELECT ordergate.place_order('K11', 1100, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('K12', 1200, '[]', NULL, now() - interval '1 minute', NULL, NULL, true);
SELECT ordergate.begin_charge('K11', 'CH11', 60);
SELECT ordergate.begin_charge('K12', 'CH12', 60);
SELECT pg_temp.t_state() AS s3 \gset
SET ROLE ordergate_order_service;
SELECT t_error('capture: unknown ref', $q$SELECT * FROM ordergate.claim_payment('K11', 'TK11', 1100, 'card', charge_ref => 'NOPE')$q$, '22023');
SELECT t_error('capture: a ref of another order', $q$SELECT * FROM ordergate.claim_payment('K11', 'TK11', 1100, 'card', charge_ref => 'CH12')$q$, '22023');
SELECT t_error('capture: a ref for an unknown order', $q$SELECT * FROM ordergate.claim_payment('NOPE', 'TK11', 1100, 'card', charge_ref => 'CH11')$q$, '22023');
SELECT t_eq('capture refusals changed nothing', pg_temp.t_state(), :'s3');
SELECT t_eq('capture pays', (SELECT outcome FROM ordergate.claim_payment('K11', 'TK11', 1100, 'card', charge_ref => 'CH11')), 'paid');
SELECT t_eq('... the charge captured by the payment', (SELECT concat_ws(' ', state, txn_no, ended_late) FROM ordergate.charges WHERE charge_ref = 'CH11'), 'captured TK11 f');
SELECT t_eq('... the payment names the charge', (SELECT charge_ref FROM ordergate.payments WHERE txn_no = 'TK11'), 'CH11');
SELECT t_eq('... no cancel scheduled for a paid order', (SELECT count(*) FROM ordergate.outbox WHERE order_no = 'K11' AND event_type = 'cancel_scheduled'), 1::bigint);
SELECT pg_temp.t_state() AS s4 \gset
SELECT t_eq('capture retried: duplicate', (SELECT outcome FROM ordergate.claim_payment('K11', 'TK11', 1100, 'card', charge_ref => 'CH11')), 'duplicate');
SELECT t_eq('fail after capture: already_captured', ordergate.charge_failed('K11', 'CH11'), 'already_captured');
SELECT t_eq('... nothing changed', pg_temp.t_state(), :'s4');
-- A part captured past the deadline ends the last charge without paying: the cancel is due now.
SELECT t_eq('capture a part', (SELECT outcome FROM ordergate.claim_payment('K12', 'TK12', 500, 'card', charge_ref => 'CH12')), 'partial');
SELECT t_eq('... the order pending, unprotected', (SELECT status || ' ' || coalesce(charge_until::text, '-') FROM ordergate.orders WHERE order_no = 'K12'), 'pending_payment -');
SELECT t_eq('... a cancel_scheduled due now',
    (SELECT count(*) FROM ordergate.outbox b
      WHERE b.order_no = 'K12' AND b.event_type = 'cancel_scheduled'
        AND (b.payload ->> 'due_at')::timestamptz = (SELECT c.ended_at FROM ordergate.charges c WHERE c.charge_ref = 'CH12')), 1::bigint);
RESET ROLE;
SELECT t_eq('... the consumer cancels it', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['K12'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('... its part goes back', (SELECT kind FROM ordergate.exceptions WHERE order_no = 'K12'), 'cancelled_part');

-- A charge whose bound passed no longer protects: the timeout cancels; no prompt event is
-- written when it then fails (the order was due already); its capture is a late payment.
SELECT ordergate.place_order('K7', 700, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.begin_charge('K7', 'CH7', 1);
SELECT ordergate.place_order('K10', 1000, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.begin_charge('K10', 'CH10', 1);
SELECT t_eq('protected within the bound', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['K7'], 'timeout_scanner')), 'not_due');
SELECT pg_sleep(1.1);
SELECT t_eq('due once the bound passed', (SELECT count(*) FROM ordergate.scan_overdue('0', NULL, NULL, 100) WHERE order_no = 'K7'), 1::bigint);
SELECT t_eq('cancelled once the bound passed', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['K7'], 'timeout_scanner')), 'cancelled');
SELECT t_eq('... the charge is still pending', (SELECT state FROM ordergate.charges WHERE charge_ref = 'CH7'), 'pending');
SELECT t_eq('reconcile: a cancel after the bound is no violation (14)', t_viol(14), 0::bigint);
SELECT t_eq('K10 cancelled after the bound', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['K10'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('capture after the bound and the cancel: late', (SELECT outcome FROM ordergate.claim_payment('K10', 'TK10', 1000, 'card', charge_ref => 'CH10')), 'late_payment');
SELECT t_eq('... the charge captured late', (SELECT concat_ws(' ', state, txn_no, ended_late) FROM ordergate.charges WHERE charge_ref = 'CH10'), 'captured TK10 t');
SELECT t_eq('... its exception', (SELECT kind FROM ordergate.exceptions WHERE txn_no = 'TK10'), 'late_payment');
SELECT t_eq('reconcile: a late capture after the bound is no violation (5, 14)', t_viol(5) + t_viol(14), 0::bigint);

-- Invariant 10 finds a timeout cancel that ignored a charge within its bound (planted, rolled back).
BEGIN;
SELECT ordergate.place_order('K8', 800, '[]', NULL, now() - interval '1 minute');
SELECT ordergate.begin_charge('K8', 'CH8', 60);
UPDATE ordergate.orders SET charge_until = NULL WHERE order_no = 'K8';
SELECT ordergate.claim_cancel(ARRAY['K8'], 'timeout_scanner');
SELECT t_eq('reconcile: a timeout cancel within the bound (14)', (SELECT violations || ' ' || sample::text FROM ordergate.reconcile() WHERE invariant = 14), '1 {K8}');
ROLLBACK;

-- order_report carries the order's charges (oldest first) and charge_until.
SET ROLE ordergate_order_service;
SELECT t_eq('report: a captured charge', (SELECT (jsonb_path_query_array(ordergate.order_report('K11'), '$.charges[*] ? (@.charge_ref == "CH11")') -> 0) - 'began_at' - 'until' - 'ended_at'),
            '{"charge_ref": "CH11", "state": "captured", "txn_no": "TK11", "ended_late": false}'::jsonb);
SELECT t_eq('report: charge times', (SELECT (c ->> 'began_at')::timestamptz = date_trunc('milliseconds', h.begun_at) AND (c ->> 'until')::timestamptz = date_trunc('milliseconds', h.bound_at) AND (c ->> 'ended_at')::timestamptz = date_trunc('milliseconds', h.ended_at)
                                        FROM jsonb_array_elements(ordergate.order_report('K11') -> 'charges') c JOIN ordergate.charges h ON h.charge_ref = c ->> 'charge_ref'), true);
BEGIN;
SELECT ordergate.place_order('K20', 100, '[]', NULL, now() + interval '1 hour');
SELECT ordergate.begin_charge('K20', 'CH20a', 60);
SELECT ordergate.begin_charge('K20', 'CH20b', 120);
SELECT t_eq('report: pending charges and charge_until', (SELECT concat_ws(' ', jsonb_path_query_array(r, '$.charges[*].charge_ref'), coalesce(r -> 'charges' -> 1 ->> 'ended_at', 'open'), r ->> 'charge_until' = r -> 'charges' -> 1 ->> 'until') FROM ordergate.order_report('K20') r),
            '["CH20a", "CH20b"] open t');
ROLLBACK;
SELECT t_eq('report: no charges', (SELECT concat_ws(' ', r -> 'charges', coalesce(r ->> 'charge_until', 'none')) FROM ordergate.order_report('K3') r), '[] none');
RESET ROLE;

-- archive: the charges move with their order; later calls answer from the archive.
UPDATE ordergate.outbox SET published_at = now() WHERE published_at IS NULL;
SELECT t_eq('archive moves the charges', (SELECT orders FROM ordergate.archive(now())), 7::bigint);
SELECT t_eq('... into archived_charges', (SELECT string_agg(charge_ref || ':' || state, ' ' ORDER BY charge_ref) FROM ordergate.archived_charges), 'CH1:pending CH11:captured CH1b:failed CH1c:failed CH2:failed CH7:pending');
SELECT t_eq('... orders kept (pending, open exceptions) keep theirs', (SELECT string_agg(charge_ref, ' ' ORDER BY charge_ref) FROM ordergate.charges), 'CH10 CH12 CH6');
SELECT t_eq('... charge_until carried', (SELECT count(*) FROM ordergate.archived_orders WHERE charge_until IS NOT NULL), 2::bigint);
SET ROLE ordergate_order_service;
SELECT t_eq('archived: begin again is a duplicate', (SELECT outcome FROM ordergate.begin_charge('K2', 'CH2', 60)), 'duplicate');
SELECT t_error('archived: the ref on another order', $q$SELECT * FROM ordergate.begin_charge('K9', 'CH2', 60)$q$, '22023');
SELECT t_eq('archived: begin a new charge', (SELECT outcome FROM ordergate.begin_charge('K2', 'CH2x', 60)), 'not_pending');
SELECT t_eq('archived: failed again is a duplicate', ordergate.charge_failed('K2', 'CH2'), 'duplicate');
SELECT t_eq('archived: a capture retried', (SELECT outcome FROM ordergate.claim_payment('K11', 'TK11', 1100, 'card', charge_ref => 'CH11')), 'duplicate');
SELECT t_eq('archived: another capture of the charge is a double payment', (SELECT outcome FROM ordergate.claim_payment('K11', 'TK11b', 1100, 'card', charge_ref => 'CH11')), 'double_payment');
SELECT t_eq('archived: the report shows the archived charge', (SELECT concat_ws(' ', r ->> 'found', jsonb_path_query_array(r, '$.charges[*].charge_ref')) FROM ordergate.order_report('K11') r), 'false ["CH11"]');
RESET ROLE;

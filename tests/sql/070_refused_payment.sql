-- record_payment_refused(): a dead-lettered payment result becomes one refused_payment exception
-- (manual review, reconciliation_alert event), once per key; bad arguments are 22023 and write
-- nothing; reconcile() counts an open one under invariant 5 until it is resolved.

SELECT og_reset();
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.place_order('F1', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');

SET ROLE ordergate_service;
SELECT t_error('refused null source', $q$SELECT * FROM ordergate.record_payment_refused(NULL, 'F1', 'TF1', 100, 'why', 'm')$q$, '22023');
SELECT t_error('refused empty source', $q$SELECT * FROM ordergate.record_payment_refused('', 'F1', 'TF1', 100, 'why', 'm')$q$, '22023');
SELECT t_error('refused source too long', format($q$SELECT * FROM ordergate.record_payment_refused(%L, 'F1', 'TF1', 100, 'why', 'm')$q$, repeat('s', 301)), '22023');
SELECT t_error('refused bad order_no', $q$SELECT * FROM ordergate.record_payment_refused('p/0/1', 'F 1', 'TF1', 100, 'why', 'm')$q$, '22023');
SELECT t_error('refused bad txn_no', $q$SELECT * FROM ordergate.record_payment_refused('p/0/1', 'F1', 'T F1', 100, 'why', 'm')$q$, '22023');
SELECT t_error('refused zero amount', $q$SELECT * FROM ordergate.record_payment_refused('p/0/1', 'F1', 'TF1', 0, 'why', 'm')$q$, '22023');
SELECT t_error('refused no reason', $q$SELECT * FROM ordergate.record_payment_refused('p/0/1', 'F1', 'TF1', 100, NULL, 'm')$q$, '22023');
SELECT t_error('refused blank reason', $q$SELECT * FROM ordergate.record_payment_refused('p/0/1', 'F1', 'TF1', 100, '  ', 'm')$q$, '22023');
RESET ROLE;
SELECT t_eq('refused: bad arguments wrote nothing', (SELECT count(*) FROM ordergate.exceptions) + (SELECT count(*) FROM ordergate.outbox), 0::bigint);

SET ROLE ordergate_service;
-- Keyed by the transaction number when there is one: another position, same key.
SELECT t_eq('refused by txn recorded', (SELECT outcome || ' ' || refused_key FROM ordergate.record_payment_refused('p/0/1', 'F1', 'TF1', 100, 'payment_rejected: boom', '{"v":1}')), 'recorded txn:TF1');
SELECT t_eq('refused by txn again', (SELECT outcome || ' ' || refused_key FROM ordergate.record_payment_refused('p/0/7', 'F1', 'TF1', 100, 'payment_rejected: boom', '{"v":1}')), 'duplicate txn:TF1');
-- Without one, by the message's position and its content (sha256 of order_no, newline, message).
SELECT t_eq('refused by position recorded', (SELECT outcome || ' ' || refused_key FROM ordergate.record_payment_refused('p/1/3', NULL, NULL, NULL, 'bad_json: x', repeat('y', 2500))), 'recorded msg:p/1/3#' || encode(sha256(convert_to(E'\n' || repeat('y', 2500), 'UTF8')), 'hex'));
SELECT t_eq('refused by position again', (SELECT outcome FROM ordergate.record_payment_refused('p/1/3', NULL, NULL, NULL, 'bad_json: x', repeat('y', 2500))), 'duplicate');
SELECT t_eq('refused same id on duplicate', (SELECT exception_id FROM ordergate.record_payment_refused('p/1/3', NULL, NULL, NULL, 'r', repeat('y', 2500))), (SELECT id FROM ordergate.exceptions WHERE refused_key LIKE 'msg:p/1/3#%'));
-- Positions repeat (a topic re-created): a different message at the same position is recorded,
-- beyond what the note keeps of it too; the order number it names is part of its content.
SELECT t_eq('refused other content same position', (SELECT outcome FROM ordergate.record_payment_refused('p/1/3', NULL, NULL, NULL, 'bad_json: x', repeat('y', 2500) || 'z')), 'recorded');
SELECT t_eq('refused other order same message', (SELECT outcome FROM ordergate.record_payment_refused('p/1/3', 'F1', NULL, NULL, 'bad_json: x', repeat('y', 2500))), 'recorded');
SELECT t_eq('refused other content again', (SELECT outcome FROM ordergate.record_payment_refused('p/1/3', NULL, NULL, NULL, 'bad_json: y', repeat('y', 2500) || 'z')), 'duplicate');
SELECT t_eq('refused no message', (SELECT outcome FROM ordergate.record_payment_refused('p/1/4', NULL, NULL, NULL, 'empty: x', NULL)), 'recorded');
SELECT t_eq('refused no message again', (SELECT outcome FROM ordergate.record_payment_refused('p/1/4', NULL, NULL, NULL, 'empty: x', NULL)), 'duplicate');
RESET ROLE;
-- A record keyed by the position alone (written before the content was in the key) stands for
-- a redelivery of the same message: same note, nothing new; another message there is recorded.
INSERT INTO ordergate.exceptions (order_no, kind, amount_cents, resolution, note, refused_key)
VALUES ('', 'refused_payment', NULL, 'manual_review', 'payment result refused by the consumer (bad_json: old) from p/2/8; txn unknown; message: old', 'msg:p/2/8');
SET ROLE ordergate_service;
SELECT t_eq('refused legacy key redelivered', (SELECT outcome || ' ' || refused_key || ' ' || (exception_id = (SELECT id FROM ordergate.exceptions WHERE refused_key = 'msg:p/2/8')) FROM ordergate.record_payment_refused('p/2/8', NULL, NULL, NULL, 'bad_json: old', 'old')), 'duplicate msg:p/2/8 true');
SELECT t_eq('refused legacy key other message', (SELECT outcome FROM ordergate.record_payment_refused('p/2/8', NULL, NULL, NULL, 'bad_json: old', 'new')), 'recorded');
RESET ROLE;
DELETE FROM ordergate.exceptions WHERE refused_key LIKE 'msg:p/2/8%';

SELECT t_eq('refused rows', (SELECT count(*) FROM ordergate.exceptions), 5::bigint);
SELECT t_eq('refused rows by position', (SELECT count(*) FROM ordergate.exceptions WHERE refused_key LIKE 'msg:p/1/3#%'), 3::bigint);
SELECT t_eq('refused row by txn', (SELECT order_no || '|' || kind || '|' || coalesce(txn_no, '-') || '|' || amount_cents || '|' || resolution || '|' || state FROM ordergate.exceptions WHERE refused_key = 'txn:TF1'), 'F1|refused_payment|-|100|manual_review|open');
SELECT t_eq('refused row by position', (SELECT order_no || '|' || coalesce(amount_cents::text, '-') FROM ordergate.exceptions WHERE refused_key = 'msg:p/1/3#' || encode(sha256(convert_to(E'\n' || repeat('y', 2500), 'UTF8')), 'hex')), '|-');
SELECT t_eq('refused note names reason, source and message', (SELECT note LIKE '%payment_rejected: boom%' AND note LIKE '%p/0/1%' AND note LIKE '%{"v":1}%' FROM ordergate.exceptions WHERE refused_key = 'txn:TF1'), true);
SELECT t_eq('refused note is bounded', (SELECT bool_and(note LIKE '%' || repeat('y', 2000) || '...' AND length(note) < 2200) FROM ordergate.exceptions WHERE refused_key LIKE 'msg:p/1/3#%'), true);
SELECT t_eq('refused one alert each', (SELECT count(*) FROM ordergate.outbox WHERE event_type = 'reconciliation_alert' AND payload::jsonb ->> 'kind' = 'refused_payment'), 6::bigint);
SELECT t_eq('refused order untouched', (SELECT status FROM ordergate.orders WHERE order_no = 'F1'), 'pending_payment');
SELECT t_eq('refused no payment row', (SELECT count(*) FROM ordergate.payments), 0::bigint);
SELECT t_error('refused kind needs its key', $q$INSERT INTO ordergate.exceptions (order_no, kind) VALUES ('F1', 'refused_payment')$q$, '23514');
SELECT t_error('a key only for refused_payment', $q$INSERT INTO ordergate.exceptions (order_no, kind, refused_key) VALUES ('F1', 'late_payment', 'txn:X')$q$, '23514');

-- The same transaction number may still be claimed: its own exception does not collide.
SELECT ordergate.close_order('F1', 'ops', 'test');
SELECT t_eq('refused txn claimed later', (SELECT outcome FROM ordergate.claim_payment('F1', 'TF1', 100, 'card')), 'late_payment');
SELECT t_eq('refused txn: late payment exception too', (SELECT count(*) FROM ordergate.exceptions WHERE txn_no = 'TF1' AND kind = 'late_payment'), 1::bigint);

-- Money to review: invariant 5 until resolved.
SELECT t_eq('inv5 counts open refused payments', t_viol(5), 5::bigint);
SELECT t_eq('inv5 refused sample', (SELECT sample FROM ordergate.reconcile() WHERE invariant = 5), (SELECT array_agg('refused:' || id ORDER BY 'refused:' || id) FROM ordergate.exceptions WHERE kind = 'refused_payment'));
SELECT t_eq('inv5 p_since excludes older refusals', (SELECT violations FROM ordergate.reconcile(now() + interval '1 second') WHERE invariant = 5), 0::bigint);
SELECT t_eq('open count includes refused', ordergate.exceptions_open_count(), 6::bigint);
SELECT ordergate.resolve_exception(id, 'ops', 'refunded by hand') FROM ordergate.exceptions WHERE kind = 'refused_payment';
SELECT t_eq('inv5 clean once resolved', t_viol(5), 0::bigint);
SELECT t_eq('resolved refusal stays recorded', (SELECT outcome FROM ordergate.record_payment_refused('p/1/3', NULL, NULL, NULL, 'bad_json: x', repeat('y', 2500))), 'duplicate');
SELECT t_eq('reconcile clean at the end', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);

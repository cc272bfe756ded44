-- Least privilege between the kinds of callers (migration 013): a login role of each kind (order
-- service, trigger, relay, refunds) may execute exactly its own functions; every other kind's
-- function is refused with 42501 and changes nothing. A member of the deprecated
-- ordergate_service still executes all of them. The sweep lease is bounded (22023 past 70
-- minutes, and a renewal never goes past it), and a scanner_run_start repeated with the same
-- run token resumes its run instead of being skipped by its own lease.
--
-- Login roles are cluster-wide and another run of this file may be going on in another
-- database: their names carry this backend's pid, and they are dropped at the end.

SELECT og_reset();
TRUNCATE ordergate.scanner_runs;
UPDATE ordergate.scanner_lease SET run_id = NULL, taken_at = NULL, expires_at = NULL;
SELECT ordergate.add_stock('S1', 10);
SELECT ordergate.set_setting('auto_refund_limit_cents', '5000');
SELECT ordergate.place_order('R1', 100, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute');
SELECT ordergate.place_order('R2', 100, '[{"sku":"S1","qty":1}]', NULL, now() + interval '1 hour');
SELECT ordergate.close_order('R1', 'ops', 'test');
-- A late payment with an auto refund requested: what record_refund would close.
SELECT ordergate.claim_payment('R1', 'TR1', 100, 'card');

SELECT 'og130_svc_' || pg_backend_pid() AS r_svc, 'og130_trg_' || pg_backend_pid() AS r_trg,
       'og130_rly_' || pg_backend_pid() AS r_rly, 'og130_ref_' || pg_backend_pid() AS r_ref,
       'og130_old_' || pg_backend_pid() AS r_old \gset
CREATE ROLE :"r_svc" LOGIN IN ROLE ordergate_order_service;
CREATE ROLE :"r_trg" LOGIN IN ROLE ordergate_trigger;
CREATE ROLE :"r_rly" LOGIN IN ROLE ordergate_relay;
CREATE ROLE :"r_ref" LOGIN IN ROLE ordergate_refunds;
CREATE ROLE :"r_old" LOGIN IN ROLE ordergate_service;

-- Everything a refused call could have changed, in one value.
CREATE FUNCTION pg_temp.t_state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(o.order_no || o.status || o.expire_at, ',' ORDER BY o.order_no) FROM ordergate.orders o),
        (SELECT string_agg(p.txn_no || p.outcome, ',' ORDER BY p.txn_no) FROM ordergate.payments p),
        (SELECT string_agg(x.id || x.state || x.resolution, ',' ORDER BY x.id) FROM ordergate.exceptions x),
        (SELECT count(*) FROM ordergate.refunds),
        (SELECT string_agg(b.id || coalesce(b.published_at::text, '-'), ',' ORDER BY b.id) FROM ordergate.outbox b),
        (SELECT count(*) FROM ordergate.scanner_runs),
        (SELECT coalesce(l.run_id::text, '-') || coalesce(l.expires_at::text, '-') FROM ordergate.scanner_lease l),
        (SELECT string_agg(i.sku || i.available, ',' ORDER BY i.sku) FROM ordergate.inventory i)))
$$;
SELECT pg_temp.t_state() AS before \gset

-- Each kind may execute exactly its own functions (by name, every overload).
CREATE FUNCTION pg_temp.t_fns(p_role text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(DISTINCT p.proname, ',' ORDER BY p.proname)
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'ordergate' AND has_function_privilege(p_role, p.oid, 'EXECUTE')
$$;
SELECT t_eq('order service executes its functions only', pg_temp.t_fns(:'r_svc'),
            'amend_order,begin_charge,charge_failed,claim_payment,close_order,exception_list,'
            'hold_for_payment,order_report,place_order,release_order,set_deadline');
SELECT t_eq('trigger executes its functions only', pg_temp.t_fns(:'r_trg'),
            'claim_cancel,claim_reminder,due_times,exceptions_open_count,exceptions_overdue,reconcile,'
            'reconcile_repair,reconcile_run_record,record_payment_refused,scan_overdue,scan_overdue_count,scan_reminders,'
            'scanner_lock_key,scanner_run_finish,scanner_run_progress,scanner_run_start,'
            'scanner_sweep_status');
SELECT t_eq('relay executes its functions only', pg_temp.t_fns(:'r_rly'),
            'outbox_backlog,outbox_lock_batch,outbox_mark_published,outbox_oldest_age,outbox_quarantine,'
            'outbox_quarantine_count,outbox_quarantine_list');
SELECT t_eq('refunds executes its functions only', pg_temp.t_fns(:'r_ref'), 'record_refund');
SELECT t_eq('deprecated ordergate_service member executes all four kinds',
            (SELECT bool_and(has_function_privilege(:'r_old', p.oid, 'EXECUTE'))
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'ordergate'
                AND (has_function_privilege('ordergate_order_service', p.oid, 'EXECUTE')
                     OR has_function_privilege('ordergate_trigger', p.oid, 'EXECUTE')
                     OR has_function_privilege('ordergate_relay', p.oid, 'EXECUTE')
                     OR has_function_privilege('ordergate_refunds', p.oid, 'EXECUTE'))), true);
SELECT t_eq('admin holds every kind', (SELECT bool_and(pg_has_role('ordergate_admin', r, 'MEMBER'))
    FROM unnest(ARRAY['ordergate_order_service', 'ordergate_trigger', 'ordergate_relay', 'ordergate_refunds']) r), true);
SELECT t_eq('admin registers hooks and shop checks; nobody runs their internals',
    (SELECT string_agg(f || '=' || has_function_privilege('ordergate_admin', f, 'EXECUTE')
                       || '/' || has_function_privilege('ordergate_trigger', f, 'EXECUTE'), ',' ORDER BY f)
       FROM unnest(ARRAY['ordergate.add_check(text,regprocedure)', 'ordergate.drop_check(text)',
                         'ordergate._reconcile_checks()', 'ordergate._hooks_run(text,text[],text,jsonb)']) f),
    'ordergate._hooks_run(text,text[],text,jsonb)=false/false,ordergate._reconcile_checks()=false/false,'
    'ordergate.add_check(text,regprocedure)=true/false,ordergate.drop_check(text)=true/false');
SELECT t_eq('narrow roles cannot log in', (SELECT count(*) FROM pg_roles WHERE rolcanlogin AND rolname IN
    ('ordergate_order_service', 'ordergate_trigger', 'ordergate_relay', 'ordergate_refunds')), 0::bigint);

-- An order service: no refund it did not get, no event it did not send, no sweep lease, no cancel
-- in the triggers' name.
SET ROLE :"r_svc";
SELECT t_error('order service: record_refund refused', $q$SELECT * FROM ordergate.record_refund('TR1', 'RF1', 'succeeded')$q$, '42501');
SELECT t_error('order service: outbox_mark_published refused', $q$SELECT ordergate.outbox_mark_published(ARRAY(SELECT id FROM ordergate.outbox))$q$, '42501');
SELECT t_error('order service: outbox_lock_batch refused', $q$SELECT * FROM ordergate.outbox_lock_batch(10)$q$, '42501');
SELECT t_error('order service: outbox_quarantine refused', $q$SELECT ordergate.outbox_quarantine(1, 'x')$q$, '42501');
SELECT t_error('order service: outbox_release refused', $q$SELECT ordergate.outbox_release(1)$q$, '42501');
SELECT t_error('order service: scanner_run_start refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '100 years', NULL)$q$, '42501');
SELECT t_error('order service: reconcile_run_record refused', $q$SELECT ordergate.reconcile_run_record(now(), NULL, 'clean', '{}', 0, NULL)$q$, '42501');
SELECT t_error('order service: scanner_run_finish refused', $q$SELECT * FROM ordergate.scanner_run_finish(1, 'done', 'complete', NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0)$q$, '42501');
SELECT t_error('order service: claim_cancel refused', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['R2'], 'timeout_scanner')$q$, '42501');
SELECT t_error('order service: record_payment_refused refused', $q$SELECT * FROM ordergate.record_payment_refused('p/0/1', 'R2', 'TX9', 100, 'why', 'm')$q$, '42501');
SELECT t_error('order service: reconcile_repair refused', $q$SELECT ordergate.reconcile_repair()$q$, '42501');
SELECT t_error('order service: add_stock refused', $q$SELECT ordergate.add_stock('S1', 1000)$q$, '42501');
SELECT t_error('order service: add_check refused', $q$SELECT ordergate.add_check('x', 'ordergate.reconcile_repair()')$q$, '42501');
SELECT t_error('order service: drop_check refused', $q$SELECT ordergate.drop_check('x')$q$, '42501');
SELECT t_eq('order service reads the checks', (SELECT count(*) FROM ordergate.checks), 0::bigint);
SELECT t_error('order service: no direct write', $q$UPDATE ordergate.exceptions SET state = 'refunded'$q$, '42501');
SELECT t_eq('order service reads the tables', (SELECT count(*) FROM ordergate.orders), 2::bigint);
RESET ROLE;

-- The relay: no payment, no order, no cancel, no refund, no sweep; and it reads no table.
SET ROLE :"r_rly";
SELECT t_error('relay: claim_payment refused', $q$SELECT * FROM ordergate.claim_payment('R2', 'TR2', 100, 'card')$q$, '42501');
SELECT t_error('relay: place_order refused', $q$SELECT ordergate.place_order('R9', 100, '[{"sku":"S1","qty":1}]', NULL, now())$q$, '42501');
SELECT t_error('relay: close_order refused', $q$SELECT * FROM ordergate.close_order('R2', 'x', 'y')$q$, '42501');
SELECT t_error('relay: release_order refused', $q$SELECT * FROM ordergate.release_order('R2', 'x', 'y')$q$, '42501');
SELECT t_error('relay: amend_order refused', $q$SELECT * FROM ordergate.amend_order('R2', 100, '[]', NULL, 'x')$q$, '42501');
SELECT t_error('relay: set_deadline refused', $q$SELECT * FROM ordergate.set_deadline('R2', now(), 'x')$q$, '42501');
SELECT t_error('relay: claim_cancel refused', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['R2'], 'timeout_consumer')$q$, '42501');
SELECT t_error('relay: record_refund refused', $q$SELECT * FROM ordergate.record_refund('TR1', 'RF1', 'succeeded')$q$, '42501');
SELECT t_error('relay: scanner_run_start refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '1 minute', NULL)$q$, '42501');
SELECT t_error('relay: reads no table', $q$SELECT count(*) FROM ordergate.orders$q$, '42501');
RESET ROLE;

-- The triggers: no order, no payment, no refund, no event marked.
SET ROLE :"r_trg";
SELECT t_error('trigger: place_order refused', $q$SELECT ordergate.place_order('R9', 100, '[{"sku":"S1","qty":1}]', NULL, now())$q$, '42501');
SELECT t_error('trigger: claim_payment refused', $q$SELECT * FROM ordergate.claim_payment('R2', 'TR2', 100, 'card')$q$, '42501');
SELECT t_error('trigger: hold_for_payment refused', $q$SELECT * FROM ordergate.hold_for_payment('R2', 600)$q$, '42501');
SELECT t_error('trigger: close_order refused', $q$SELECT * FROM ordergate.close_order('R2', 'x', 'y')$q$, '42501');
SELECT t_error('trigger: release_order refused', $q$SELECT * FROM ordergate.release_order('R2', 'x', 'y')$q$, '42501');
SELECT t_error('trigger: amend_order refused', $q$SELECT * FROM ordergate.amend_order('R2', 100, '[]', NULL, 'x')$q$, '42501');
SELECT t_error('trigger: set_deadline refused', $q$SELECT * FROM ordergate.set_deadline('R2', now(), 'x')$q$, '42501');
SELECT t_error('trigger: begin_charge refused', $q$SELECT * FROM ordergate.begin_charge('R2', 'CR2', 60)$q$, '42501');
SELECT t_error('trigger: charge_failed refused', $q$SELECT ordergate.charge_failed('R2', 'CR2')$q$, '42501');
SELECT t_error('trigger: record_refund refused', $q$SELECT * FROM ordergate.record_refund('TR1', 'RF1', 'succeeded')$q$, '42501');
SELECT t_error('trigger: outbox_mark_published refused', $q$SELECT ordergate.outbox_mark_published(ARRAY[1::bigint])$q$, '42501');
SELECT t_error('trigger: add_check refused', $q$SELECT ordergate.add_check('x', 'ordergate.reconcile_repair()')$q$, '42501');
SELECT t_error('trigger: drop_check refused', $q$SELECT ordergate.drop_check('x')$q$, '42501');
SELECT t_error('trigger: add_hook refused', $q$SELECT ordergate.add_hook('paid', 'ordergate.reconcile_repair()')$q$, '42501');
SELECT t_error('trigger: reads no table', $q$SELECT count(*) FROM ordergate.payments$q$, '42501');
-- The scanner records its reconciliations; a bad record is refused whole.
SELECT t_error('trigger: a reconciliation of bad result refused', $q$SELECT ordergate.reconcile_run_record(now(), NULL, 'fine', '{}', 0, NULL)$q$, '22023');
SELECT t_error('trigger: violations not counts refused', $q$SELECT ordergate.reconcile_run_record(now(), NULL, 'violated', '{"5": "two"}', 0, NULL)$q$, '22023');
SELECT t_error('trigger: violations below -1 refused', $q$SELECT ordergate.reconcile_run_record(now(), NULL, 'violated', '{"shop:x": -2}', 0, NULL)$q$, '22023');
SELECT t_error('trigger: a run from the future refused', $q$SELECT ordergate.reconcile_run_record(now() + interval '1 hour', NULL, 'clean', '{}', 0, NULL)$q$, '22023');
SELECT t_eq('trigger: a reconciliation recorded, the login as actor',
            (SELECT ordergate.reconcile_run_record(now(), NULL, 'violated', '{"5": 2, "shop:x": -1}', 1, NULL)) > 0, true);
RESET ROLE;
SELECT t_eq('the refused records left nothing; the good one names its actor',
            (SELECT string_agg(result || ':' || actor || ':' || violations::text, ',') FROM ordergate.reconcile_runs),
            'violated:' || coalesce(nullif(current_setting('application_name'), ''), :'r_trg')
            || ':{"5": 2, "shop:x": -1}');

-- Refund results: nothing but record_refund.
SET ROLE :"r_ref";
SELECT t_error('refunds: claim_payment refused', $q$SELECT * FROM ordergate.claim_payment('R2', 'TR2', 100, 'card')$q$, '42501');
SELECT t_error('refunds: claim_cancel refused', $q$SELECT * FROM ordergate.claim_cancel(ARRAY['R2'], 'timeout_consumer')$q$, '42501');
SELECT t_error('refunds: outbox_mark_published refused', $q$SELECT ordergate.outbox_mark_published(ARRAY[1::bigint])$q$, '42501');
SELECT t_error('refunds: scanner_run_start refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '1 minute', NULL)$q$, '42501');
SELECT t_error('refunds: release_order refused', $q$SELECT * FROM ordergate.release_order('R2', 'x', 'y')$q$, '42501');
SELECT t_error('refunds: place_order refused', $q$SELECT ordergate.place_order('R9', 100, '[{"sku":"S1","qty":1}]', NULL, now())$q$, '42501');
RESET ROLE;

SELECT t_eq('refused calls changed nothing', pg_temp.t_state(), :'before');
SELECT t_eq('the refund is still requested', (SELECT state || ' ' || resolution FROM ordergate.exceptions WHERE txn_no = 'TR1'), 'open auto_refund');
SELECT t_eq('no event marked published', (SELECT count(*) FROM ordergate.outbox WHERE published_at IS NOT NULL), 0::bigint);

-- Each kind does its own work.
SET ROLE :"r_svc";
SELECT t_eq('order service: hold', (SELECT outcome FROM ordergate.hold_for_payment('R2', 60)), 'held');
SELECT t_eq('order service: report', (SELECT ordergate.order_report('R2') IS NOT NULL), true);
SELECT t_eq('order service: begin a charge', (SELECT outcome FROM ordergate.begin_charge('R2', 'CR2', 60)), 'pending');
SELECT t_eq('order service: a charge failed', ordergate.charge_failed('R2', 'CR2'), 'failed');
SELECT t_eq('order service: reads charges', (SELECT count(*) FROM ordergate.charges), 1::bigint);
RESET ROLE;
SET ROLE :"r_rly";
SELECT t_eq('relay: backlog', ordergate.outbox_backlog() > 0, true);
SELECT t_eq('relay: marks what it sent', ordergate.outbox_mark_published(ARRAY(SELECT id FROM ordergate.outbox_lock_batch(1))), 1::bigint);
SELECT t_error('relay: outbox_release refused (an operator decides)', $q$SELECT ordergate.outbox_release(1)$q$, '42501');
SELECT t_eq('relay: quarantine count', ordergate.outbox_quarantine_count(), 0::bigint);
RESET ROLE;
SET ROLE :"r_ref";
SELECT t_eq('refunds: record_refund', (SELECT result FROM ordergate.record_refund('TR1', 'RF1', 'succeeded')), 'refunded');
RESET ROLE;
SET ROLE :"r_trg";
SELECT t_eq('trigger: overdue count', (SELECT overdue FROM ordergate.scan_overdue_count('0')), 0::bigint);
SELECT t_eq('trigger: claim_cancel', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['R2'], 'timeout_consumer')), 'not_due');
RESET ROLE;

-- A member of the deprecated role still does everything it did.
SET ROLE :"r_old";
SELECT t_eq('deprecated: place_order', ordergate.place_order('R3', 100, '[{"sku":"S1","qty":1}]', NULL, now() - interval '1 minute'), 'placed');
SELECT t_eq('deprecated: claim_cancel', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['R3'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('deprecated: claim_payment', (SELECT outcome FROM ordergate.claim_payment('R2', 'TR2', 100, 'card')), 'paid');
SELECT t_eq('deprecated: outbox', ordergate.outbox_mark_published(ARRAY(SELECT id FROM ordergate.outbox_lock_batch(100))) > 0, true);
SELECT t_eq('deprecated: record_refund', (SELECT result FROM ordergate.record_refund('TR1', 'RF1', 'succeeded')), 'duplicate');
SELECT t_eq('deprecated: reads the tables', (SELECT count(*) FROM ordergate.orders), 3::bigint);
SELECT t_eq('deprecated: reconcile', (SELECT sum(violations) FROM ordergate.reconcile()), 0::numeric);
RESET ROLE;

-- The sweep lease is bounded: a longer one is refused and nothing is written.
SELECT pg_temp.t_state() AS before \gset
SET ROLE :"r_trg";
SELECT t_error('lease of 100 years refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '100 years', 'tok-bound-0000000001')$q$, '22023');
SELECT t_error('lease past 70 minutes refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '70 minutes 1 millisecond', 'tok-bound-0000000002')$q$, '22023');
SELECT t_error('short token refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '1 minute', 'short')$q$, '22023');
SELECT t_error('token with a space refused', $q$SELECT * FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '1 minute', 'tok bound 000000003')$q$, '22023');
RESET ROLE;
SELECT t_eq('refused starts wrote nothing', pg_temp.t_state(), :'before');

-- A start repeated with its token (its reply was lost) resumes its own run.
SET ROLE :"r_trg";
SELECT run_id AS run1 FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '70 minutes', 'tok-run-00000000001') WHERE kind = 'run' \gset
SELECT t_eq('repeated start resumes its run',
            (SELECT run_id || ' ' || status FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 1, interval '70 minutes', 'tok-run-00000000001') WHERE kind = 'run'),
            :run1 || ' running');
RESET ROLE;
SELECT t_eq('repeated start: one run row', (SELECT count(*) FROM ordergate.scanner_runs), 1::bigint);
SELECT t_eq('repeated start: the run holds the lease, within the bound',
            (SELECT l.run_id = :run1 AND l.expires_at <= clock_timestamp() + interval '70 minutes' FROM ordergate.scanner_lease l), true);
-- Another run is skipped while the lease is held; its repeat gets the same skipped row.
SET ROLE :"r_trg";
SELECT run_id AS run2 FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 2, interval '1 minute', 'tok-run-00000000002') WHERE kind = 'run' AND status = 'skipped' \gset
SELECT t_eq('repeated skipped start: the same skipped run',
            (SELECT run_id || ' ' || status FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 2, interval '1 minute', 'tok-run-00000000002') WHERE kind = 'run'),
            :run2 || ' skipped');
RESET ROLE;
SELECT t_eq('skipped repeat: two run rows', (SELECT count(*) FROM ordergate.scanner_runs), 2::bigint);
-- A run recorded before the bound with a longer lease renews by the bound at most.
UPDATE ordergate.scanner_runs SET lease = interval '100 years' WHERE run_id = :run1;
SET ROLE :"r_trg";
SELECT t_eq('progress of the resumed run', ordergate.scanner_run_progress(:run1, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0), 'running');
RESET ROLE;
SELECT t_eq('renewal never past the bound', (SELECT expires_at <= clock_timestamp() + interval '70 minutes' FROM ordergate.scanner_lease), true);
SET ROLE :"r_trg";
SELECT t_eq('resumed run finishes', (SELECT status FROM ordergate.scanner_run_finish(:run1, 'done', 'complete', NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, 0)), 'done');
RESET ROLE;
SELECT t_eq('lease released', (SELECT run_id IS NULL FROM ordergate.scanner_lease), true);
-- Without a token (a scanner of the previous release) a start still works.
SET ROLE :"r_trg";
SELECT t_eq('start without a token', (SELECT status FROM ordergate.scanner_run_start('0', 100, 0, 0, 'h', 3, interval '1 minute') WHERE kind = 'run'), 'running');
RESET ROLE;

-- The console's roles (migration 020): a viewer reads, an operator also resolves, decides refunds
-- and closes, an admin also reads settings; changing one stays ordergate_admin's. None reads a
-- table or executes another gate function.
SELECT 'og130_cvw_' || pg_backend_pid() AS r_cvw, 'og130_cop_' || pg_backend_pid() AS r_cop,
       'og130_cad_' || pg_backend_pid() AS r_cad \gset
CREATE ROLE :"r_cvw" LOGIN IN ROLE ordergate_console_viewer;
CREATE ROLE :"r_cop" LOGIN IN ROLE ordergate_console_operator;
CREATE ROLE :"r_cad" LOGIN IN ROLE ordergate_console_admin;
SELECT t_eq('console viewer executes its functions only', pg_temp.t_fns(:'r_cvw'),
            'console_exception,console_exceptions,console_order,console_orders,console_overview,'
            'console_whoami');
SELECT t_eq('console operator executes its functions only', pg_temp.t_fns(:'r_cop'),
            'console_close,console_exception,console_exceptions,console_order,console_orders,'
            'console_overview,console_refund,console_resolve,console_whoami');
SELECT t_eq('console admin executes its functions only', pg_temp.t_fns(:'r_cad'),
            'console_audit_list,console_close,console_exception,console_exceptions,console_order,'
            'console_orders,console_overview,console_refund,console_resolve,console_settings,'
            'console_whoami');
SELECT t_eq('console_set_setting is ordergate_admin''s', has_function_privilege('ordergate_admin',
            'ordergate.console_set_setting(text,text)', 'EXECUTE'), true);
SELECT t_eq('console roles read no table', (SELECT count(*) FROM pg_class c
    WHERE c.relnamespace = 'ordergate'::regnamespace AND c.relkind = 'r'
      AND (has_table_privilege(:'r_cad', c.oid, 'SELECT') OR has_table_privilege(:'r_cvw', c.oid, 'SELECT'))), 0::bigint);
SELECT t_eq('console roles cannot log in', (SELECT count(*) FROM pg_roles WHERE rolcanlogin AND rolname IN
    ('ordergate_console_viewer', 'ordergate_console_operator', 'ordergate_console_admin')), 0::bigint);
SELECT pg_temp.t_state() AS before \gset
SET ROLE :"r_cvw";
SELECT t_error('console viewer: console_resolve refused', $q$SELECT * FROM ordergate.console_resolve(ARRAY(SELECT id FROM ordergate.exceptions), 'x')$q$, '42501');
SELECT t_error('console viewer: console_close refused', $q$SELECT * FROM ordergate.console_close('R2', 'x')$q$, '42501');
SELECT t_error('console viewer: console_refund refused', $q$SELECT * FROM ordergate.console_refund(1, 'approve', 'x')$q$, '42501');
SELECT t_error('console viewer: close_order refused', $q$SELECT * FROM ordergate.close_order('R2', 'x', 'x')$q$, '42501');
SELECT t_error('console viewer: console_settings refused', $q$SELECT ordergate.console_settings()$q$, '42501');
SELECT t_error('console viewer: console_audit_list refused', $q$SELECT * FROM ordergate.console_audit_list(NULL, 10)$q$, '42501');
RESET ROLE;
SET ROLE :"r_cad";
SELECT t_error('console admin: console_set_setting refused', $q$SELECT ordergate.console_set_setting('max_hold_seconds', '60')$q$, '42501');
SELECT t_error('console admin: resolve_exception refused', $q$SELECT ordergate.resolve_exception(1, 'x', 'x')$q$, '42501');
RESET ROLE;
SELECT t_eq('refused console calls changed nothing', pg_temp.t_state(), :'before');
DROP ROLE :"r_cvw", :"r_cop", :"r_cad";

TRUNCATE ordergate.scanner_runs;
UPDATE ordergate.scanner_lease SET run_id = NULL, taken_at = NULL, expires_at = NULL;
DROP ROLE :"r_svc", :"r_trg", :"r_rly", :"r_ref", :"r_old";

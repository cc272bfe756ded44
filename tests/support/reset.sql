-- The state every SQL-level test case starts from: all ordergate tables empty, identities
-- restarted, the settings the tests assume. tests/sql/run.sh loads it into each test database
-- (the tests run as superuser). Registered hooks stay: a test that registers them owns them.
CREATE FUNCTION public.og_reset() RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    TRUNCATE ordergate.orders, ordergate.order_items, ordergate.inventory, ordergate.coupons,
             ordergate.status_log, ordergate.payments, ordergate.exceptions, ordergate.outbox,
             ordergate.refunds, ordergate.archived_orders, ordergate.archived_order_items,
             ordergate.archived_status_log, ordergate.archived_payments,
             ordergate.archived_exceptions, ordergate.archived_refunds, ordergate.archived_outbox,
             ordergate.charges, ordergate.archived_charges, ordergate.amendments,
             ordergate.archived_amendments, ordergate.deadline_changes,
             ordergate.archived_deadline_changes, ordergate.reminders, ordergate.archived_reminders,
             ordergate.reconcile_runs, ordergate.console_cancel_minutes
             RESTART IDENTITY;
    UPDATE ordergate.settings SET value = '5000' WHERE key = 'auto_refund_limit_cents';
    UPDATE ordergate.settings SET value = '900' WHERE key = 'max_hold_seconds';
    UPDATE ordergate.settings SET value = '0' WHERE key = 'schedule_cancels';
    UPDATE ordergate.settings SET value = '86400' WHERE key = 'refund_confirm_seconds';
    UPDATE ordergate.settings SET value = '259200' WHERE key = 'manual_review_max_age_seconds';
    UPDATE ordergate.settings SET value = '31622400' WHERE key = 'max_deadline_seconds';
    UPDATE ordergate.settings SET value = '259200' WHERE key = 'max_pending_charge_seconds';
    UPDATE ordergate.settings SET value = 'USD' WHERE key = 'default_currency';
    UPDATE ordergate.settings SET value = '' WHERE key = 'reminder_before_seconds';
    DELETE FROM ordergate.settings WHERE key LIKE 'auto\_refund\_limit.%';
END
$$;

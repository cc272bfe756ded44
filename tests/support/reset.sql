-- The state every SQL-level test case starts from: all ordergate tables empty, identities
-- restarted, the settings the tests assume. tests/sql/run.sh loads it into each test database
-- (the tests run as superuser).
CREATE FUNCTION public.og_reset() RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    TRUNCATE ordergate.orders, ordergate.order_items, ordergate.inventory, ordergate.coupons,
             ordergate.status_log, ordergate.payments, ordergate.exceptions, ordergate.outbox
             RESTART IDENTITY;
    UPDATE ordergate.settings SET value = '5000' WHERE key = 'auto_refund_limit_cents';
    UPDATE ordergate.settings SET value = '900' WHERE key = 'max_hold_seconds';
END
$$;

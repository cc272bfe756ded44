-- currency_default: a row of orders or payments (or of their archive) inserted without a
-- currency gets the setting default_currency as it is at the insert. The gate functions always
-- name the currency, and the trigger's WHEN clause keeps them from paying a function call; it
-- is for rows written by hand (fixtures, imports, an operator's repair, bulk loads).
CREATE OR REPLACE FUNCTION ordergate.currency_default() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    NEW.currency := _default_currency();
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER orders_currency_default BEFORE INSERT ON ordergate.orders
    FOR EACH ROW WHEN (NEW.currency IS NULL) EXECUTE FUNCTION ordergate.currency_default();
CREATE OR REPLACE TRIGGER payments_currency_default BEFORE INSERT ON ordergate.payments
    FOR EACH ROW WHEN (NEW.currency IS NULL) EXECUTE FUNCTION ordergate.currency_default();
CREATE OR REPLACE TRIGGER archived_orders_currency_default BEFORE INSERT ON ordergate.archived_orders
    FOR EACH ROW WHEN (NEW.currency IS NULL) EXECUTE FUNCTION ordergate.currency_default();
CREATE OR REPLACE TRIGGER archived_payments_currency_default BEFORE INSERT ON ordergate.archived_payments
    FOR EACH ROW WHEN (NEW.currency IS NULL) EXECUTE FUNCTION ordergate.currency_default();
-- ALWAYS: bulk loads that switch user triggers off (session_replication_role = replica) still
-- get a currency; a restore carries its own, and the WHEN clause leaves it alone.
ALTER TABLE ordergate.orders ENABLE ALWAYS TRIGGER orders_currency_default;
ALTER TABLE ordergate.payments ENABLE ALWAYS TRIGGER payments_currency_default;
ALTER TABLE ordergate.archived_orders ENABLE ALWAYS TRIGGER archived_orders_currency_default;
ALTER TABLE ordergate.archived_payments ENABLE ALWAYS TRIGGER archived_payments_currency_default;
COMMENT ON FUNCTION ordergate.currency_default() IS
    'Trigger: a row inserted without a currency gets default_currency';
COMMENT ON TRIGGER orders_currency_default ON ordergate.orders IS
    'An order inserted without a currency gets default_currency';
COMMENT ON TRIGGER payments_currency_default ON ordergate.payments IS
    'A payment inserted without a currency gets default_currency';
COMMENT ON TRIGGER archived_orders_currency_default ON ordergate.archived_orders IS
    'An archived order inserted without a currency gets default_currency';
COMMENT ON TRIGGER archived_payments_currency_default ON ordergate.archived_payments IS
    'An archived payment inserted without a currency gets default_currency';

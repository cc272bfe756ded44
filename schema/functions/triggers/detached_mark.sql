-- detached_mark: an exception or event written for an order that is not in the hot table (a
-- payment for an archived or unknown order, a refused payment) is marked detached, so that
-- archive() finds such rows through a small partial index (migration 009). Transition events
-- and cancel messages are always written beside their order in the same transaction: the
-- outbox trigger skips them (its WHEN clause), so the claim's bulk inserts pay nothing for it.
-- An order that is archived later takes its rows with it (by order_no), so the mark never needs
-- to change; archive() still checks that a detached row has no order in the hot table.
CREATE OR REPLACE FUNCTION ordergate.detached_mark() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    NEW.detached := NOT EXISTS (SELECT 1 FROM ordergate.orders o WHERE o.order_no = NEW.order_no);
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER exceptions_detached_mark BEFORE INSERT ON ordergate.exceptions
    FOR EACH ROW EXECUTE FUNCTION ordergate.detached_mark();
CREATE OR REPLACE TRIGGER outbox_detached_mark BEFORE INSERT ON ordergate.outbox
    FOR EACH ROW
    WHEN (NEW.event_type NOT IN ('order_cancelled', 'order_paid', 'cancel_scheduled',
                               'reminder_scheduled', 'payment_reminder'))
    EXECUTE FUNCTION ordergate.detached_mark();
COMMENT ON FUNCTION ordergate.detached_mark() IS
    'Trigger: marks an exception or event detached when its order is not in orders';
COMMENT ON TRIGGER exceptions_detached_mark ON ordergate.exceptions IS
    'Marks an exception detached when its order is not in orders (archive() finds it)';
COMMENT ON TRIGGER outbox_detached_mark ON ordergate.outbox IS
    'Marks an event detached when its order is not in orders (archive() finds it)';

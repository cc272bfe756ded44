-- orders: the state machine, enforced for every writer (the gate functions, an owner, a superuser's
-- ad-hoc UPDATE alike). SQLSTATEs:
--   OG001  status change other than pending_payment -> paid | cancelled | released, or
--          released -> paid (a released order is never cancelled)
--   OG002  change of an immutable column (order_no, coupon_id, created_at, original_expire_at,
--          currency, allow_partial), of amount_cents or expire_at of a closed order (amend_order
--          and set_deadline change them while pending), of captured_cents of a paid or cancelled
--          order (a released one still takes parts), captured_cents going down, or closed_at
--          outside the move out of pending_payment
--   OG003  DELETE of an order that left pending_payment (but by ordergate.archive())
-- The UPDATE guards' WHEN clauses are the rules themselves, evaluated by the executor for every
-- row; the function runs only to refuse. Legal claims (hundreds per batch cancel) pay no function
-- call.
CREATE OR REPLACE FUNCTION ordergate.orders_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.original_expire_at IS NULL THEN
            NEW.original_expire_at := NEW.expire_at;
        END IF;
        IF NEW.status IS DISTINCT FROM 'pending_payment' AND NEW.closed_at IS NULL THEN
            NEW.closed_at := now();   -- a closed order inserted as such (imports, fixtures)
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' THEN
        -- ordergate.archive() moves closed orders to archived_orders (_archiving).
        IF OLD.status <> 'pending_payment' AND NOT _archiving() THEN
            RAISE EXCEPTION 'order % is %: an order that left pending_payment is never deleted',
                OLD.order_no, OLD.status USING ERRCODE = 'OG003';
        END IF;
        RETURN OLD;
    END IF;

    -- UPDATE: reached only through the WHEN clause below, i.e. to refuse.
    IF NEW.order_no IS DISTINCT FROM OLD.order_no
       OR NEW.coupon_id IS DISTINCT FROM OLD.coupon_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.original_expire_at IS DISTINCT FROM OLD.original_expire_at
       OR NEW.currency IS DISTINCT FROM OLD.currency
       OR NEW.allow_partial IS DISTINCT FROM OLD.allow_partial THEN
        RAISE EXCEPTION 'order %: order_no, coupon_id, created_at, original_expire_at, currency and allow_partial are immutable',
            OLD.order_no USING ERRCODE = 'OG002';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        RAISE EXCEPTION 'order %: illegal status transition % -> % (only pending_payment -> paid, cancelled or released, and released -> paid, once)',
            OLD.order_no, OLD.status, NEW.status USING ERRCODE = 'OG001';
    END IF;
    IF NEW.amount_cents IS DISTINCT FROM OLD.amount_cents THEN
        RAISE EXCEPTION 'order % is %: amount_cents of a closed order is immutable',
            OLD.order_no, OLD.status USING ERRCODE = 'OG002';
    END IF;
    IF NEW.expire_at IS DISTINCT FROM OLD.expire_at THEN
        RAISE EXCEPTION 'order % is %: expire_at of a closed order is immutable',
            OLD.order_no, OLD.status USING ERRCODE = 'OG002';
    END IF;
    IF NEW.captured_cents IS DISTINCT FROM OLD.captured_cents THEN
        RAISE EXCEPTION 'order % is %: captured_cents only grows, and only while the order is pending or released',
            OLD.order_no, OLD.status USING ERRCODE = 'OG002';
    END IF;
    RAISE EXCEPTION 'order %: closed_at is set once, when the order leaves pending_payment',
        OLD.order_no USING ERRCODE = 'OG002';
END
$$;

CREATE OR REPLACE TRIGGER orders_guard_insert BEFORE INSERT ON ordergate.orders
    FOR EACH ROW EXECUTE FUNCTION ordergate.orders_guard();
-- The UPDATE rules are split by the columns they watch (UPDATE OF): a trigger fires only for a
-- statement that names one of its columns in SET, and only then is its WHEN clause read and
-- prepared, once per statement. A claim (status, closed_at; a payment's part also
-- captured_cents) and a hold (expire_at) prepare only their own rules; a column that no
-- statement of the gate ever sets is watched by a trigger the gate never fires. A column can
-- only change by being named in SET, or by another BEFORE trigger assigning NEW, which ordergate's
-- own never do for these columns (orders_a_closed_at sets closed_at on a status change, which
-- orders_guard_update watches: it is named with status).
-- The clause is the legal moves' complement, ordered so that the moves every claim makes
-- (pending_payment -> cancelled, paid or released) are told legal by its first two comparisons
-- and nothing else is read: evaluated for every row a claim updates (500 per timeout batch), it
-- compared the statuses six times per cancelled order before. The rules, with NEW.status NULL
-- (a writer's NULL, refused afterwards by NOT NULL unless this fires first) and every other
-- value, fire exactly as the three-way OR of the statuses' moves and closed_at did
-- (tests/sql/021_guard_rules.sql compares both over every pair of statuses and closed_at).
CREATE OR REPLACE TRIGGER orders_guard_update BEFORE UPDATE OF status, closed_at ON ordergate.orders
    FOR EACH ROW
    WHEN (    NOT (OLD.status = 'pending_payment' AND NEW.status IN ('cancelled', 'paid', 'released'))
          AND (   (OLD.status IS DISTINCT FROM NEW.status
                   AND NOT (OLD.status = 'released' AND NEW.status = 'paid'))
               OR (OLD.closed_at IS DISTINCT FROM NEW.closed_at
                   AND (OLD.status IS NOT DISTINCT FROM NEW.status OR OLD.status = 'released'))))
    EXECUTE FUNCTION ordergate.orders_guard();
CREATE OR REPLACE TRIGGER orders_guard_expiry BEFORE UPDATE OF expire_at ON ordergate.orders
    FOR EACH ROW
    WHEN (OLD.status <> 'pending_payment' AND OLD.expire_at IS DISTINCT FROM NEW.expire_at)
    EXECUTE FUNCTION ordergate.orders_guard();
CREATE OR REPLACE TRIGGER orders_guard_captured BEFORE UPDATE OF captured_cents ON ordergate.orders
    FOR EACH ROW
    WHEN (NEW.captured_cents < OLD.captured_cents
          OR (OLD.status NOT IN ('pending_payment', 'released')
              AND OLD.captured_cents IS DISTINCT FROM NEW.captured_cents))
    EXECUTE FUNCTION ordergate.orders_guard();
CREATE OR REPLACE TRIGGER orders_guard_immutable
    BEFORE UPDATE OF order_no, amount_cents, coupon_id, created_at, original_expire_at, currency,
                     allow_partial ON ordergate.orders
    FOR EACH ROW
    WHEN (   OLD.order_no IS DISTINCT FROM NEW.order_no
          OR (OLD.status <> 'pending_payment' AND OLD.amount_cents IS DISTINCT FROM NEW.amount_cents)
          OR OLD.coupon_id IS DISTINCT FROM NEW.coupon_id
          OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR OLD.original_expire_at IS DISTINCT FROM NEW.original_expire_at
          OR OLD.currency IS DISTINCT FROM NEW.currency
          OR OLD.allow_partial IS DISTINCT FROM NEW.allow_partial)
    EXECUTE FUNCTION ordergate.orders_guard();
CREATE OR REPLACE TRIGGER orders_guard_delete BEFORE DELETE ON ordergate.orders
    FOR EACH ROW EXECUTE FUNCTION ordergate.orders_guard();
COMMENT ON FUNCTION ordergate.orders_guard() IS
    'Trigger: the orders state machine for every writer (OG001-OG003); fills original_expire_at on insert';
COMMENT ON TRIGGER orders_guard_insert ON ordergate.orders IS
    'Fills original_expire_at, and closed_at of an order inserted closed';
COMMENT ON TRIGGER orders_guard_update ON ordergate.orders IS
    'Refuses a status change outside the state machine, or closed_at moved without one (OG001, OG002)';
COMMENT ON TRIGGER orders_guard_expiry ON ordergate.orders IS
    'Refuses moving the deadline of a closed order (OG002)';
COMMENT ON TRIGGER orders_guard_captured ON ordergate.orders IS
    'Refuses captured_cents going down, or changing on a closed order (OG002)';
COMMENT ON TRIGGER orders_guard_immutable ON ordergate.orders IS
    'Refuses a change of an immutable column (OG002)';
COMMENT ON TRIGGER orders_guard_delete ON ordergate.orders IS
    'Refuses deleting an order that left pending_payment, but by archive() (OG003)';

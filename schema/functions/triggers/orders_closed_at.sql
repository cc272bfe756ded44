-- closed_at for writers that change the status without setting it (the gate sets it itself).
CREATE OR REPLACE FUNCTION ordergate.orders_closed_at() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    NEW.closed_at := now();
    RETURN NEW;
END
$$;

-- Fires first (triggers fire in name order); the guard then sees the final row. Only a statement
-- that sets the status can change it (UPDATE OF status). closed_at is tested first: every gate
-- writer sets it, so for them the clause ends there, without comparing the statuses.
CREATE OR REPLACE TRIGGER orders_a_closed_at BEFORE UPDATE OF status ON ordergate.orders
    FOR EACH ROW
    WHEN (NEW.closed_at IS NULL AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION ordergate.orders_closed_at();
COMMENT ON FUNCTION ordergate.orders_closed_at() IS
    'Trigger: sets closed_at when a writer changes the status without it';
COMMENT ON TRIGGER orders_a_closed_at ON ordergate.orders IS
    'Sets closed_at when the status leaves pending without it';

-- closed_at for writers that change the status without setting it (the gate sets it itself).
CREATE OR REPLACE FUNCTION ordergate.orders_closed_at() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    NEW.closed_at := now();
    RETURN NEW;
END
$$;

-- Fires first (triggers fire in name order); the guard then sees the final row. Only a statement
-- that sets the status can change it (UPDATE OF status).
CREATE OR REPLACE TRIGGER orders_a_closed_at BEFORE UPDATE OF status ON ordergate.orders
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.closed_at IS NULL)
    EXECUTE FUNCTION ordergate.orders_closed_at();
COMMENT ON FUNCTION ordergate.orders_closed_at() IS
    'Trigger: sets closed_at when a writer changes the status without it';
COMMENT ON TRIGGER orders_a_closed_at ON ordergate.orders IS
    'Sets closed_at when the status leaves pending without it';

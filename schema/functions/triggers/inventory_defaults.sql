-- inventory: total defaults to available (initial stock).
CREATE OR REPLACE FUNCTION ordergate.inventory_defaults() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF NEW.total IS NULL THEN
        NEW.total := NEW.available;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER inventory_defaults BEFORE INSERT ON ordergate.inventory
    FOR EACH ROW EXECUTE FUNCTION ordergate.inventory_defaults();
COMMENT ON FUNCTION ordergate.inventory_defaults() IS
    'Trigger: a new sku''s total defaults to its available stock';
COMMENT ON TRIGGER inventory_defaults ON ordergate.inventory IS
    'A new sku''s total defaults to its available stock';

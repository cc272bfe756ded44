-- add_stock: create a sku or add to it; adds to available and total alike (invariant 2). A
-- negative qty writes stock off (never below zero available: SQLSTATE 23514). Returns available.
CREATE OR REPLACE FUNCTION ordergate.add_stock(p_sku text, p_qty bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_available bigint;
BEGIN
    IF p_sku IS NULL OR length(p_sku) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('add_stock: sku must be 1..128 characters');
    END IF;
    IF p_qty IS NULL THEN
        PERFORM _bad_arg('add_stock: qty must not be NULL');
    END IF;
    INSERT INTO inventory AS i (sku, available, total)
    VALUES (p_sku, p_qty, p_qty)
    ON CONFLICT (sku) DO UPDATE
       SET available = i.available + excluded.available,
           total     = i.total + excluded.total
    RETURNING i.available INTO v_available;
    RETURN v_available;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.add_stock(text,bigint) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.add_stock(text,bigint) IS
    'Creates a sku or adds stock to it (negative: a write-off); returns what is available';

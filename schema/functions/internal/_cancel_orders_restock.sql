-- _cancel_orders_restock: step 3 of _cancel_orders, gives a cancel's stock back
-- (_cancel_orders_claim's o_skus and o_qtys: summed per sku, in sku order). The last step of
-- _cancel_orders, after the shop's hooks: the inventory
-- rows are locked in sku order here and stay locked only until the commit, so a hot SKU row is
-- never held while a hook runs (a place_order of the same SKU would wait for the hook).
-- Pinned like _cancel_orders_claim (schema/README.md, "Plan stability"): the rows are looked up
-- by key, never by a scan of the whole table, whatever the statistics say, and by a plain index
-- scan rather than a bitmap (fewer instructions for the few hundred keys of a batch).
CREATE OR REPLACE FUNCTION ordergate._cancel_orders_restock(p_skus text[], p_qtys bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path = ordergate, pg_temp
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
AS $$
BEGIN
    IF p_skus IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM ordergate.inventory i
     WHERE i.sku = ANY (p_skus)
     ORDER BY i.sku
       FOR NO KEY UPDATE;
    UPDATE ordergate.inventory i
       SET available = i.available + u.q
      FROM unnest(p_skus, p_qtys) AS u(sku, q)
     WHERE i.sku = ANY (p_skus)
       AND i.sku = u.sku;
END
$$;
COMMENT ON FUNCTION ordergate._cancel_orders_restock(text[],bigint[]) IS
    'Internal: cancel step 3, after the hooks: gives the stock back, skus locked in order';

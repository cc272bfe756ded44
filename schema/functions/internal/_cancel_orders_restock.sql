-- _cancel_orders_restock: step 3 of _cancel_orders, gives a cancel's stock back
-- (_cancel_orders_claim's o_skus and o_qtys: summed per sku, in sku order). The last step of
-- _cancel_orders, after the shop's hooks: the inventory
-- rows are locked in sku order here and stay locked only until the commit, so a hot SKU row is
-- never held while a hook runs (a place_order of the same SKU would wait for the hook).
-- One statement locks and updates: the UPDATE is a nested loop driven by the array, which is in
-- sku order, with a primary-key probe per sku, and an UPDATE locks each row as it reaches it, so
-- the rows are locked in sku order, one at a time, as a separate locking pass did before it
-- (that pass read and locked every row once more: about 4,400 instructions per cancelled order
-- with 500 orders over 200 SKUs, tools/bench/sql/bench_instructions.sh cancel).
-- Pinned like _cancel_orders_claim (schema/README.md, "Plan stability"): the rows are looked up
-- by key, never by a scan of the whole table, whatever the statistics say, and by a plain index
-- scan rather than a bitmap (fewer instructions for the few hundred keys of a batch); hash and
-- merge joins are off, so the array drives the probes in its order.
CREATE OR REPLACE FUNCTION ordergate._cancel_orders_restock(p_skus text[], p_qtys bigint[])
RETURNS void
LANGUAGE plpgsql
SET search_path = ordergate, pg_temp
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    IF p_skus IS NULL THEN
        RETURN;
    END IF;
    UPDATE ordergate.inventory i
       SET available = i.available + u.q
      FROM unnest(p_skus, p_qtys) AS u(sku, q)
     WHERE i.sku = u.sku;
END
$$;
COMMENT ON FUNCTION ordergate._cancel_orders_restock(text[],bigint[]) IS
    'Internal: cancel step 3, after the hooks: gives the stock back, skus locked in order';

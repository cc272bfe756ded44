-- A planted bug for examples_saleor_planted_bug: the cancel hook releases stock with one
-- UPDATE ... FROM over the allocations. When orders of one claim hold allocations on the same
-- stock row (a scanner batch on hot variants always does), PostgreSQL applies only one of the
-- joined allocations per stock row, so part of the allocated stock is never released, while
-- the allocations themselves are deleted. ordergate's own invariants stay clean (its orders are
-- cancelled, logged and evented once); the shop's check stock_allocations must catch it.
SET ROLE saleor;
CREATE OR REPLACE FUNCTION saleor.hook_cancelled(order_nos text[], source text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = saleor, pg_temp AS $$
DECLARE
    p_source text := hook_cancelled.source;
    v_ids    uuid[];
BEGIN
    v_ids := orders_lock(hook_cancelled.order_nos, ARRAY['unconfirmed'], 'cancelled', p_source);
    UPDATE order_order o
       SET status = CASE WHEN p_source = 'manual' THEN 'canceled' ELSE 'expired' END,
           expired_at = CASE WHEN p_source = 'manual' THEN NULL ELSE now() END,
           updated_at = now()
     WHERE o.id = ANY (v_ids);
    UPDATE discount_vouchercode c SET used = c.used - u.n
      FROM (SELECT o.voucher_code AS code, count(*)::int AS n FROM order_order o
             WHERE o.id = ANY (v_ids) AND o.voucher_code IS NOT NULL GROUP BY 1) u
     WHERE c.code = u.code;
    UPDATE warehouse_stock s SET quantity_allocated = s.quantity_allocated - a.quantity_allocated  -- the bug
      FROM warehouse_allocation a JOIN order_orderline l ON l.id = a.order_line_id
     WHERE l.order_id = ANY (v_ids) AND a.stock_id = s.id;
    DELETE FROM warehouse_allocation a USING order_orderline l
     WHERE l.id = a.order_line_id AND l.order_id = ANY (v_ids);
    UPDATE payment_transactionitem t SET charge_pending_value = 0, modified_at = now()
     WHERE t.order_id = ANY (v_ids) AND t.charge_pending_value <> 0;
END
$$;
RESET ROLE;
-- A new version of a registered hook runs only once registered again.
SELECT ordergate.add_hook('cancelled', 'saleor.hook_cancelled(text[],text)');

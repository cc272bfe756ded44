-- _order_items_json: an order's lines as the events carry them, [{"sku":...,"qty":...}, ...] in
-- sku order; [] for a gate-only order (the shop keeps its lines itself).
CREATE OR REPLACE FUNCTION ordergate._order_items_json(p_order_no text)
RETURNS jsonb
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('sku', it.sku, 'qty', it.qty) ORDER BY it.sku), '[]'::jsonb)
      FROM ordergate.order_items it
     WHERE it.order_no = p_order_no
$$;
COMMENT ON FUNCTION ordergate._order_items_json(text) IS
    'Internal: an order''s lines as its events carry them';

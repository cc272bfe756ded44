-- console_orders: the console's order search, at most p_limit (1..100) orders, each read
-- through an index:
--   order_no  orders whose number starts with p_value (orders_pkey; C collation), by number
--   txn_no    the order of the payment p_value (payments_pkey)
--   shop      p_value "FIELD=VALUE": orders whose shop data has that field with that text value,
--             newest first: through the shop's GIN index on orders.shop when it made one
--             (docs/console.md, "Searching the shop's data"), else a scan bounded by the
--             statement timeout
CREATE OR REPLACE FUNCTION ordergate.console_orders(p_field text, p_value text, p_limit int)
RETURNS TABLE (order_no text, status text, amount_cents bigint, currency text,
               expire_at text, created_at text, closed_at text, shop jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_key text;
    v_val text;
BEGIN
    IF p_value IS NULL OR length(p_value) NOT BETWEEN 1 AND 200 THEN
        PERFORM _bad_arg('console_orders: value must be 1..200 characters');
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100 THEN
        PERFORM _bad_arg('console_orders: limit must be 1..100');
    END IF;
    IF p_field = 'order_no' THEN
        RETURN QUERY
        SELECT o.order_no, o.status, o.amount_cents, o.currency::text, _ctl_iso(o.expire_at),
               _ctl_iso(o.created_at), _ctl_iso(o.closed_at), o.shop
          FROM orders o
         WHERE o.order_no >= p_value AND o.order_no < p_value || chr(1114111)
         ORDER BY o.order_no
         LIMIT p_limit;
    ELSIF p_field = 'txn_no' THEN
        RETURN QUERY
        SELECT o.order_no, o.status, o.amount_cents, o.currency::text, _ctl_iso(o.expire_at),
               _ctl_iso(o.created_at), _ctl_iso(o.closed_at), o.shop
          FROM payments p JOIN orders o ON o.order_no = p.order_no
         WHERE p.txn_no = p_value;
    ELSIF p_field = 'shop' THEN
        IF position('=' IN p_value) < 2 THEN
            PERFORM _bad_arg('console_orders: a shop search is FIELD=VALUE');
        END IF;
        v_key := split_part(p_value, '=', 1);
        v_val := substr(p_value, length(v_key) + 2);
        RETURN QUERY
        SELECT o.order_no, o.status, o.amount_cents, o.currency::text, _ctl_iso(o.expire_at),
               _ctl_iso(o.created_at), _ctl_iso(o.closed_at), o.shop
          FROM orders o
         WHERE o.shop @> jsonb_build_object(v_key, v_val)
         ORDER BY o.created_at DESC
         LIMIT p_limit;
    ELSE
        PERFORM _bad_arg('console_orders: field must be order_no, txn_no or shop');
    END IF;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.console_orders(text,text,int) TO ordergate_console_viewer;
COMMENT ON FUNCTION ordergate.console_orders(text,text,integer) IS
    'The console''s order search by number prefix, payment or a field of the shop''s data';

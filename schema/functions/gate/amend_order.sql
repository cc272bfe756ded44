-- amend_order: staff edit a pending order: its amount (in the order's currency), its lines and
-- its shop data, at once. Outcomes:
--   amended       the order now has the amount, lines and shop data given
--   out_of_stock  a line's sku is unknown, or the stock an added quantity needs is not
--                 available: nothing changed
--   not_pending   the order is closed (paid, cancelled, released; archived included): nothing
--                 changed; status = its status
--   not_found     no such order (status NULL)
-- items: as place_order's ([{"sku", "qty"}], 0..1000 lines, repeated skus summed). '[]' keeps a
-- gate-only order gate-only; an order with lines cannot become gate-only nor the reverse (22023:
-- who keeps the stock does not change). Stock moves by the difference per sku: an added
-- quantity is taken from inventory.available, a removed one given back. shop: a JSON object of
-- at most 16 KB that replaces the order's, NULL keeps it as it is.
-- amount_cents: 1..10^15; an allow_partial order with captured parts must stay above what they
-- captured (the part that reaches the amount is the one that pays it; an amount at or below the
-- parts would leave the order paid in full yet pending): 22023. Payments after the amendment
-- are judged against the new amount.
-- Every amendment is a row of amendments (operator, before and after: {"amount_cents", "items"
-- in sku order, "shop"}); one outbox event order_amended (the order after, and before); the
-- shop's hooks for event amended run last (_hooks_run, context {operator, before, after}).
-- Lock order: the order row first (waits, like close_order: a payment or cancel in flight
-- decides first), then the inventory rows of the old and new skus in sku order, as the cancel
-- takes them (schema/README.md, "Lock order"); checks after the locks, so a refusal writes
-- nothing.
-- Errors, nothing written: 22023 for a malformed order number, amount, items, shop or operator
-- (1..128 characters, trimmed), and the two rules above.
CREATE OR REPLACE FUNCTION ordergate.amend_order(order_no text, amount_cents bigint, items jsonb,
                                                 shop jsonb, operator text)
RETURNS TABLE (outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text   := amend_order.order_no;
    p_amount   bigint := amend_order.amount_cents;
    p_items    jsonb  := amend_order.items;
    p_shop     jsonb  := amend_order.shop;
    p_operator text   := btrim(amend_order.operator);
    v_skus     text[];   -- the new lines, summed per sku, in sku order
    v_qtys     bigint[];
    v_status   text;
    v_old_amt  bigint;
    v_old_shop jsonb;
    v_partial  boolean;
    v_captured bigint;
    v_cur      text;
    v_had      boolean;  -- the order has built-in lines
    v_before   jsonb;
    v_after    jsonb;
    v_dskus    text[];   -- per sku: new qty - old qty, non-zero only, in sku order
    v_dqtys    bigint[];
    v_found    bigint;
    v_short    bigint;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('amend_order: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 OR p_amount > 1000000000000000 THEN
        PERFORM _bad_arg('amend_order: amount_cents must be 1..10^15 (minor units of the order''s currency)');
    END IF;
    IF p_shop IS NOT NULL AND (jsonb_typeof(p_shop) <> 'object'
                               OR octet_length(p_shop::text) > 16384) THEN
        PERFORM _bad_arg('amend_order: shop must be NULL (keep it) or a JSON object of at most 16384 bytes');
    END IF;
    IF p_operator IS NULL OR length(p_operator) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('amend_order: operator is required (1..128 characters)');
    END IF;
    SELECT i.o_skus, i.o_qtys INTO v_skus, v_qtys FROM _order_items_parse('amend_order', p_items) i;

    -- The order row first, waiting for a payment or cancel in flight.
    SELECT o.status, o.amount_cents, o.shop, o.allow_partial, o.captured_cents, o.currency
      INTO v_status, v_old_amt, v_old_shop, v_partial, v_captured, v_cur
      FROM orders o
     WHERE o.order_no = p_order_no
       FOR NO KEY UPDATE;
    IF v_status IS NULL THEN
        SELECT a.status INTO v_status FROM archived_orders a WHERE a.order_no = p_order_no;
    END IF;
    IF v_status IS NULL THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text;
        RETURN;
    ELSIF v_status <> 'pending_payment' THEN
        RETURN QUERY SELECT 'not_pending'::text, v_status;
        RETURN;
    END IF;

    v_had := EXISTS (SELECT 1 FROM order_items it WHERE it.order_no = p_order_no);
    IF v_had <> (v_skus IS NOT NULL) THEN
        PERFORM _bad_arg(format('amend_order: order %s %s; its amended lines must %s',
                                p_order_no,
                                CASE WHEN v_had THEN 'has built-in lines' ELSE 'is gate-only (items [])' END,
                                CASE WHEN v_had THEN 'not be empty' ELSE 'stay [] (the shop keeps its stock)' END));
    END IF;
    IF v_partial AND v_captured > 0 AND p_amount <= v_captured THEN
        PERFORM _bad_arg(format('amend_order: order %s has %s %s captured in parts; its amount must stay above that',
                                p_order_no, v_captured, v_cur));
    END IF;

    v_before := jsonb_build_object('amount_cents', v_old_amt, 'items', _order_items_json(p_order_no),
                                   'shop', v_old_shop);
    IF v_had THEN
        -- The difference per sku, old lines and new, in sku order.
        SELECT array_agg(d.sku ORDER BY d.sku), array_agg(d.q ORDER BY d.sku)
          INTO v_dskus, v_dqtys
          FROM (SELECT coalesce(n.sku, it.sku) AS sku, coalesce(n.q, 0) - coalesce(it.qty, 0) AS q
                  FROM unnest(v_skus, v_qtys) AS n(sku, q)
                  FULL JOIN (SELECT i.sku, i.qty FROM order_items i WHERE i.order_no = p_order_no) it
                         ON it.sku = n.sku) d
         WHERE d.q <> 0;
        -- Inventory rows locked in sku order (every sku of the new lines, to know they exist,
        -- and the ones whose quantity changes), then checked.
        PERFORM 1 FROM inventory i
         WHERE i.sku = ANY (v_skus) OR i.sku = ANY (coalesce(v_dskus, '{}'))
         ORDER BY i.sku FOR NO KEY UPDATE;
        SELECT count(*), count(*) FILTER (WHERE i.available < d.q)
          INTO v_found, v_short
          FROM unnest(v_skus) AS u(sku)
          LEFT JOIN unnest(v_dskus, v_dqtys) AS d(sku, q) ON d.sku = u.sku
          JOIN inventory i ON i.sku = u.sku;
        IF v_found < cardinality(v_skus) OR v_short > 0 THEN
            RETURN QUERY SELECT 'out_of_stock'::text, 'pending_payment'::text;
            RETURN;
        END IF;
        IF v_dskus IS NOT NULL THEN
            UPDATE inventory i
               SET available = i.available - d.q
              FROM unnest(v_dskus, v_dqtys) AS d(sku, q)
             WHERE i.sku = ANY (v_dskus)
               AND i.sku = d.sku;
            DELETE FROM order_items it WHERE it.order_no = p_order_no;
            INSERT INTO order_items (order_no, sku, qty)
            SELECT p_order_no, u.sku, u.q::int FROM unnest(v_skus, v_qtys) AS u(sku, q);
        END IF;
    END IF;

    UPDATE orders o
       SET amount_cents = p_amount, shop = coalesce(p_shop, o.shop)
     WHERE o.order_no = p_order_no;
    v_after := jsonb_build_object('amount_cents', p_amount, 'items', _order_items_json(p_order_no),
                                  'shop', coalesce(p_shop, v_old_shop));
    INSERT INTO amendments (order_no, operator, before, after)
    VALUES (p_order_no, p_operator, v_before, v_after);
    INSERT INTO outbox (event_type, order_no, payload)
    VALUES ('order_amended', p_order_no,
            jsonb_build_object('v', 1, 'event', 'order_amended', 'order_no', p_order_no,
                               'source', 'manual', 'actor', p_operator,
                               'amount_cents', p_amount, 'items', v_after -> 'items',
                               'shop', v_after -> 'shop', 'before', v_before,
                               'amended_at', now(), 'currency', v_cur));
    PERFORM _hooks_run('amended', ARRAY[p_order_no], 'manual',
                       jsonb_build_object(p_order_no, jsonb_build_object('operator', p_operator,
                                                                         'before', v_before,
                                                                         'after', v_after)));
    RETURN QUERY SELECT 'amended'::text, 'pending_payment'::text;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.amend_order(text,bigint,jsonb,jsonb,text) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.amend_order(text,bigint,jsonb,jsonb,text) IS
    'Changes a pending order''s amount, lines and shop data (staff); stock moves by the difference; every amendment kept';

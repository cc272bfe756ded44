-- _order_items_parse: an order's lines as place_order and amend_order take them, checked and
-- summed. p_items: a JSON array of 0..1000 {"sku": text of 1..128 characters, "qty": integer
-- 1..2^31-1}; repeated skus are summed, and each sum must fit in 32 bits. Returns the skus in
-- sku order (the lock order of inventory rows) and their summed quantities, both NULL for '[]'.
-- Refuses anything else with 22023 (_bad_arg), the message named by p_caller. Reads no table.
CREATE OR REPLACE FUNCTION ordergate._order_items_parse(p_caller text, p_items jsonb,
                                                        OUT o_skus text[], OUT o_qtys bigint[])
LANGUAGE plpgsql STABLE SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_bad bigint;
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array'
       OR jsonb_array_length(p_items) > 1000 THEN
        PERFORM _bad_arg(p_caller || ': items must be a JSON array of 0..1000 {"sku": text, "qty": positive integer}');
    END IF;
    -- Counted after the shape test: jsonb_array_elements raises on anything but an array.
    SELECT count(*) INTO v_bad
      FROM jsonb_array_elements(p_items) e
     WHERE NOT CASE
                 WHEN jsonb_typeof(e) = 'object'
                  AND jsonb_typeof(e -> 'sku') = 'string'
                  AND jsonb_typeof(e -> 'qty') = 'number'
                  AND (e ->> 'qty') ~ '^[0-9]{1,10}$'
                 THEN length(e ->> 'sku') BETWEEN 1 AND 128
                  AND (e ->> 'qty')::bigint BETWEEN 1 AND 2147483647
                 ELSE false
               END;
    IF v_bad > 0 THEN
        PERFORM _bad_arg(p_caller || ': items must be a JSON array of 0..1000 {"sku": text, "qty": positive integer}');
    END IF;
    SELECT array_agg(s.sku ORDER BY s.sku), array_agg(s.q ORDER BY s.sku)
      INTO o_skus, o_qtys
      FROM (SELECT e ->> 'sku' AS sku, sum((e ->> 'qty')::bigint) AS q
              FROM jsonb_array_elements(p_items) e
             GROUP BY 1) s;
    IF EXISTS (SELECT 1 FROM unnest(o_qtys) q WHERE q > 2147483647) THEN
        PERFORM _bad_arg(p_caller || ': total qty per sku must fit in a 32-bit integer');
    END IF;
END
$$;
COMMENT ON FUNCTION ordergate._order_items_parse(text,jsonb) IS
    'Internal: an order''s lines checked (22023) and summed per sku, in sku order';

-- A cancel in a session with standard_conforming_strings off (an old client's setting). The
-- claim's statements are parsed in the caller's session, with its settings, the first time the
-- session calls it: their literals must mean the same under either setting. This file is a
-- session of its own, so the claim is first parsed here with the setting off. No plain literal
-- below holds a backslash (off, it would be an escape); E'' strings mean the same either way.
SET standard_conforming_strings = off;
SELECT og_reset();
SELECT ordergate.add_stock('L1', 5);
SELECT ordergate.add_stock(E'L\\2"', 5);
SET ROLE ordergate_service;
SELECT t_eq('place a plain sku', ordergate.place_order('L1', 100, '[{"sku": "L1", "qty": 1}]', NULL, now() - interval '1 minute'), 'placed');
SELECT t_eq('place a sku to escape', ordergate.place_order('L2', 200, jsonb_build_array(jsonb_build_object('sku', E'L\\2"', 'qty', 2), jsonb_build_object('sku', 'L1', 'qty', 1)), NULL, now() - interval '1 minute'), 'placed');
SELECT t_eq('cancel the plain one', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['L1'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('cancel the other', (SELECT outcome FROM ordergate.claim_cancel(ARRAY['L2'], 'timeout_consumer')), 'cancelled');
SELECT t_eq('items of the plain one', (SELECT (payload -> 'items')::text FROM ordergate.outbox WHERE order_no = 'L1'), '[{"sku": "L1", "qty": 1}]');
SELECT t_eq('items of the other', (SELECT (payload -> 'items')::text FROM ordergate.outbox WHERE order_no = 'L2'),
    format('[{"sku": "L1", "qty": 1}, {"sku": %s, "qty": 2}]', to_json(E'L\\2"'::text)));
SELECT t_eq('their stock back', (SELECT string_agg(available::text, ',' ORDER BY sku) FROM ordergate.inventory), '5,5');

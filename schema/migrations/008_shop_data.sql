-- 008_shop_data.sql: the shop's own data for an order, carried in its events. A shop that keeps
-- its own stock and coupons (gate-only orders, items '[]') and reacts to the events instead of
-- hooks needs its lines in the event to restock from it alone: place_order takes an optional
-- JSON object (shop), stored with the order and copied verbatim into every event of the order
-- ("shop" in order_cancelled, order_paid, refund_requested, reconciliation_alert). ordergate
-- never reads inside it.
-- place_order gains it as its last parameter (default NULL, so five-argument calls stay valid):
-- its old signature is dropped here, its function file creates the new one.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.orders
    ADD COLUMN shop jsonb NULL CHECK (shop IS NULL OR jsonb_typeof(shop) = 'object');
ALTER TABLE ordergate.archived_orders ADD COLUMN shop jsonb NULL;

DROP FUNCTION IF EXISTS ordergate.place_order(text, bigint, jsonb, text, timestamptz);

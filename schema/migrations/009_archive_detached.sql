-- 009_archive_detached.sql: archive's rows of no order, found without reading whole tables.
-- Besides whole orders, archive() moves closed exceptions and published events whose order is
-- not in the hot table (payments for archived or unknown orders, refused payments). It found
-- them with an anti-join of all exceptions and all events against all orders: at 9.4 million
-- orders in the hot tables that took 8.8 s of every batch of 10,000 orders, whether or not such
-- a row existed. Whether a row has an order in the hot table is known when it is written (an
-- order that is archived later takes its exceptions and events with it), so it is recorded
-- then: detached = true, set by the trigger of the function file detached_mark.sql, and the
-- partial indexes below hold only those rows, which archive() reads instead.
-- The backfill reads both tables once, here.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.exceptions ADD COLUMN detached boolean NOT NULL DEFAULT false;
ALTER TABLE ordergate.outbox ADD COLUMN detached boolean NOT NULL DEFAULT false;

UPDATE ordergate.exceptions x SET detached = true
 WHERE NOT EXISTS (SELECT 1 FROM ordergate.orders o WHERE o.order_no = x.order_no);
UPDATE ordergate.outbox b SET detached = true
 WHERE NOT EXISTS (SELECT 1 FROM ordergate.orders o WHERE o.order_no = b.order_no);

CREATE INDEX exceptions_detached_idx ON ordergate.exceptions (id) WHERE detached;
CREATE INDEX outbox_detached_idx ON ordergate.outbox (id) WHERE detached;

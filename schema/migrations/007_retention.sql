-- 007_retention.sql: retention of closed history (ordergate.archive, schema/README.md "Retention").
--
-- Closed orders older than an operator-chosen age move, with every row that belongs to them, from
-- the hot tables into archived_* tables of the same columns in this schema (same database, same
-- backups; the hot tables and their indexes stay the size of the recent traffic). Each archived_*
-- table has the columns of its hot table, in the same order, plus archived_at. archive() names
-- the columns it copies, so a later migration that adds a column to a hot table adds it here too.
--
-- Dropping archive data for good is TRUNCATE (or DELETE ... WHERE archived_at < ...) of these
-- tables by the owner: nothing in the gate reads them except claim_payment (to answer a payment
-- for an archived order as it would have) and reconcile (invariants 2 and 3, through
-- inventory.archived_qty and archived_orders' coupons; docs/operations.md, "Retention").
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

CREATE TABLE ordergate.archived_orders (LIKE ordergate.orders INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_orders ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_orders ADD PRIMARY KEY (order_no);
-- Invariant 3: a 'used' coupon whose paid order was archived.
CREATE INDEX archived_orders_coupon_idx ON ordergate.archived_orders (coupon_id)
    WHERE coupon_id IS NOT NULL AND status = 'paid';

CREATE TABLE ordergate.archived_order_items (LIKE ordergate.order_items INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_order_items ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_order_items ADD PRIMARY KEY (order_no, sku);

CREATE TABLE ordergate.archived_status_log (LIKE ordergate.status_log INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_status_log ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_status_log ADD PRIMARY KEY (order_no);

-- claim_payment looks a txn_no up here: a retried payment of an archived order stays a duplicate.
CREATE TABLE ordergate.archived_payments (LIKE ordergate.payments INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_payments ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_payments ADD PRIMARY KEY (txn_no);
CREATE INDEX archived_payments_order_no_idx ON ordergate.archived_payments (order_no);

CREATE TABLE ordergate.archived_exceptions (LIKE ordergate.exceptions);
ALTER TABLE ordergate.archived_exceptions ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_exceptions ADD PRIMARY KEY (id);

CREATE TABLE ordergate.archived_refunds (LIKE ordergate.refunds INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_refunds ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_refunds ADD PRIMARY KEY (refund_ref);

CREATE TABLE ordergate.archived_outbox (LIKE ordergate.outbox);
ALTER TABLE ordergate.archived_outbox ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_outbox ADD PRIMARY KEY (id);

-- Invariant 2 over what remains: the quantity of paid orders' lines that archive() moved out,
-- per sku (total = available + held by pending and paid orders + archived_qty).
ALTER TABLE ordergate.inventory ADD COLUMN archived_qty bigint NOT NULL DEFAULT 0
    CHECK (archived_qty >= 0);

-- archive() walks closed orders oldest first.
CREATE INDEX orders_closed_at_idx ON ordergate.orders (closed_at)
    WHERE status <> 'pending_payment';
-- ... and takes each order's events (every type) by order number: without this a batch would
-- read the whole outbox, and the archive rate would fall as the history grows.
CREATE INDEX outbox_order_no_idx ON ordergate.outbox (order_no);

GRANT SELECT ON ordergate.archived_orders, ordergate.archived_order_items,
                ordergate.archived_status_log, ordergate.archived_payments,
                ordergate.archived_exceptions, ordergate.archived_refunds,
                ordergate.archived_outbox TO ordergate_service;

-- 001_core.sql: roles, schema ordergate, tables, indexes, settings, table privileges.
--
-- Applied once, by `ordergatectl migrate` (or schema/install.sql), inside the one transaction of
-- that run; the runner records it in ordergate.schema_migrations with its checksum. No function
-- lives here: each function (and the trigger it backs) is a file in schema/functions/, re-applied
-- whenever it changes (schema/README.md, "Changing the schema").
--
-- Identifiers (order_no, txn_no, sku, coupon_id) are text COLLATE "C": ASCII keys compared
-- bytewise, so every btree lookup, join and sort on them skips the locale's strcoll (measurably
-- cheaper for set-based batches; the order of keys is then the byte order everywhere).
-- Identifier checks are written `length(x) <= N AND x ~ '^[...]+$'`: a bounded repetition such as
-- `{1,64}` makes PostgreSQL's regex engine ~15x slower, which a 500-order batch feels.
--
-- Lock order used by every gate function (deadlock avoidance):
--   payments(txn_no)  ->  orders by order_no  ->  coupons by coupon_id  ->  inventory by sku.
-- place_order is the one exception (it locks coupon and inventory before inserting its new
-- order row; schema/README.md, "Design notes", says why that cannot form a cycle).

-- Roles are cluster-global: create them only when missing. NOLOGIN: they are privilege carriers;
-- login roles (e.g. the consumer's, the scanner's) are granted membership by operations.
--   ordergate_owner    owns every object; SECURITY DEFINER functions run as it.
--   ordergate_service  executes the gate; reads the tables; writes nothing directly.
--   ordergate_admin    ordergate_service plus stock/coupon/settings/exception maintenance functions.

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_owner') THEN
        CREATE ROLE ordergate_owner NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_service') THEN
        CREATE ROLE ordergate_service NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_admin') THEN
        CREATE ROLE ordergate_admin NOLOGIN;
    END IF;
    IF NOT pg_has_role('ordergate_admin', 'ordergate_service', 'MEMBER') THEN
        GRANT ordergate_service TO ordergate_admin;
    END IF;
    -- The migrating role must be able to SET ROLE ordergate_owner (always true for a superuser).
    -- The role name comes from the catalog, not from any input.
    IF NOT pg_has_role(current_user, 'ordergate_owner', 'MEMBER') THEN
        EXECUTE format('GRANT ordergate_owner TO %I', current_user);
    END IF;
END
$roles$;

CREATE SCHEMA ordergate AUTHORIZATION ordergate_owner;
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

-- Functions the owner creates are not executable by PUBLIC unless granted (each function file
-- grants what its callers need). Not IN SCHEMA: a per-schema default can only add to the
-- database-wide one, which grants EXECUTE to PUBLIC.
ALTER DEFAULT PRIVILEGES FOR ROLE ordergate_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- The runner's bookkeeping: each applied migration with the sha256 of its file (NULL when applied
-- by schema/install.sql; the next ordergatectl migrate fills it in), and each applied function
-- file with its sha256, so a run re-applies exactly the function files that changed.
CREATE TABLE ordergate.schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(),
    checksum   text NULL
);
CREATE TABLE ordergate.schema_functions (
    file       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- Tunables read by the gate functions (text values, parsed where used).
CREATE TABLE ordergate.settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO ordergate.settings (key, value) VALUES
    ('auto_refund_limit_cents', '5000'),  -- late/double payment <= this: auto_refund, else manual_review
    ('max_hold_seconds', '900');          -- hold_for_payment: max seconds per call and max total extension

-- Stock. available = still sellable; total = initial stock + every later add_stock (invariant 2:
-- total = available + qty held by pending and paid orders). total defaults to available on insert.
CREATE TABLE ordergate.inventory (
    sku        text COLLATE "C" PRIMARY KEY CHECK (length(sku) BETWEEN 1 AND 128),
    available  bigint NOT NULL DEFAULT 0 CHECK (available >= 0),
    total      bigint NOT NULL CHECK (total >= 0),  -- filled from available by trigger when not given
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ordergate.coupons (
    coupon_id  text COLLATE "C" PRIMARY KEY CHECK (length(coupon_id) BETWEEN 1 AND 128),
    state      text NOT NULL DEFAULT 'available'
               CHECK (state IN ('available', 'locked', 'used')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ordergate.orders (
    order_no           text COLLATE "C" PRIMARY KEY
                       CHECK (length(order_no) <= 64 AND order_no ~ '^[A-Za-z0-9._:-]+$'),
    status             text NOT NULL DEFAULT 'pending_payment'
                       CHECK (status IN ('pending_payment', 'paid', 'cancelled')),
    amount_cents       bigint NOT NULL CHECK (amount_cents > 0),
    coupon_id          text COLLATE "C" NULL REFERENCES ordergate.coupons (coupon_id),
    expire_at          timestamptz NOT NULL,
    -- expiry as placed; hold_for_payment never extends beyond it + max_hold_seconds. Trigger-filled.
    original_expire_at timestamptz NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    closed_at          timestamptz NULL      -- set when the order leaves pending (by the gate, else by trigger)
);
-- The overdue sweep (scanner, reconcile invariant 6): keyset on (expire_at, order_no), pending only.
CREATE INDEX orders_overdue_idx ON ordergate.orders (expire_at, order_no)
    WHERE status = 'pending_payment';
-- A coupon backs at most one live (pending or paid) order.
CREATE UNIQUE INDEX orders_live_coupon_uq ON ordergate.orders (coupon_id)
    WHERE coupon_id IS NOT NULL AND status <> 'cancelled';

CREATE TABLE ordergate.order_items (
    order_no text COLLATE "C" NOT NULL REFERENCES ordergate.orders (order_no),
    sku      text COLLATE "C" NOT NULL REFERENCES ordergate.inventory (sku),
    qty      int  NOT NULL CHECK (qty > 0),
    PRIMARY KEY (order_no, sku)   -- place_order sums duplicate skus into one line
);
CREATE INDEX order_items_sku_idx ON ordergate.order_items (sku);

-- One row per transition (invariant 4). An order moves once, so order_no is the primary key: a
-- second row for an order cannot exist. id keeps insertion order for readers (no index: lookups go
-- by order_no). No foreign key to orders on purpose: a batch cancel inserts hundreds of rows and a
-- per-row RI check would cost more than the rest of the row; reconcile checks the link instead.
CREATE TABLE ordergate.status_log (
    order_no        text COLLATE "C" PRIMARY KEY,
    id              bigint GENERATED BY DEFAULT AS IDENTITY,
    from_status     text NOT NULL,
    to_status       text NOT NULL,
    source          text NOT NULL
                    CHECK (source IN ('timeout_consumer', 'timeout_scanner', 'payment_callback', 'manual')),
    idempotency_key text COLLATE "C" NOT NULL,   -- cancel: the order number; payment: the channel txn number
    actor           text NOT NULL DEFAULT coalesce(nullif(current_setting('application_name', true), ''), session_user),
    note            text NULL,       -- close_order: the operator's reason
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Every payment callback ever claimed, keyed by the channel transaction number (idempotency key).
-- outcome 'processing' exists only inside the claiming transaction and is never visible committed.
CREATE TABLE ordergate.payments (
    txn_no       text COLLATE "C" PRIMARY KEY CHECK (length(txn_no) <= 128 AND txn_no ~ '^[A-Za-z0-9._:-]+$'),
    order_no     text COLLATE "C" NOT NULL,      -- no FK: payments for unknown orders are recorded too
    amount_cents bigint NOT NULL CHECK (amount_cents > 0),
    channel      text NOT NULL DEFAULT '',
    outcome      text NOT NULL DEFAULT 'processing'
                 CHECK (outcome IN ('processing', 'paid', 'late_payment', 'double_payment',
                                    'amount_mismatch', 'not_found')),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_order_no_idx ON ordergate.payments (order_no);
-- No order is paid by two transactions.
CREATE UNIQUE INDEX payments_one_paid_per_order_uq ON ordergate.payments (order_no)
    WHERE outcome = 'paid';

-- Money that needs a follow-up: late payments, double payments, amount mismatches, unknown orders.
CREATE TABLE ordergate.exceptions (
    id           bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    order_no     text COLLATE "C" NOT NULL,
    kind         text NOT NULL
                 CHECK (kind IN ('late_payment', 'double_payment', 'amount_mismatch', 'unknown_order')),
    txn_no       text COLLATE "C" NULL,
    amount_cents bigint NULL,
    resolution   text NOT NULL DEFAULT 'manual_review'
                 CHECK (resolution IN ('auto_refund', 'manual_review')),
    state        text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'resolved')),
    note         text NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz NULL,
    resolved_by  text NULL
);
CREATE INDEX exceptions_order_no_idx ON ordergate.exceptions (order_no);
CREATE INDEX exceptions_open_idx ON ordergate.exceptions (created_at, id) WHERE state = 'open';
-- Exactly one exception per transaction number (invariant 5).
CREATE UNIQUE INDEX exceptions_txn_no_uq ON ordergate.exceptions (txn_no) WHERE txn_no IS NOT NULL;

-- Transactional outbox: external side effects, written in the claiming transaction, published by
-- the relay (outbox_lock_batch / outbox_mark_published). Rows are kept after publication.
CREATE TABLE ordergate.outbox (
    id           bigserial PRIMARY KEY,
    event_type   text NOT NULL,
    order_no     text COLLATE "C" NOT NULL,
    payload      json NOT NULL DEFAULT '{}'::json,   -- stored as written, published byte for byte
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz NULL
);
CREATE INDEX outbox_unpublished_idx ON ordergate.outbox (id) WHERE published_at IS NULL;
-- At most one transition event (order_paid / order_cancelled) per order: the database refuses a
-- second one, as status_log's primary key refuses a second transition. Also lets invariant 7 be
-- a merge join of two indexes in order_no order.
CREATE UNIQUE INDEX outbox_transition_uq ON ordergate.outbox (order_no)
    WHERE event_type IN ('order_paid', 'order_cancelled');

-- The scanner's run log: one sweep run = one row, written at the start (status 'running'), its
-- counters and checkpoint set after every batch, ended 'done' or 'failed'. A run that found
-- another one under way ends 'skipped' at once. A run whose process died leaves its row
-- 'running'; the next run that takes the lock marks it 'crashed' and reports it (docs/scanner.md).
-- Every column but run_id has a default, so an insert of any subset works.
CREATE TABLE ordergate.scanner_runs (
    run_id               bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    status               text NOT NULL DEFAULT 'running'
                         CHECK (status IN ('running', 'done', 'failed', 'skipped', 'crashed')),
    started_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at          timestamptz NULL,
    duration_ms          bigint NULL,
    progress_at          timestamptz NULL,  -- last counters/checkpoint update
    host                 text NOT NULL DEFAULT '',
    os_pid               int NULL,
    backend_pid          int NOT NULL DEFAULT pg_backend_pid(),
    actor                text NOT NULL DEFAULT coalesce(nullif(current_setting('application_name', true), ''), session_user),
    -- the run's settings
    grace                interval NULL,
    batch_size           int NULL,
    max_orders           int NULL,           -- 0 = no cap
    max_seconds          int NULL,           -- 0 = no cap
    -- counters: claim outcomes of every order the run sent to claim_cancel
    batches              int NOT NULL DEFAULT 0,
    scanned              bigint NOT NULL DEFAULT 0,
    cancelled            bigint NOT NULL DEFAULT 0,  -- missed by the consumer: the alarm
    already_cancelled    bigint NOT NULL DEFAULT 0,
    already_paid         bigint NOT NULL DEFAULT 0,
    not_due              bigint NOT NULL DEFAULT 0,
    not_found            bigint NOT NULL DEFAULT 0,
    -- keyset position after the last finished batch
    checkpoint_expire_at timestamptz NULL,
    checkpoint_order_no  text NULL,
    -- why the run ended: complete | max_orders | max_seconds | stopped | lock_held | error | crashed
    stop_reason          text NULL,
    detail               text NULL,          -- error message, lock holder, crash report
    reported_by          bigint NULL         -- crashed: the run that found it
);
CREATE INDEX scanner_runs_running_idx ON ordergate.scanner_runs (run_id) WHERE status = 'running';
CREATE INDEX scanner_runs_started_idx ON ordergate.scanner_runs (started_at);

------------------------------------------------------------------------------------------------
-- Privileges: the service reads everything, writes nothing directly.

REVOKE ALL ON ALL TABLES IN SCHEMA ordergate FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA ordergate FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA ordergate FROM PUBLIC;
GRANT USAGE ON SCHEMA ordergate TO ordergate_service;
GRANT SELECT ON ALL TABLES IN SCHEMA ordergate TO ordergate_service;

-- 001_core.sql: roles, schema ordergate, tables, indexes, the state-machine guard.
--
-- Apply with: psql -v ON_ERROR_STOP=1 -f schema/001_core.sql   (as a superuser, or a role with
-- CREATEROLE and CREATE on the database). Migrations apply in lexical order; each one records its
-- own version in ordergate.schema_migrations and refuses to run twice.
--
-- Identifiers (order_no, txn_no, sku, coupon_id) are text COLLATE "C": ASCII keys compared
-- bytewise, so every btree lookup, join and sort on them skips the locale's strcoll (measurably
-- cheaper for set-based batches; the order of keys is then the byte order everywhere).
-- Identifier checks are written `length(x) <= N AND x ~ '^[...]+$'`: a bounded repetition such as
-- `{1,64}` makes PostgreSQL's regex engine ~15x slower, which a 500-order batch feels.
--
-- Lock order used by every function in this schema (deadlock avoidance):
--   payments(txn_no)  ->  orders by order_no  ->  coupons by coupon_id  ->  inventory by sku.
-- place_order is the one exception (it locks coupon and inventory before inserting its new
-- order row; see 002_gate.sql for why that cannot form a cycle).

BEGIN;

-- Refuse to run twice (plain psql has no "skip"; a clear error that changes nothing is the next best).
DO $guard$
BEGIN
    IF to_regclass('ordergate.schema_migrations') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM ordergate.schema_migrations WHERE version = '001') THEN
            RAISE EXCEPTION 'ordergate migration 001 is already applied' USING ERRCODE = 'OG000';
        END IF;
    END IF;
END
$guard$;

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

-- Functions created by the owner in this schema are not executable by PUBLIC unless granted.
ALTER DEFAULT PRIVILEGES FOR ROLE ordergate_owner IN SCHEMA ordergate
    REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

CREATE TABLE ordergate.schema_migrations (
    version    text PRIMARY KEY,
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
    payload      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz NULL
);
CREATE INDEX outbox_unpublished_idx ON ordergate.outbox (id) WHERE published_at IS NULL;

------------------------------------------------------------------------------------------------
-- Triggers

-- inventory: total defaults to available (initial stock).
CREATE FUNCTION ordergate.inventory_defaults() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF NEW.total IS NULL THEN
        NEW.total := NEW.available;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER inventory_defaults BEFORE INSERT ON ordergate.inventory
    FOR EACH ROW EXECUTE FUNCTION ordergate.inventory_defaults();

-- orders: the state machine, enforced for every writer (the gate functions, an owner, a superuser's
-- ad-hoc UPDATE alike). SQLSTATEs:
--   OG001  status change other than pending_payment -> paid | pending_payment -> cancelled
--   OG002  change of an immutable column (order_no, amount_cents, coupon_id, created_at,
--          original_expire_at), of expire_at of a closed order, or of closed_at outside the transition
--   OG003  DELETE of an order that left pending_payment
-- The UPDATE guard's WHEN clause is the rule itself, evaluated by the executor for every row; the
-- function runs only to refuse. Legal claims (hundreds per batch cancel) pay no function call.
CREATE FUNCTION ordergate.orders_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.original_expire_at IS NULL THEN
            NEW.original_expire_at := NEW.expire_at;
        END IF;
        IF NEW.status IS DISTINCT FROM 'pending_payment' AND NEW.closed_at IS NULL THEN
            NEW.closed_at := now();   -- a closed order inserted as such (imports, fixtures)
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' THEN
        IF OLD.status <> 'pending_payment' THEN
            RAISE EXCEPTION 'order % is %: an order that left pending_payment is never deleted',
                OLD.order_no, OLD.status USING ERRCODE = 'OG003';
        END IF;
        RETURN OLD;
    END IF;

    -- UPDATE: reached only through the WHEN clause below, i.e. to refuse.
    IF NEW.order_no IS DISTINCT FROM OLD.order_no
       OR NEW.amount_cents IS DISTINCT FROM OLD.amount_cents
       OR NEW.coupon_id IS DISTINCT FROM OLD.coupon_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.original_expire_at IS DISTINCT FROM OLD.original_expire_at THEN
        RAISE EXCEPTION 'order %: order_no, amount_cents, coupon_id, created_at and original_expire_at are immutable',
            OLD.order_no USING ERRCODE = 'OG002';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        RAISE EXCEPTION 'order %: illegal status transition % -> % (only pending_payment -> paid or pending_payment -> cancelled, once)',
            OLD.order_no, OLD.status, NEW.status USING ERRCODE = 'OG001';
    END IF;
    IF NEW.expire_at IS DISTINCT FROM OLD.expire_at THEN
        RAISE EXCEPTION 'order % is %: expire_at of a closed order is immutable',
            OLD.order_no, OLD.status USING ERRCODE = 'OG002';
    END IF;
    RAISE EXCEPTION 'order %: closed_at is set once, when the order leaves pending_payment',
        OLD.order_no USING ERRCODE = 'OG002';
END
$$;

-- closed_at for writers that change the status without setting it (the gate sets it itself).
CREATE FUNCTION ordergate.orders_closed_at() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    NEW.closed_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER orders_guard_insert BEFORE INSERT ON ordergate.orders
    FOR EACH ROW EXECUTE FUNCTION ordergate.orders_guard();
-- Fires first (triggers fire in name order); the guard then sees the final row.
CREATE TRIGGER orders_a_closed_at BEFORE UPDATE ON ordergate.orders
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.closed_at IS NULL)
    EXECUTE FUNCTION ordergate.orders_closed_at();
CREATE TRIGGER orders_guard_update BEFORE UPDATE ON ordergate.orders
    FOR EACH ROW
    WHEN (   (OLD.status IS DISTINCT FROM NEW.status
              AND NOT (OLD.status = 'pending_payment' AND NEW.status IN ('paid', 'cancelled')))
          OR OLD.order_no IS DISTINCT FROM NEW.order_no
          OR OLD.amount_cents IS DISTINCT FROM NEW.amount_cents
          OR OLD.coupon_id IS DISTINCT FROM NEW.coupon_id
          OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR OLD.original_expire_at IS DISTINCT FROM NEW.original_expire_at
          OR (OLD.status <> 'pending_payment' AND OLD.expire_at IS DISTINCT FROM NEW.expire_at)
          OR (OLD.status IS NOT DISTINCT FROM NEW.status AND OLD.closed_at IS DISTINCT FROM NEW.closed_at))
    EXECUTE FUNCTION ordergate.orders_guard();
CREATE TRIGGER orders_guard_delete BEFORE DELETE ON ordergate.orders
    FOR EACH ROW EXECUTE FUNCTION ordergate.orders_guard();

-- status_log is append-only (OG004). TRUNCATE stays possible for the owner (test fixtures).
CREATE FUNCTION ordergate.status_log_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'ordergate.status_log is append-only (% refused)', TG_OP USING ERRCODE = 'OG004';
END
$$;
CREATE TRIGGER status_log_append_only BEFORE UPDATE OR DELETE ON ordergate.status_log
    FOR EACH STATEMENT EXECUTE FUNCTION ordergate.status_log_append_only();

------------------------------------------------------------------------------------------------
-- Privileges: the service reads everything, writes nothing directly.

REVOKE ALL ON ALL TABLES IN SCHEMA ordergate FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA ordergate FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA ordergate FROM PUBLIC;
GRANT USAGE ON SCHEMA ordergate TO ordergate_service;
GRANT SELECT ON ALL TABLES IN SCHEMA ordergate TO ordergate_service;

INSERT INTO ordergate.schema_migrations (version) VALUES ('001');

COMMIT;

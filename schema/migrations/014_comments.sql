-- 014_comments.sql: a one-line comment on every role, schema, table and index, so that the
-- database describes itself (\d+, \dt+, \di+, \du+) and schema/current.sql, generated from the
-- catalogs, shows each object under its comment. Functions and triggers are commented in their
-- own files (functions/GROUP/NAME.sql), beside their definition. A new object gets its comment
-- where it is made: the migration that creates it, or the function's file.
--
-- The cancel's call chain is named in call order: claim_cancel and close_order call
-- _cancel_orders, whose steps are _cancel_orders_claim, the hooks (_hooks_run), then
-- _cancel_orders_restock. The old names (_cancel_effects, _cancel_claim, _cancel_restock) go
-- here; the function files create the new ones in the same run.

-- Roles are cluster-wide: commented as the migrating role (a superuser, or one with CREATEROLE),
-- before taking the owner's role.
COMMENT ON ROLE ordergate_owner IS
    'ordergate: owns every object of the schema; the SECURITY DEFINER gate functions run as it. Grant it to nobody.';
COMMENT ON ROLE ordergate_order_service IS
    'ordergate: order services: place, pay, hold, close, read orders and exceptions; SELECT on every table';
COMMENT ON ROLE ordergate_trigger IS
    'ordergate: the cancel triggers: the consumer (claim_cancel, due_times, record_payment_refused) and the scanner (sweep, run log, reconcile)';
COMMENT ON ROLE ordergate_relay IS
    'ordergate: the outbox relay: lock, publish, quarantine events and read its gauges';
COMMENT ON ROLE ordergate_refunds IS
    'ordergate: whoever reports refund results (record_refund)';
COMMENT ON ROLE ordergate_admin IS
    'ordergate: operators: the four caller roles plus stock, coupons, settings, hooks, exceptions, retention';
COMMENT ON ROLE ordergate_service IS
    'ordergate: deprecated, a member of the four caller roles so that older login roles keep working; dropped in the next release';

SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

DROP FUNCTION IF EXISTS ordergate._cancel_effects(text[], text, text, text, boolean);
DROP FUNCTION IF EXISTS ordergate._cancel_claim(text[], text, text, text, boolean);
DROP FUNCTION IF EXISTS ordergate._cancel_restock(text[], bigint[]);

COMMENT ON SCHEMA ordergate IS
    'The order gate: tables written only by its functions; every change of an order is one function call (schema/README.md)';

-- Orders and what they hold.
COMMENT ON TABLE ordergate.orders IS
    'One row per order: pending_payment, then paid or cancelled exactly once; deadline, amount, coupon, the shop''s own data';
COMMENT ON INDEX ordergate.orders_overdue_idx IS
    'Pending orders by deadline: the scanner''s keyset sweep and invariant 6';
COMMENT ON INDEX ordergate.orders_live_coupon_uq IS
    'A coupon backs at most one live (pending or paid) order';
COMMENT ON INDEX ordergate.orders_closed_at_idx IS
    'Closed orders oldest first, for archive()';
COMMENT ON TABLE ordergate.order_items IS
    'An order''s lines, one per sku (place_order sums repeated skus); none for a gate-only order';
COMMENT ON INDEX ordergate.order_items_sku_idx IS
    'The lines of a sku (its foreign key to inventory, invariant 2)';
COMMENT ON TABLE ordergate.inventory IS
    'Stock per sku: available to sell, total ever added, archived_qty of archived paid orders (invariant 2)';
COMMENT ON TABLE ordergate.coupons IS
    'Coupons: available, locked by a pending order, or used by a paid one (invariant 3)';

-- What happened to them.
COMMENT ON TABLE ordergate.status_log IS
    'The one transition of each order (primary key: the order number); append-only';
COMMENT ON TABLE ordergate.payments IS
    'Every payment transaction number ever claimed, with the outcome of its first claim';
COMMENT ON INDEX ordergate.payments_order_no_idx IS
    'An order''s payments (order_report, reconcile, archive)';
COMMENT ON INDEX ordergate.payments_one_paid_per_order_uq IS
    'No order is paid by two transactions';
COMMENT ON TABLE ordergate.exceptions IS
    'Payments that need a follow-up (late, double, mismatched, unknown order, refused result) and how they end';
COMMENT ON INDEX ordergate.exceptions_order_no_idx IS
    'An order''s exceptions';
COMMENT ON INDEX ordergate.exceptions_open_idx IS
    'Open exceptions oldest first (exception_list, the overdue-review alert)';
COMMENT ON INDEX ordergate.exceptions_txn_no_uq IS
    'At most one exception per payment transaction (invariant 5)';
COMMENT ON INDEX ordergate.exceptions_refused_key_uq IS
    'At most one refused-payment exception per message key: a redelivery records nothing twice';
COMMENT ON INDEX ordergate.exceptions_detached_idx IS
    'Exceptions of orders not in orders (archived, unknown), for archive()';
COMMENT ON TABLE ordergate.refunds IS
    'Refund results reported by record_refund, one per refund reference';
COMMENT ON INDEX ordergate.refunds_exception_id_idx IS
    'The refunds of an exception';
COMMENT ON INDEX ordergate.refunds_one_success_uq IS
    'At most one succeeded refund per exception (invariant 8)';
COMMENT ON TABLE ordergate.outbox IS
    'Events written in the transaction that caused them, published by the relay; kept after publication';
COMMENT ON INDEX ordergate.outbox_unpublished_idx IS
    'Unpublished events oldest first: the relay''s batches and its backlog gauges';
COMMENT ON INDEX ordergate.outbox_transition_uq IS
    'At most one transition event (order_paid or order_cancelled) per order (invariant 7)';
COMMENT ON INDEX ordergate.outbox_order_no_idx IS
    'An order''s events, for archive()';
COMMENT ON INDEX ordergate.outbox_detached_idx IS
    'Events of orders not in orders (archived, unknown), for archive()';
COMMENT ON INDEX ordergate.outbox_quarantined_idx IS
    'Quarantined events (outbox_quarantine_list, the gauge, invariant 9)';

-- Configuration and extension.
COMMENT ON TABLE ordergate.settings IS
    'Tunables read by the gate functions (text values), changed with set_setting';
COMMENT ON TABLE ordergate.hooks IS
    'The shop''s effect hooks per event (add_hook), each bound by an operator in ordergate_hooks';

-- The scanner.
COMMENT ON TABLE ordergate.scanner_runs IS
    'One row per scanner run: settings, counters, checkpoint, and how it ended';
COMMENT ON INDEX ordergate.scanner_runs_running_idx IS
    'Runs still marked running (crash detection, the sweep status)';
COMMENT ON INDEX ordergate.scanner_runs_started_idx IS
    'Runs by start time (the sweep status: the newest done run)';
COMMENT ON INDEX ordergate.scanner_runs_token_uq IS
    'One run per run token: a start retried after a lost reply resumes its own run';
COMMENT ON TABLE ordergate.scanner_lease IS
    'The sweep''s one lease row: which run holds it and until when';

-- Retention: archive() moves closed orders here with all their rows.
COMMENT ON TABLE ordergate.archived_orders IS
    'Archived orders: the columns of orders plus archived_at';
COMMENT ON INDEX ordergate.archived_orders_coupon_idx IS
    'Coupons used by archived paid orders (invariant 3)';
COMMENT ON TABLE ordergate.archived_order_items IS
    'Archived lines: the columns of order_items plus archived_at';
COMMENT ON TABLE ordergate.archived_status_log IS
    'Archived transitions: the columns of status_log plus archived_at';
COMMENT ON TABLE ordergate.archived_payments IS
    'Archived payments: the columns of payments plus archived_at (a retried payment stays a duplicate)';
COMMENT ON INDEX ordergate.archived_payments_order_no_idx IS
    'An archived order''s payments';
COMMENT ON TABLE ordergate.archived_exceptions IS
    'Archived exceptions: the columns of exceptions plus archived_at';
COMMENT ON INDEX ordergate.archived_exceptions_txn_no_idx IS
    'An archived exception by transaction number (record_refund)';
COMMENT ON TABLE ordergate.archived_refunds IS
    'Archived refunds, and results that arrive after their exception was archived';
COMMENT ON INDEX ordergate.archived_refunds_exception_id_idx IS
    'The archived refunds of an exception (record_refund)';
COMMENT ON TABLE ordergate.archived_outbox IS
    'Archived events: the columns of outbox plus archived_at';

-- The migration runner's bookkeeping.
COMMENT ON TABLE ordergate.schema_migrations IS
    'Each applied migration with the sha256 of its file (NULL after install.sql, until ordergatectl migrate)';
COMMENT ON TABLE ordergate.schema_functions IS
    'Each applied function file (by file name, whatever its group) with its sha256: a run re-applies the changed ones';

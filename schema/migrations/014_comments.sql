-- 014_comments.sql: a one-line comment on every role, schema, table and index and on each
-- column of the hot tables, so that the database describes itself (\d+, \dt+, \di+, \du+) and
-- schema/current.sql, generated from the catalogs, shows each object under its comment. Functions and triggers are commented in their
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

-- Columns of the hot tables (an archived_* table's columns mean what they mean in its hot table).
COMMENT ON COLUMN ordergate.orders.order_no IS 'The shop''s order number: 1..64 of [A-Za-z0-9._:-], unique across hot and archived orders';
COMMENT ON COLUMN ordergate.orders.status IS 'pending_payment, then paid or cancelled, once (the guard triggers)';
COMMENT ON COLUMN ordergate.orders.amount_cents IS 'What the buyer owes; a payment of another amount is amount_mismatch';
COMMENT ON COLUMN ordergate.orders.coupon_id IS 'The coupon the order holds (locked while pending, used once paid), NULL for none';
COMMENT ON COLUMN ordergate.orders.expire_at IS 'The deadline: a timeout cancel claims the order only from then on; hold_for_payment pushes it out';
COMMENT ON COLUMN ordergate.orders.original_expire_at IS 'The deadline as placed: holds never go beyond it plus max_hold_seconds';
COMMENT ON COLUMN ordergate.orders.created_at IS 'When the order was placed';
COMMENT ON COLUMN ordergate.orders.closed_at IS 'When the order left pending_payment (NULL while pending)';
COMMENT ON COLUMN ordergate.orders.shop IS 'The shop''s own data (a JSON object), copied into every event of the order; never read by ordergate';
COMMENT ON COLUMN ordergate.order_items.order_no IS 'The order';
COMMENT ON COLUMN ordergate.order_items.sku IS 'The stock keeping unit (inventory)';
COMMENT ON COLUMN ordergate.order_items.qty IS 'Units reserved by the order, given back if it is cancelled';
COMMENT ON COLUMN ordergate.inventory.sku IS 'The stock keeping unit: 1..128 characters';
COMMENT ON COLUMN ordergate.inventory.available IS 'Units still sellable (never below zero)';
COMMENT ON COLUMN ordergate.inventory.total IS 'Initial stock plus every later add_stock (defaults to available on insert)';
COMMENT ON COLUMN ordergate.inventory.created_at IS 'When the sku was created';
COMMENT ON COLUMN ordergate.inventory.archived_qty IS 'Units of archived paid orders (invariant 2: total = available + pending and paid lines + this)';
COMMENT ON COLUMN ordergate.coupons.coupon_id IS 'The coupon: 1..128 characters';
COMMENT ON COLUMN ordergate.coupons.state IS 'available, locked (by a pending order) or used (by a paid one)';
COMMENT ON COLUMN ordergate.coupons.created_at IS 'When the coupon was created';
COMMENT ON COLUMN ordergate.status_log.order_no IS 'The order: one row per order at most (its one transition)';
COMMENT ON COLUMN ordergate.status_log.id IS 'Insertion order, for readers';
COMMENT ON COLUMN ordergate.status_log.from_status IS 'pending_payment';
COMMENT ON COLUMN ordergate.status_log.to_status IS 'paid or cancelled';
COMMENT ON COLUMN ordergate.status_log.source IS 'Who moved it: timeout_consumer, timeout_scanner, payment_callback or manual';
COMMENT ON COLUMN ordergate.status_log.idempotency_key IS 'A cancel: the order number; a payment: the transaction number that paid it';
COMMENT ON COLUMN ordergate.status_log.actor IS 'The operator (manual), else the client''s application_name, else its login role';
COMMENT ON COLUMN ordergate.status_log.note IS 'close_order: the operator''s reason';
COMMENT ON COLUMN ordergate.status_log.created_at IS 'When the transition was written';
COMMENT ON COLUMN ordergate.payments.txn_no IS 'The channel''s transaction number: the idempotency key of claim_payment';
COMMENT ON COLUMN ordergate.payments.order_no IS 'The order it paid for (no foreign key: payments for unknown orders are recorded too)';
COMMENT ON COLUMN ordergate.payments.amount_cents IS 'The amount paid';
COMMENT ON COLUMN ordergate.payments.channel IS 'The payment channel, as the callback named it';
COMMENT ON COLUMN ordergate.payments.outcome IS 'The first claim''s outcome (processing only inside the claiming transaction)';
COMMENT ON COLUMN ordergate.payments.created_at IS 'When the payment was first claimed';
COMMENT ON COLUMN ordergate.exceptions.id IS 'The exception''s number (resolve_exception, record_refund)';
COMMENT ON COLUMN ordergate.exceptions.order_no IS 'The order the payment named ('''' when a refused message named none)';
COMMENT ON COLUMN ordergate.exceptions.kind IS 'late_payment, double_payment, amount_mismatch, unknown_order or refused_payment';
COMMENT ON COLUMN ordergate.exceptions.txn_no IS 'The payment''s transaction number (NULL for refused_payment)';
COMMENT ON COLUMN ordergate.exceptions.amount_cents IS 'The amount of the payment that needs the follow-up';
COMMENT ON COLUMN ordergate.exceptions.resolution IS 'auto_refund (within auto_refund_limit_cents) or manual_review';
COMMENT ON COLUMN ordergate.exceptions.state IS 'open, resolved (by an operator) or refunded (a refund succeeded)';
COMMENT ON COLUMN ordergate.exceptions.note IS 'What happened, for the person who follows it up';
COMMENT ON COLUMN ordergate.exceptions.created_at IS 'When the exception was recorded';
COMMENT ON COLUMN ordergate.exceptions.resolved_at IS 'When it was resolved or refunded';
COMMENT ON COLUMN ordergate.exceptions.resolved_by IS 'Who resolved it';
COMMENT ON COLUMN ordergate.exceptions.refused_key IS 'refused_payment only: txn:<txn_no> or msg:<source>#<sha256>, unique';
COMMENT ON COLUMN ordergate.exceptions.detached IS 'Written for an order not in orders (archived, unknown, none): archive() finds it by this';
COMMENT ON COLUMN ordergate.refunds.refund_ref IS 'The payment side''s refund reference: the idempotency key of record_refund';
COMMENT ON COLUMN ordergate.refunds.txn_no IS 'The transaction number of the payment refunded';
COMMENT ON COLUMN ordergate.refunds.exception_id IS 'The exception whose refund this is';
COMMENT ON COLUMN ordergate.refunds.outcome IS 'succeeded or failed';
COMMENT ON COLUMN ordergate.refunds.actor IS 'Who reported it: the client''s application_name, else its login role';
COMMENT ON COLUMN ordergate.refunds.recorded_at IS 'When it was reported';
COMMENT ON COLUMN ordergate.outbox.id IS 'Insertion order: the relay publishes oldest first';
COMMENT ON COLUMN ordergate.outbox.event_type IS 'order_cancelled, order_paid, refund_requested, reconciliation_alert or cancel_scheduled';
COMMENT ON COLUMN ordergate.outbox.order_no IS 'The order the event is about';
COMMENT ON COLUMN ordergate.outbox.payload IS 'The message, stored as written and published byte for byte';
COMMENT ON COLUMN ordergate.outbox.created_at IS 'When the event was written';
COMMENT ON COLUMN ordergate.outbox.published_at IS 'When the broker acknowledged it (NULL: not yet)';
COMMENT ON COLUMN ordergate.outbox.detached IS 'Written for an order not in orders (archived, unknown): archive() finds it by this';
COMMENT ON COLUMN ordergate.outbox.quarantined_at IS 'When the relay set it aside as unpublishable (NULL: not quarantined)';
COMMENT ON COLUMN ordergate.outbox.quarantine_reason IS 'Why the relay set it aside';
COMMENT ON COLUMN ordergate.settings.key IS 'The setting''s name (set_setting lists the known ones)';
COMMENT ON COLUMN ordergate.settings.value IS 'Its value, as text';
COMMENT ON COLUMN ordergate.hooks.id IS 'Registration order: the order the hooks of one event run in';
COMMENT ON COLUMN ordergate.hooks.event IS 'cancelled, paid or late_payment';
COMMENT ON COLUMN ordergate.hooks.fn IS 'The hook function''s OID as registered';
COMMENT ON COLUMN ordergate.hooks.fn_name IS 'Its signature as registered, to name it even after it is dropped';
COMMENT ON COLUMN ordergate.hooks.created_at IS 'When it was registered';
COMMENT ON COLUMN ordergate.hooks.created_by IS 'Who registered it';
COMMENT ON COLUMN ordergate.hooks.opname IS 'The operator in ordergate_hooks that binds the function by OID';
COMMENT ON COLUMN ordergate.hooks.fingerprint IS 'What add_hook checked; a call refuses a hook whose function changed since';
COMMENT ON COLUMN ordergate.scanner_runs.run_id IS 'The run';
COMMENT ON COLUMN ordergate.scanner_runs.status IS 'running, done, failed, skipped or crashed';
COMMENT ON COLUMN ordergate.scanner_runs.started_at IS 'When the run started';
COMMENT ON COLUMN ordergate.scanner_runs.finished_at IS 'When it ended';
COMMENT ON COLUMN ordergate.scanner_runs.duration_ms IS 'How long it ran';
COMMENT ON COLUMN ordergate.scanner_runs.progress_at IS 'Its last progress (counters and checkpoint)';
COMMENT ON COLUMN ordergate.scanner_runs.host IS 'The scanner''s host';
COMMENT ON COLUMN ordergate.scanner_runs.os_pid IS 'The scanner''s process id';
COMMENT ON COLUMN ordergate.scanner_runs.backend_pid IS 'The database backend that started it';
COMMENT ON COLUMN ordergate.scanner_runs.actor IS 'The client''s application_name, else its login role';
COMMENT ON COLUMN ordergate.scanner_runs.grace IS 'Setting: how long past its deadline an order is left to the consumer';
COMMENT ON COLUMN ordergate.scanner_runs.batch_size IS 'Setting: orders per claim_cancel call';
COMMENT ON COLUMN ordergate.scanner_runs.max_orders IS 'Setting: the most orders one run sweeps (0: no cap)';
COMMENT ON COLUMN ordergate.scanner_runs.max_seconds IS 'Setting: the longest one run sweeps (0: no cap)';
COMMENT ON COLUMN ordergate.scanner_runs.batches IS 'claim_cancel calls so far';
COMMENT ON COLUMN ordergate.scanner_runs.scanned IS 'Overdue orders found so far';
COMMENT ON COLUMN ordergate.scanner_runs.cancelled IS 'Orders this run cancelled: the consumer missed them (the alarm)';
COMMENT ON COLUMN ordergate.scanner_runs.already_cancelled IS 'Answered already_cancelled';
COMMENT ON COLUMN ordergate.scanner_runs.already_paid IS 'Answered already_paid';
COMMENT ON COLUMN ordergate.scanner_runs.not_due IS 'Answered not_due (held meanwhile)';
COMMENT ON COLUMN ordergate.scanner_runs.not_found IS 'Answered not_found';
COMMENT ON COLUMN ordergate.scanner_runs.checkpoint_expire_at IS 'Keyset position after the last finished batch: its deadline';
COMMENT ON COLUMN ordergate.scanner_runs.checkpoint_order_no IS 'Keyset position after the last finished batch: its order number';
COMMENT ON COLUMN ordergate.scanner_runs.stop_reason IS 'complete, max_orders, max_seconds, stopped, lock_held, error or crashed';
COMMENT ON COLUMN ordergate.scanner_runs.detail IS 'Error message, lock holder or crash report';
COMMENT ON COLUMN ordergate.scanner_runs.reported_by IS 'A crashed run: the run that found it';
COMMENT ON COLUMN ordergate.scanner_runs.busy IS 'Answered busy (retried later in the run)';
COMMENT ON COLUMN ordergate.scanner_runs.hook_failed IS 'Orders whose claim a failing hook undid (skipped)';
COMMENT ON COLUMN ordergate.scanner_runs.lease IS 'How far each renewal moves the sweep lease''s expiry';
COMMENT ON COLUMN ordergate.scanner_runs.run_token IS 'Drawn by the scanner per run: a repeated start finds its own run';
COMMENT ON COLUMN ordergate.scanner_lease.singleton IS 'Always true: one lease';
COMMENT ON COLUMN ordergate.scanner_lease.run_id IS 'The run holding the lease, NULL when free';
COMMENT ON COLUMN ordergate.scanner_lease.taken_at IS 'When it was taken';
COMMENT ON COLUMN ordergate.scanner_lease.expires_at IS 'Past this, its holder counts as crashed';
COMMENT ON COLUMN ordergate.schema_migrations.version IS 'The migration''s number (NNN)';
COMMENT ON COLUMN ordergate.schema_migrations.applied_at IS 'When it was applied';
COMMENT ON COLUMN ordergate.schema_migrations.checksum IS 'The sha256 of its file, hex (NULL after install.sql until ordergatectl migrate)';
COMMENT ON COLUMN ordergate.schema_functions.file IS 'The function file''s name, NAME.sql (whatever its group folder)';
COMMENT ON COLUMN ordergate.schema_functions.checksum IS 'The sha256 of the file as last applied, hex';
COMMENT ON COLUMN ordergate.schema_functions.applied_at IS 'When it was last applied';

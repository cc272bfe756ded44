-- install.sql: a fresh install with plain psql, for shops that review and apply SQL with their
-- own tools. One transaction; refuses a database that already has the schema.
--
--   psql -v ON_ERROR_STOP=1 -f schema/install.sql
--
-- It lists every file of migrations/ and functions/ (the schema dump test fails when one is
-- missing). It records the migrations without checksums; the next `ordergatectl migrate` adopts
-- them and re-applies the functions once. Upgrades are ordergatectl migrate's (schema/README.md).
\set ON_ERROR_STOP on
BEGIN;
\ir migrations/001_core.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('001');
RESET ROLE;
\ir migrations/002_adoption.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('002');
RESET ROLE;
\ir migrations/003_refused_payment.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('003');
RESET ROLE;
\ir migrations/004_busy.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('004');
RESET ROLE;
\ir migrations/005_hook_failed.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('005');
RESET ROLE;
\ir migrations/006_scanner_lease.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('006');
RESET ROLE;
\ir migrations/007_retention.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('007');
RESET ROLE;
\ir migrations/008_shop_data.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('008');
RESET ROLE;
\ir migrations/009_archive_detached.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('009');
RESET ROLE;
\ir migrations/010_hook_identity.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('010');
RESET ROLE;
\ir migrations/011_outbox_quarantine.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('011');
RESET ROLE;
\ir migrations/012_archived_identity.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('012');
RESET ROLE;
\ir migrations/013_roles.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('013');
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;
-- Bodies are checked when called (and by the tests, which call every function): a SQL
-- function may name one whose file comes later.
SET LOCAL check_function_bodies = off;
\ir functions/_actor.sql
\ir functions/_archiving.sql
\ir functions/_bad_arg.sql
\ir functions/_cancel_claim.sql
\ir functions/_cancel_effects.sql
\ir functions/_cancel_message.sql
\ir functions/_cancel_restock.sql
\ir functions/_ctl_iso.sql
\ir functions/_hook_inspect.sql
\ir functions/_hooks_run.sql
\ir functions/_order_items_json.sql
\ir functions/_scanner_lease_max.sql
\ir functions/_scanner_lock_holder.sql
\ir functions/_scanner_run_resume.sql
\ir functions/_setting_bigint.sql
\ir functions/add_coupon.sql
\ir functions/add_hook.sql
\ir functions/add_stock.sql
\ir functions/archive.sql
\ir functions/claim_cancel.sql
\ir functions/claim_payment.sql
\ir functions/close_order.sql
\ir functions/detached_mark.sql
\ir functions/drop_hook.sql
\ir functions/due_times.sql
\ir functions/exception_list.sql
\ir functions/exceptions_open_count.sql
\ir functions/exceptions_overdue.sql
\ir functions/hold_for_payment.sql
\ir functions/inventory_defaults.sql
\ir functions/order_report.sql
\ir functions/orders_closed_at.sql
\ir functions/orders_guard.sql
\ir functions/outbox_backlog.sql
\ir functions/outbox_lock_batch.sql
\ir functions/outbox_mark_published.sql
\ir functions/outbox_oldest_age.sql
\ir functions/outbox_quarantine.sql
\ir functions/outbox_quarantine_count.sql
\ir functions/outbox_quarantine_list.sql
\ir functions/outbox_release.sql
\ir functions/place_order.sql
\ir functions/reconcile.sql
\ir functions/reconcile_repair.sql
\ir functions/record_payment_refused.sql
\ir functions/record_refund.sql
\ir functions/resolve_exception.sql
\ir functions/scan_overdue.sql
\ir functions/scan_overdue_count.sql
\ir functions/scanner_lock_key.sql
\ir functions/scanner_run_finish.sql
\ir functions/scanner_run_progress.sql
\ir functions/scanner_run_start.sql
\ir functions/scanner_sweep_status.sql
\ir functions/set_setting.sql
\ir functions/status_log_append_only.sql
COMMIT;

-- install.sql: a fresh install with plain psql, for shops that review and apply SQL with their
-- own tools. One transaction; refuses a database that already has the schema.
--
--   psql -v ON_ERROR_STOP=1 -f schema/install.sql
--
-- It lists every file of migrations/ and of functions/' groups (functions/GROUP/NAME.sql; the
-- schema dump test fails when one is missing). It records the migrations without checksums; the next `ordergatectl migrate` adopts
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
RESET ROLE;
\ir migrations/014_comments.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('014');
RESET ROLE;
\ir migrations/015_money.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('015');
RESET ROLE;
\ir migrations/016_charges.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('016');
RESET ROLE;
\ir migrations/017_life.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('017');
RESET ROLE;
\ir migrations/018_hooks.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('018');
RESET ROLE;
\ir migrations/019_reminders.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('019');
RESET ROLE;
\ir migrations/020_console.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('020');
RESET ROLE;
\ir migrations/022_reconcile_runs.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('022');
RESET ROLE;
\ir migrations/023_console_cancel_minutes.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('023');
RESET ROLE;
\ir migrations/024_outbox_order_index.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('024');
RESET ROLE;
\ir migrations/025_outbox_identity.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('025');
RESET ROLE;
\ir migrations/026_orders_row_checks.sql
INSERT INTO ordergate.schema_migrations (version) VALUES ('026');
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;
-- Bodies are checked when called (and by the tests, which call every function): a SQL
-- function may name one whose file comes later.
SET LOCAL check_function_bodies = off;
-- the gate: every state change of an order, and what its callers read
\ir functions/gate/amend_order.sql
\ir functions/gate/begin_charge.sql
\ir functions/gate/charge_failed.sql
\ir functions/gate/claim_cancel.sql
\ir functions/gate/claim_reminder.sql
\ir functions/gate/claim_payment.sql
\ir functions/gate/close_order.sql
\ir functions/gate/due_times.sql
\ir functions/gate/exception_list.sql
\ir functions/gate/hold_for_payment.sql
\ir functions/gate/order_report.sql
\ir functions/gate/place_order.sql
\ir functions/gate/record_payment_refused.sql
\ir functions/gate/record_refund.sql
\ir functions/gate/release_order.sql
\ir functions/gate/set_deadline.sql
-- admin: stock, coupons, settings, hooks, exceptions, retention (ordergate_admin)
\ir functions/admin/add_check.sql
\ir functions/admin/add_coupon.sql
\ir functions/admin/add_hook.sql
\ir functions/admin/add_stock.sql
\ir functions/admin/archive.sql
\ir functions/admin/drop_check.sql
\ir functions/admin/drop_hook.sql
\ir functions/admin/outbox_release.sql
\ir functions/admin/resolve_exception.sql
\ir functions/admin/set_setting.sql
-- the operator's console (ordergate-console), run as each person's own login
\ir functions/console/console_audit_list.sql
\ir functions/console/console_close.sql
\ir functions/console/console_exception.sql
\ir functions/console/console_exceptions.sql
\ir functions/console/console_order.sql
\ir functions/console/console_orders.sql
\ir functions/console/console_overview.sql
\ir functions/console/console_refund.sql
\ir functions/console/console_resolve.sql
\ir functions/console/console_set_setting.sql
\ir functions/console/console_settings.sql
\ir functions/console/console_whoami.sql
-- the scanner: the sweep, its run log and lease, reconcile
\ir functions/scanner/exceptions_open_count.sql
\ir functions/scanner/exceptions_overdue.sql
\ir functions/scanner/reconcile.sql
\ir functions/scanner/reconcile_repair.sql
\ir functions/scanner/reconcile_run_record.sql
\ir functions/scanner/scan_overdue.sql
\ir functions/scanner/scan_reminders.sql
\ir functions/scanner/scan_overdue_count.sql
\ir functions/scanner/scanner_lock_key.sql
\ir functions/scanner/scanner_run_finish.sql
\ir functions/scanner/scanner_run_progress.sql
\ir functions/scanner/scanner_run_start.sql
\ir functions/scanner/scanner_sweep_status.sql
-- the outbox relay
\ir functions/outbox/outbox_backlog.sql
\ir functions/outbox/outbox_lock_batch.sql
\ir functions/outbox/outbox_mark_published.sql
\ir functions/outbox/outbox_oldest_age.sql
\ir functions/outbox/outbox_quarantine.sql
\ir functions/outbox/outbox_quarantine_count.sql
\ir functions/outbox/outbox_quarantine_list.sql
-- trigger functions, each with the trigger it backs
\ir functions/triggers/currency_default.sql
\ir functions/triggers/detached_mark.sql
\ir functions/triggers/inventory_defaults.sql
\ir functions/triggers/orders_closed_at.sql
\ir functions/triggers/orders_guard.sql
\ir functions/triggers/status_log_append_only.sql
-- internal helpers (_name), called only by the functions above
\ir functions/internal/_actor.sql
\ir functions/internal/_archiving.sql
\ir functions/internal/_bad_arg.sql
\ir functions/internal/_cancel_message.sql
\ir functions/internal/_cancel_orders.sql
\ir functions/internal/_cancel_orders_claim.sql
\ir functions/internal/_cancel_orders_restock.sql
\ir functions/internal/_cancel_reschedule.sql
\ir functions/internal/_charge_end.sql
\ir functions/internal/_console_audit.sql
\ir functions/internal/_console_cancels.sql
\ir functions/internal/_console_cancels_rollup.sql
\ir functions/internal/_ctl_iso.sql
\ir functions/internal/_default_currency.sql
\ir functions/internal/_hook_inspect.sql
\ir functions/internal/_hooks_run.sql
\ir functions/internal/_order_items_json.sql
\ir functions/internal/_order_items_parse.sql
\ir functions/internal/_payment_exception.sql
\ir functions/internal/_reconcile_checks.sql
\ir functions/internal/_refund_limit.sql
\ir functions/internal/_reminder_message.sql
\ir functions/internal/_scanner_lease_max.sql
\ir functions/internal/_scanner_lock_holder.sql
\ir functions/internal/_scanner_run_resume.sql
\ir functions/internal/_setting_bigint.sql
COMMIT;

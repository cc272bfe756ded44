-- 013_roles.sql: one role per kind of caller instead of one role for every caller, and the
-- scanner's run token.
--
-- Until now every order service, the consumer, the scanner and the relay logged in as members
-- of ordergate_service, which could execute every gate, outbox and scanner function: an order
-- service could record a refund that never happened (record_refund), mark events published
-- that were never sent (outbox_mark_published) or hold the sweep lease for as long as it
-- liked (scanner_run_start). Each kind of caller now has its own NOLOGIN role, and each
-- function file grants EXECUTE to the roles whose callers need it (schema/README.md, "Roles"):
--   ordergate_order_service  place_order, claim_payment, hold_for_payment, close_order and the
--                            read-only order_report, exception_list; SELECT on every table
--                            (order services read the tables: the contract says so)
--   ordergate_trigger        claim_cancel, due_times, record_payment_refused (the consumer);
--                            scan_overdue*, scanner_run_*, scanner_sweep_status,
--                            scanner_lock_key, reconcile, reconcile_repair, exceptions_*
--                            (the scanner). No table: its binaries read only through functions
--   ordergate_relay          outbox_lock_batch, outbox_mark_published, outbox_backlog,
--                            outbox_oldest_age. No table
--   ordergate_refunds        record_refund. No table
-- ordergate_admin is granted all four (it may do everything a service may, as before).
--
-- ordergate_service is deprecated: it keeps USAGE and its table SELECT grants and is granted
-- the four roles above, so login roles that are its members keep working for one release. It
-- loses its direct EXECUTE grants here (the function files grant the new roles instead; the run
-- re-applies every function file after a migration), and is dropped in the next release: move
-- each login role to its narrow role before then (schema/README.md, "Moving off
-- ordergate_service").
--
-- The sweep's run token: scanner_run_start takes a token the scanner draws at random for each
-- run, stored with the run, so that a start repeated after a lost reply finds its own run and
-- resumes it instead of being skipped by its own lease (scanner_run_start.sql). Its old
-- signature is dropped here; its function file creates the new one (the token last, NULL by
-- default, so a scanner of the previous release still calls it).

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_order_service') THEN
        CREATE ROLE ordergate_order_service NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_trigger') THEN
        CREATE ROLE ordergate_trigger NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_relay') THEN
        CREATE ROLE ordergate_relay NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ordergate_refunds') THEN
        CREATE ROLE ordergate_refunds NOLOGIN;
    END IF;
    -- The deprecated role and the admin hold every narrow role. Role names are constants here.
    IF NOT pg_has_role('ordergate_service', 'ordergate_order_service', 'MEMBER') THEN
        GRANT ordergate_order_service TO ordergate_service;
    END IF;
    IF NOT pg_has_role('ordergate_service', 'ordergate_trigger', 'MEMBER') THEN
        GRANT ordergate_trigger TO ordergate_service;
    END IF;
    IF NOT pg_has_role('ordergate_service', 'ordergate_relay', 'MEMBER') THEN
        GRANT ordergate_relay TO ordergate_service;
    END IF;
    IF NOT pg_has_role('ordergate_service', 'ordergate_refunds', 'MEMBER') THEN
        GRANT ordergate_refunds TO ordergate_service;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_auth_members m
                    WHERE m.member = 'ordergate_admin'::regrole
                      AND m.roleid = 'ordergate_order_service'::regrole) THEN
        GRANT ordergate_order_service TO ordergate_admin;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_auth_members m
                    WHERE m.member = 'ordergate_admin'::regrole
                      AND m.roleid = 'ordergate_trigger'::regrole) THEN
        GRANT ordergate_trigger TO ordergate_admin;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_auth_members m
                    WHERE m.member = 'ordergate_admin'::regrole
                      AND m.roleid = 'ordergate_relay'::regrole) THEN
        GRANT ordergate_relay TO ordergate_admin;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_auth_members m
                    WHERE m.member = 'ordergate_admin'::regrole
                      AND m.roleid = 'ordergate_refunds'::regrole) THEN
        GRANT ordergate_refunds TO ordergate_admin;
    END IF;
END
$roles$;

SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

GRANT USAGE ON SCHEMA ordergate
    TO ordergate_order_service, ordergate_trigger, ordergate_relay, ordergate_refunds;
GRANT SELECT ON ALL TABLES IN SCHEMA ordergate TO ordergate_order_service;

-- The function files grant EXECUTE to the narrow roles; what the deprecated role held directly
-- goes (it keeps every function through its memberships). No function file has run yet in a
-- fresh install, so this changes something only in an upgraded database.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA ordergate FROM ordergate_service;

-- The run token (scanner_run_start.sql): one run per token.
ALTER TABLE ordergate.scanner_runs ADD COLUMN run_token text NULL;
CREATE UNIQUE INDEX scanner_runs_token_uq ON ordergate.scanner_runs (run_token)
    WHERE run_token IS NOT NULL;

-- The lease is bounded (_scanner_lease_max.sql: 70 minutes): a lease taken before this release
-- for longer ends by then at the latest, and a run still renewing it renews by at most that.
UPDATE ordergate.scanner_lease l
   SET expires_at = least(l.expires_at, clock_timestamp() + interval '70 minutes')
 WHERE l.expires_at IS NOT NULL;
UPDATE ordergate.scanner_runs r SET lease = interval '70 minutes'
 WHERE r.status = 'running' AND r.lease > interval '70 minutes';

DROP FUNCTION IF EXISTS ordergate.scanner_run_start(interval, int, int, int, text, int, interval);

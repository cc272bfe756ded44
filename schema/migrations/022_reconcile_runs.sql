-- 022_reconcile_runs.sql: a record of each reconciliation (ordergate-scanner --reconcile), so that
-- the last one and its result can be read without the scanner's output or metrics (the console's
-- overview shows it). Written only through reconcile_run_record (functions/scanner/), one row per
-- run; finished runs older than archive()'s cut-off are deleted by archive(), the newest kept, as
-- scanner_runs are.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

CREATE TABLE ordergate.reconcile_runs (
    run_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    since       timestamptz,
    result      text NOT NULL CHECK (result IN ('clean', 'violated', 'failed')),
    violations  jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(violations) = 'object'),
    repaired    bigint NOT NULL DEFAULT 0 CHECK (repaired >= 0),
    actor       text NOT NULL,
    detail      text
);
COMMENT ON TABLE ordergate.reconcile_runs IS
    'One row per reconciliation run (ordergate-scanner --reconcile): when, over what, its result';
COMMENT ON COLUMN ordergate.reconcile_runs.run_id IS 'Identity, in the order runs were recorded';
COMMENT ON COLUMN ordergate.reconcile_runs.started_at IS 'When the scanner began the run';
COMMENT ON COLUMN ordergate.reconcile_runs.finished_at IS 'When the run was recorded (the database clock)';
COMMENT ON COLUMN ordergate.reconcile_runs.since IS 'The orders checked: placed since this; NULL = every order';
COMMENT ON COLUMN ordergate.reconcile_runs.result IS
    'clean (everything holds), violated (an invariant or shop check does not) or failed (the check could not run)';
COMMENT ON COLUMN ordergate.reconcile_runs.violations IS
    'Violations by invariant number ("5") and shop check ("shop:NAME"; -1 = the check failed), every one checked';
COMMENT ON COLUMN ordergate.reconcile_runs.repaired IS 'Missing late-payment exceptions the run created';
COMMENT ON COLUMN ordergate.reconcile_runs.actor IS 'The client''s application_name, else its login role';
COMMENT ON COLUMN ordergate.reconcile_runs.detail IS 'Why a failed run failed';
GRANT SELECT ON ordergate.reconcile_runs TO ordergate_order_service, ordergate_service;

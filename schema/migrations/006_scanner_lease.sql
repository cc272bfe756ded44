-- 006_scanner_lease.sql: the sweep's run lock is a lease row with an expiry instead of a
-- session-level advisory lock, so that it does not depend on a database session. Behind a
-- transaction-pooling PgBouncer the server connection changes between transactions: a session
-- lock would stay on a pooled server connection after the run (every later run skipped), and
-- the run would lose it whenever its next transaction landed elsewhere.
--   scanner_run_start takes the lease (or skips while another run's lease has not expired),
--   scanner_run_progress renews it after every batch, scanner_run_finish releases it; a
--   'running' run whose lease expired is reported 'crashed' by the next run that takes it.
-- The advisory key (scanner_lock_key) stays the operator's pause: a session that holds it
-- keeps every run skipped (runs try it for their own transaction only).
-- scanner_run_start gains the lease's length as its last parameter: its old signature is
-- dropped here, its function file creates the new one.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

CREATE TABLE ordergate.scanner_lease (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),  -- one sweep lease
    run_id     bigint NULL,        -- the run holding it; NULL when free
    taken_at   timestamptz NULL,
    expires_at timestamptz NULL    -- past this, the holder counts as crashed
);
INSERT INTO ordergate.scanner_lease DEFAULT VALUES;
GRANT SELECT ON ordergate.scanner_lease TO ordergate_service;

ALTER TABLE ordergate.scanner_runs
    ADD COLUMN lease interval NULL;  -- how far each renewal moves the lease's expiry

DROP FUNCTION IF EXISTS ordergate.scanner_run_start(interval, int, int, int, text, int);

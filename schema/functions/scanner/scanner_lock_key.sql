-- The advisory lock key of the sweep ('ogscan' 0x0001 as a bigint). Runs try it for the
-- transaction of scanner_run_start only (their run lock is the lease, scanner_lease); operators
-- and tests can hold it to pause sweeps, on a direct connection (not through a transaction
-- pooler): SELECT pg_advisory_lock(ordergate.scanner_lock_key());
CREATE OR REPLACE FUNCTION ordergate.scanner_lock_key() RETURNS bigint
LANGUAGE sql IMMUTABLE SET search_path = ordergate, pg_temp AS $$
    SELECT 8027511731484753921::bigint
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_lock_key() TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.scanner_lock_key() IS
    'The advisory lock key an operator holds to pause sweeps';

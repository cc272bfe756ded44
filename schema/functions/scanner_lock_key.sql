-- The advisory lock key of the sweep ('ogscan' 0x0001 as a bigint). Operators and tests can hold
-- it to pause sweeps: SELECT pg_advisory_lock(ordergate.scanner_lock_key());
CREATE OR REPLACE FUNCTION ordergate.scanner_lock_key() RETURNS bigint
LANGUAGE sql IMMUTABLE SET search_path = ordergate, pg_temp AS $$
    SELECT 8027511731484753921::bigint
$$;

GRANT EXECUTE ON FUNCTION ordergate.scanner_lock_key() TO ordergate_service;

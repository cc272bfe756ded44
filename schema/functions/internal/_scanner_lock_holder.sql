-- Backend pid holding the sweep lock in this database, NULL when free. pg_locks shows a bigint
-- advisory key as classid = high 32 bits, objid = low 32 bits, objsubid = 1.
CREATE OR REPLACE FUNCTION ordergate._scanner_lock_holder() RETURNS int
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT l.pid
      FROM pg_catalog.pg_locks l
     WHERE l.locktype = 'advisory'
       AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
       AND l.classid = (ordergate.scanner_lock_key() >> 32)::oid
       AND l.objid = (ordergate.scanner_lock_key() & 4294967295)::oid
       AND l.objsubid = 1
       AND l.granted
     LIMIT 1
$$;
COMMENT ON FUNCTION ordergate._scanner_lock_holder() IS
    'Internal: the backend holding the sweep lock''s advisory key, NULL when free';

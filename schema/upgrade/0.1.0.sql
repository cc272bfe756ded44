-- upgrade/0.1.0.sql: converts a database made by ordergate 0.1.0's numbered scripts (001_core to
-- 006_ctl, with or without 007_cancel_fast) to the layout of migrations/ and functions/.
--
-- Run by `ordergatectl migrate`, which detects such a database (schema_migrations without a
-- checksum column), inside the run's one transaction: after this file the run applies every
-- function file, so the functions dropped here exist again when it commits, and a failure
-- anywhere leaves the 0.1.0 database as it was. Tables, indexes and data are kept; the result
-- dumps the same schema as a fresh install (tests/sql/schema_upgrade.sh checks it).

SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

DO $check$
DECLARE
    v_missing text;
BEGIN
    SELECT string_agg(v, ', ' ORDER BY v) INTO v_missing
      FROM unnest(ARRAY['001', '002', '003', '004', '005', '006']) v
     WHERE NOT EXISTS (SELECT 1 FROM ordergate.schema_migrations m WHERE m.version = v);
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'ordergate: this 0.1.0 database lacks migrations %; apply them with 0.1.0 first',
            v_missing USING ERRCODE = 'OG000';
    END IF;
END
$check$;

-- What 007_cancel_fast changed in a table, for a database that never ran it: the outbox payload is
-- stored as json (published byte for byte; cheaper to write than jsonb).
DO $outbox$
BEGIN
    IF (SELECT a.atttypid FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = 'ordergate.outbox'::regclass AND a.attname = 'payload') = 'jsonb'::regtype THEN
        ALTER TABLE ordergate.outbox
            ALTER COLUMN payload DROP DEFAULT,
            ALTER COLUMN payload TYPE json USING payload::json,
            ALTER COLUMN payload SET DEFAULT '{}'::json;
    END IF;
END
$outbox$;

-- Every function goes (CASCADE takes the triggers they back); functions/ creates them again.
-- The names come from the catalog, not from any input.
DO $functions$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'ordergate'::regnamespace
    LOOP
        EXECUTE format('DROP FUNCTION %s CASCADE', v_fn);
    END LOOP;
END
$functions$;

-- 0.1.0 revoked EXECUTE from PUBLIC function by function; the function files rely on the owner's
-- default privileges instead (migrations/001_core.sql).
ALTER DEFAULT PRIVILEGES FOR ROLE ordergate_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- The bookkeeping of migrations/001_core.sql. 0.1.0's 002..007 are folded into 001.
ALTER TABLE ordergate.schema_migrations ADD COLUMN checksum text NULL;
CREATE TABLE ordergate.schema_functions (
    file       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON ordergate.schema_functions FROM PUBLIC;
GRANT SELECT ON ordergate.schema_functions TO ordergate_service;
DELETE FROM ordergate.schema_migrations WHERE version <> '001';

-- _archiving: true only inside ordergate.archive(), in the transaction that runs it. The
-- append-only trigger of status_log and the DELETE guard of orders let archive() move closed
-- history and refuse every other writer, superusers included, as before.
--
-- Two conditions, both needed: the current role is ordergate_owner (the SECURITY DEFINER context
-- of archive(); the role is NOLOGIN and granted only to the migrating role), and the
-- transaction-local setting ordergate.archiving names the current transaction id (archive() sets
-- it with set_config(..., true) and clears it before it returns). Anyone may set a custom setting,
-- but without the owner role it admits nothing, and a value left over from another transaction
-- never matches. A superuser can drop the trigger anyway: this guards against mistakes, as OG004
-- always has, not against the cluster's administrator.
CREATE OR REPLACE FUNCTION ordergate._archiving() RETURNS boolean
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT current_user = 'ordergate_owner'
           AND coalesce(current_setting('ordergate.archiving', true), '') = pg_current_xact_id()::text
$$;
COMMENT ON FUNCTION ordergate._archiving() IS
    'Internal: true only inside archive(), which alone may delete closed history';

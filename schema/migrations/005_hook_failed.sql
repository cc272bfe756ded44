-- 005_hook_failed.sql: the scanner's run log counts the orders whose claim a registered hook
-- failed (add_hook; the claim of that order was rolled back and the run went on without it).
-- scanner_run_progress and scanner_run_finish gain the counter as their last parameter: their
-- old signatures are dropped here, the function files create the new ones.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.scanner_runs
    ADD COLUMN hook_failed bigint NOT NULL DEFAULT 0;  -- a hook failed their claim (skipped)

DROP FUNCTION IF EXISTS ordergate.scanner_run_progress(bigint, int, bigint, bigint, bigint, bigint,
                                                       bigint, bigint, timestamptz, text, bigint);
DROP FUNCTION IF EXISTS ordergate.scanner_run_finish(bigint, text, text, text, int, bigint, bigint,
                                                     bigint, bigint, bigint, bigint, timestamptz,
                                                     text, bigint);

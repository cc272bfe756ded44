-- 004_busy.sql: the scanner's run log counts the claim outcome busy (a due order whose row
-- another transaction held locked; claim_cancel answers it instead of waiting, schema/README.md).
-- scanner_run_progress and scanner_run_finish gain the counter as their last parameter: their
-- old signatures are dropped here, the function files create the new ones.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.scanner_runs
    ADD COLUMN busy bigint NOT NULL DEFAULT 0;  -- answered busy (retried later in the run)

DROP FUNCTION IF EXISTS ordergate.scanner_run_progress(bigint, int, bigint, bigint, bigint, bigint,
                                                       bigint, bigint, timestamptz, text);
DROP FUNCTION IF EXISTS ordergate.scanner_run_finish(bigint, text, text, text, int, bigint, bigint,
                                                     bigint, bigint, bigint, bigint, timestamptz,
                                                     text);

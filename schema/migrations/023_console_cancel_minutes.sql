-- 023_console_cancel_minutes.sql: the cancels of each finished minute by source, counted once,
-- so that the console's overview reads sixty small rows instead of every cancel of the last hour
-- (at 60,000 cancels an hour that read was most of the overview's time). Written only by
-- _console_cancels_rollup (functions/internal/), which the scanner's sweep calls as it finishes,
-- off the claim path: no cancel writes here, and no index was added to orders or status_log.
-- The overview counts the minutes not rolled up yet from orders itself, so a gate without a
-- scanner shows the same figures, only slower. Rows older than a day are deleted by the rollup.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

CREATE TABLE ordergate.console_cancel_minutes (
    minute    timestamptz PRIMARY KEY,
    consumer  integer NOT NULL CHECK (consumer >= 0),
    scanner   integer NOT NULL CHECK (scanner >= 0),
    manual    integer NOT NULL CHECK (manual >= 0),
    rolled_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE ordergate.console_cancel_minutes IS
    'Cancels per finished minute by source, for the console''s overview (written by the scanner''s sweep)';
COMMENT ON COLUMN ordergate.console_cancel_minutes.minute IS
    'The minute (its start): orders cancelled with closed_at in it; every minute rolled has a row, zeros too';
COMMENT ON COLUMN ordergate.console_cancel_minutes.consumer IS 'Cancelled by the consumer (timeout_consumer)';
COMMENT ON COLUMN ordergate.console_cancel_minutes.scanner IS 'Cancelled by the scanner (timeout_scanner)';
COMMENT ON COLUMN ordergate.console_cancel_minutes.manual IS 'Cancelled by hand (close_order, the console)';
COMMENT ON COLUMN ordergate.console_cancel_minutes.rolled_at IS 'When the minute was counted';
GRANT SELECT ON ordergate.console_cancel_minutes TO ordergate_order_service, ordergate_service;

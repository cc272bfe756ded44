-- 011_outbox_quarantine.sql: an outbox event that can never be published is set aside, and a
-- deadline the cancel messages cannot carry is refused.
--
-- quarantined_at / quarantine_reason: set by outbox_quarantine (the relay) when an event can
-- never be published as it is: a cancel_scheduled whose due time the cancel message cannot
-- carry, a message the broker refuses for its size. outbox_lock_batch skips such rows, so
-- everything behind them is published; they stay unpublished (published_at NULL), so archive()
-- keeps them and their order, reconcile() reports them (invariant 9), and an operator releases
-- one with outbox_release once the cause is fixed. Both columns are set or neither.
--
-- max_deadline_seconds: the farthest expire_at place_order and hold_for_payment accept, in
-- seconds from now (default 366 days); anything beyond is refused with 22023.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.outbox ADD COLUMN quarantined_at timestamptz NULL;
ALTER TABLE ordergate.outbox ADD COLUMN quarantine_reason text NULL;
ALTER TABLE ordergate.outbox ADD CONSTRAINT outbox_quarantine_check
    CHECK ((quarantined_at IS NULL) = (quarantine_reason IS NULL));
-- The quarantined events, for the gauge, ordergatectl and invariant 9 (a handful, if any).
CREATE INDEX outbox_quarantined_idx ON ordergate.outbox (id) WHERE quarantined_at IS NOT NULL;

INSERT INTO ordergate.settings (key, value) VALUES ('max_deadline_seconds', '31622400')
ON CONFLICT (key) DO NOTHING;

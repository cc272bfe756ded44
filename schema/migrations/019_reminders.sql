-- 019_reminders.sql: payment reminders (schema/README.md, "Payment reminders").
--
-- The setting reminder_before_seconds lists offsets in seconds ('300,60'; '' = none). place_order
-- writes one reminders row per offset whose due time (expire_at - offset) is still ahead; the row
-- keeps the offset only, never a due time: claim_reminder computes the due time from the order's
-- expire_at when it is called, so a hold or a deadline change rewrites nothing here (only the
-- messages that bring the claims are re-scheduled). A row leaves pending exactly once: sent (its
-- payment_reminder event written in the same transaction) or skipped (the order closed first, or
-- a payment stayed in flight up to the deadline).
--
-- orders.held_until: the end of the latest hold_for_payment (now() + seconds at the hold), so
-- that a reminder knows the buyer is on the payment page; a deadline moved by other means is not
-- a hold.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.orders ADD COLUMN held_until timestamptz NULL;
ALTER TABLE ordergate.archived_orders ADD COLUMN held_until timestamptz NULL;

CREATE TABLE ordergate.reminders (
    order_no       text COLLATE "C" NOT NULL REFERENCES ordergate.orders (order_no),
    offset_seconds integer NOT NULL CHECK (offset_seconds BETWEEN 1 AND 31622400),
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'skipped')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    due_at         timestamptz NULL,
    sent_at        timestamptz NULL,
    ended_at       timestamptz NULL,
    skip_reason    text NULL,
    PRIMARY KEY (order_no, offset_seconds),
    CONSTRAINT reminders_sent_check CHECK ((state = 'sent') = (sent_at IS NOT NULL)),
    CONSTRAINT reminders_ended_check CHECK ((state = 'pending') = (ended_at IS NULL))
);

CREATE TABLE ordergate.archived_reminders (LIKE ordergate.reminders INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_reminders ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_reminders ADD PRIMARY KEY (order_no, offset_seconds);

GRANT SELECT ON ordergate.reminders, ordergate.archived_reminders TO ordergate_order_service;
GRANT SELECT ON ordergate.reminders, ordergate.archived_reminders TO ordergate_service;

INSERT INTO ordergate.settings (key, value) VALUES ('reminder_before_seconds', '')
ON CONFLICT (key) DO NOTHING;

COMMENT ON COLUMN ordergate.orders.held_until IS
    'The end of the latest hold_for_payment (the buyer is paying until then), NULL if never held';
COMMENT ON COLUMN ordergate.archived_orders.held_until IS 'As orders.held_until';
COMMENT ON TABLE ordergate.reminders IS
    'Payment reminders of pending orders, one per order and offset (place_order, claim_reminder)';
COMMENT ON COLUMN ordergate.reminders.order_no IS 'The order to remind of';
COMMENT ON COLUMN ordergate.reminders.offset_seconds IS
    'Seconds before the order''s expire_at the reminder is due (reminder_before_seconds at placing)';
COMMENT ON COLUMN ordergate.reminders.state IS
    'pending, then sent (payment_reminder written) or skipped, once';
COMMENT ON COLUMN ordergate.reminders.created_at IS 'When place_order wrote it';
COMMENT ON COLUMN ordergate.reminders.due_at IS
    'The due time it was sent against (expire_at - offset at the claim); NULL unless sent';
COMMENT ON COLUMN ordergate.reminders.sent_at IS
    'When claim_reminder sent it (clock time, for its lateness sent_at - due_at); NULL unless sent';
COMMENT ON COLUMN ordergate.reminders.ended_at IS 'When it left pending; NULL while pending';
COMMENT ON COLUMN ordergate.reminders.skip_reason IS
    'Why it was skipped: closed (the order left pending first) or in_flight (a payment up to the deadline)';
COMMENT ON CONSTRAINT reminders_sent_check ON ordergate.reminders IS
    'A reminder has sent_at exactly when it was sent';
COMMENT ON CONSTRAINT reminders_ended_check ON ordergate.reminders IS
    'A reminder has ended_at exactly when it is no longer pending';
COMMENT ON INDEX ordergate.reminders_pkey IS
    'One reminder per order and offset: the claim''s lookup, archive(), reconcile';
COMMENT ON TABLE ordergate.archived_reminders IS
    'Reminders of archived orders, moved with their order by archive()';
COMMENT ON COLUMN ordergate.archived_reminders.archived_at IS 'When archive() moved it';
COMMENT ON INDEX ordergate.archived_reminders_pkey IS 'As reminders_pkey';

-- 003_refused_payment.sql: exceptions of kind 'refused_payment', the trace of a payment result
-- the consumer had to dead-letter (schema/functions/record_payment_refused.sql).
--
-- A payment result that does not decode, or that claim_payment refuses for good, never reaches
-- the payments table: without a row here, money the channel took would be invisible to
-- reconciliation while the order it paid is cancelled on time. Such an exception is keyed by
-- refused_key (the transaction number when the message carried a valid one, else the message's
-- topic/partition/offset), not by txn_no: the same transaction may still arrive in a form
-- claim_payment accepts, and its own exception must not collide with this one on
-- exceptions_txn_no_uq. The key is NULL for every other kind, and only for them.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.exceptions DROP CONSTRAINT exceptions_kind_check;
ALTER TABLE ordergate.exceptions ADD CONSTRAINT exceptions_kind_check
    CHECK (kind IN ('late_payment', 'double_payment', 'amount_mismatch', 'unknown_order',
                    'refused_payment'));

ALTER TABLE ordergate.exceptions ADD COLUMN refused_key text COLLATE "C" NULL;
ALTER TABLE ordergate.exceptions ADD CONSTRAINT exceptions_refused_key_check
    CHECK ((kind = 'refused_payment') = (refused_key IS NOT NULL));
-- A redelivered message (same transaction, or same position) records nothing twice.
CREATE UNIQUE INDEX exceptions_refused_key_uq ON ordergate.exceptions (refused_key)
    WHERE refused_key IS NOT NULL;

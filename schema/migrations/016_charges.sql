-- 016_charges.sql: charges still in flight at the deadline (schema/README.md, "Charges").
--
-- A payment provider that settles slowly (a bank redirect, 3-D Secure, a transfer, a debit)
-- reports a charge as begun long before it is captured or fails. begin_charge records it here;
-- while at least one charge of an order is pending within its bound, a timeout does not cancel
-- the order. orders.charge_until is the latest bound of the order's pending charges (NULL when
-- none is pending): the timeout claim, due_times and the scanner's sweep read only that column,
-- so a cancel pays no join to charges. The capture (claim_payment with charge_ref) and
-- charge_failed end a charge and recompute it.
--
-- charges.ended_late: the charge ended after its order had closed (a failure reported after a
-- cancel or a manual close, a capture that is a late or double payment). Reconcile's charge
-- invariant needs it: a cancel's closed_at is its transaction's start, which may come before a
-- charge that ended first in commit order, so times alone cannot say which came first.
--
-- max_pending_charge_seconds: the longest bound begin_charge accepts (default 3 days, at most 30
-- days), separate from max_hold_seconds.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.orders ADD COLUMN charge_until timestamptz NULL;
ALTER TABLE ordergate.archived_orders ADD COLUMN charge_until timestamptz NULL;
ALTER TABLE ordergate.payments ADD COLUMN charge_ref text COLLATE "C" NULL;
ALTER TABLE ordergate.archived_payments ADD COLUMN charge_ref text COLLATE "C" NULL;

-- One row per charge reference, ever: a reference names one charge of one order.
CREATE TABLE ordergate.charges (
    charge_ref text COLLATE "C" PRIMARY KEY
               CHECK (length(charge_ref) <= 128 AND charge_ref ~ '^[A-Za-z0-9._:-]+$'),
    order_no   text COLLATE "C" NOT NULL REFERENCES ordergate.orders (order_no),
    state      text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'captured', 'failed')),
    begun_at   timestamptz NOT NULL DEFAULT now(),
    bound_at   timestamptz NOT NULL,
    ended_at   timestamptz NULL,
    txn_no     text COLLATE "C" NULL,
    ended_late boolean NOT NULL DEFAULT false,
    CONSTRAINT charges_ended_check CHECK ((state = 'pending') = (ended_at IS NULL)),
    CONSTRAINT charges_txn_check CHECK ((state = 'captured') = (txn_no IS NOT NULL))
);
CREATE INDEX charges_order_no_idx ON ordergate.charges (order_no);

CREATE TABLE ordergate.archived_charges (LIKE ordergate.charges INCLUDING DEFAULTS);
ALTER TABLE ordergate.archived_charges ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE ordergate.archived_charges ADD PRIMARY KEY (charge_ref);
CREATE INDEX archived_charges_order_no_idx ON ordergate.archived_charges (order_no);

GRANT SELECT ON ordergate.charges, ordergate.archived_charges TO ordergate_order_service;

INSERT INTO ordergate.settings (key, value) VALUES ('max_pending_charge_seconds', '259200')
ON CONFLICT (key) DO NOTHING;

COMMENT ON COLUMN ordergate.orders.charge_until IS
    'The latest bound of the order''s pending charges, NULL when none is pending: no timeout cancel before it';
COMMENT ON COLUMN ordergate.archived_orders.charge_until IS
    'As orders.charge_until when the order was archived';
COMMENT ON COLUMN ordergate.payments.charge_ref IS
    'The charge this payment captured (claim_payment''s charge_ref), NULL for a plain payment';
COMMENT ON COLUMN ordergate.archived_payments.charge_ref IS
    'As payments.charge_ref';
COMMENT ON TABLE ordergate.charges IS
    'Charges in flight at a payment provider (begin_charge): pending, then captured or failed once';
COMMENT ON COLUMN ordergate.charges.charge_ref IS
    'The provider''s reference of the charge: names one charge of one order, ever';
COMMENT ON COLUMN ordergate.charges.order_no IS 'The order the charge pays for';
COMMENT ON COLUMN ordergate.charges.state IS
    'pending, then captured (claim_payment with charge_ref) or failed (charge_failed)';
COMMENT ON COLUMN ordergate.charges.begun_at IS 'When begin_charge recorded it';
COMMENT ON COLUMN ordergate.charges.bound_at IS
    'begun_at + max_seconds: the charge protects its order from a timeout cancel until then';
COMMENT ON COLUMN ordergate.charges.ended_at IS 'When it was captured or failed; NULL while pending';
COMMENT ON COLUMN ordergate.charges.txn_no IS 'The payment that captured it; NULL unless captured';
COMMENT ON COLUMN ordergate.charges.ended_late IS
    'It ended after its order had closed (a late capture, a failure reported after the cancel)';
COMMENT ON CONSTRAINT charges_ended_check ON ordergate.charges IS
    'A charge has ended_at exactly when it is no longer pending';
COMMENT ON CONSTRAINT charges_txn_check ON ordergate.charges IS
    'A charge has txn_no exactly when it was captured';
COMMENT ON INDEX ordergate.charges_order_no_idx IS
    'An order''s charges: charge_until''s recomputation, archive(), reconcile';
COMMENT ON TABLE ordergate.archived_charges IS
    'Charges of archived orders (archive() moves them with their order)';
COMMENT ON INDEX ordergate.archived_charges_order_no_idx IS
    'An archived order''s charges';

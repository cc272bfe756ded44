-- 026_orders_row_checks.sql: the cost of moving an order's row (a cancel, a payment).
-- Two CHECK constraints of orders written as cheaper expressions that accept exactly the same
-- rows. PostgreSQL evaluates every CHECK of a table on every UPDATE of a row, whatever the
-- columns set, so each claim pays them again for the order it moves.
--   orders_order_no_check: length(order_no) counts characters, walking the text in the
--   database's encoding; octet_length reads the stored size. The two differ only for a text
--   with a character outside ASCII, which the regular expression refuses anyway.
--   orders_status_check: the statuses a claim writes (cancelled, paid) are compared first;
--   the list, and so the statuses accepted, is the same.
-- tests/sql/021_guard_rules.sql compares old and new expressions over hostile inputs. The
-- constraints keep their names (error messages name them) and are validated here: one scan
-- of orders under the ALTER's lock.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

ALTER TABLE ordergate.orders
    DROP CONSTRAINT orders_order_no_check,
    DROP CONSTRAINT orders_status_check,
    ADD CONSTRAINT orders_order_no_check
        CHECK (octet_length(order_no) <= 64 AND order_no ~ '^[A-Za-z0-9._:-]+$'),
    ADD CONSTRAINT orders_status_check
        CHECK (status IN ('cancelled', 'paid', 'pending_payment', 'released'));

COMMENT ON CONSTRAINT orders_status_check ON ordergate.orders IS
    'pending_payment, then paid, cancelled or released; a released order may still become paid';

-- 002_gate.sql: the gate. Every order state change goes through these functions.
--
-- Rules (SPEC section 1): one-way gate by conditional UPDATE ... WHERE status = 'pending_payment'
-- (never read-then-update); side effects only for the winner, after its claim, in the same
-- transaction (database effects) or through the outbox (external effects); one status_log row
-- per transition; idempotency keys: cancel = order_no, payment = txn_no.
--
-- Every function: SECURITY DEFINER owned by ordergate_owner (the service has no direct write
-- privilege), pinned search_path, one round trip, EXECUTE revoked from PUBLIC.
-- Bad arguments raise SQLSTATE 22023 (invalid_parameter_value) and change nothing.
--
-- Call the gate in READ COMMITTED (PostgreSQL's default); under REPEATABLE READ or SERIALIZABLE a
-- lost race surfaces as SQLSTATE 40001 instead of an outcome, which the caller must retry.

BEGIN;

DO $guard$
BEGIN
    IF to_regclass('ordergate.schema_migrations') IS NULL THEN
        RAISE EXCEPTION 'ordergate migration 001 must be applied before 002' USING ERRCODE = 'OG000';
    END IF;
    IF EXISTS (SELECT 1 FROM ordergate.schema_migrations WHERE version = '002') THEN
        RAISE EXCEPTION 'ordergate migration 002 is already applied' USING ERRCODE = 'OG000';
    END IF;
END
$guard$;

SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

------------------------------------------------------------------------------------------------
-- Internal helpers (not granted to anyone).

-- Integer setting with a fallback when the row is missing.
CREATE FUNCTION ordergate._setting_bigint(p_key text, p_default bigint) RETURNS bigint
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce((SELECT s.value::bigint FROM ordergate.settings s WHERE s.key = p_key), p_default)
$$;

-- The actor written into status_log for automatic sources: the client's application_name, else
-- the login role (session_user is the caller even inside SECURITY DEFINER functions).
CREATE FUNCTION ordergate._actor() RETURNS text
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce(nullif(current_setting('application_name', true), ''), session_user::text)
$$;

CREATE FUNCTION ordergate._bad_arg(p_message text) RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '%', p_message USING ERRCODE = '22023';
END
$$;

-- _cancel_effects and claim_cancel below are replaced by 007_cancel_fast.sql (same contract, less
-- work per order); read them there.
--
-- _cancel_effects: the cancel claim and its side effects, shared by claim_cancel and close_order.
-- p_nos: candidate order numbers (claim_cancel has already locked the due pending ones in order_no
-- order; close_order passes one). p_due_only: only orders whose expire_at <= now() (timeouts), else
-- any pending order (manual close). Returns the order numbers this call won (NULL if none).
--
-- Set-based, a fixed number of statements whatever the batch size:
--  1. the claim (conditional UPDATE ... RETURNING) with, for exactly the returned rows, one
--     status_log row and one outbox event each (data-modifying CTEs of the same statement);
--  2. coupons of the winners back to available;
--  3. stock to give back summed per SKU (an UPDATE ... FROM with repeated keys would apply only
--     one of them), then the inventory rows locked in sku order and updated. Stock goes last, so
--     hot SKU rows stay locked only from here to the commit.
-- Steps 2 and 3 look rows up by key arrays (= ANY on the primary keys): index probes whatever the
-- planner thinks of the CTE's row count.
CREATE FUNCTION ordergate._cancel_effects(p_nos text[], p_source text, p_actor text, p_note text,
                                          p_due_only boolean DEFAULT false)
RETURNS text[]
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_won     text[];
    v_coupons text[];
    v_at      text := to_json(now())::text;   -- closed_at of every winner, formatted once
    v_skus    text[];
    v_qtys    bigint[];
BEGIN
    WITH won AS (
        UPDATE ordergate.orders o
           SET status = 'cancelled', closed_at = now()
         WHERE o.order_no = ANY (p_nos)
           AND o.status = 'pending_payment'
           AND (NOT p_due_only OR o.expire_at <= now())
        RETURNING o.order_no, o.amount_cents, o.coupon_id
    ), l AS (
        INSERT INTO ordergate.status_log
               (order_no, from_status, to_status, source, idempotency_key, actor, note)
        SELECT won.order_no, 'pending_payment', 'cancelled', p_source, won.order_no, p_actor, p_note
          FROM won
        RETURNING 1
    ), ev AS (
        INSERT INTO ordergate.outbox (event_type, order_no, payload)
        SELECT 'order_cancelled', won.order_no,
               -- Same document as jsonb_build_object('v', 1, 'event', 'order_cancelled',
               -- 'order_no', ..., 'source', ..., 'amount_cents', ..., 'coupon_id', ...,
               -- 'cancelled_at', ...), at a quarter of its cost per row (it looks up each
               -- argument's type every call). Safe to splice: order_no is [A-Za-z0-9._:-] (checked
               -- by the table), source one of four words, amount an integer; coupon_id and the
               -- timestamp go through to_json. The cast parses and validates the result.
               ('{"v": 1, "event": "order_cancelled", "order_no": "' || won.order_no
                || '", "source": "' || p_source
                || '", "amount_cents": ' || won.amount_cents
                || ', "coupon_id": ' || coalesce(to_json(won.coupon_id)::text, 'null')
                || ', "cancelled_at": ' || v_at || '}')::jsonb
          FROM won
        RETURNING 1
    )
    SELECT array_agg(won.order_no), array_agg(won.coupon_id) FILTER (WHERE won.coupon_id IS NOT NULL)
      INTO v_won, v_coupons
      FROM won;

    IF v_won IS NULL THEN
        RETURN NULL;
    END IF;

    IF v_coupons IS NOT NULL THEN
        UPDATE ordergate.coupons c
           SET state = 'available'
         WHERE c.coupon_id = ANY (v_coupons)
           AND c.state = 'locked';
    END IF;

    SELECT array_agg(s.sku ORDER BY s.sku), array_agg(s.q ORDER BY s.sku)
      INTO v_skus, v_qtys
      FROM (SELECT it.sku, sum(it.qty)::bigint AS q
              FROM ordergate.order_items it
             WHERE it.order_no = ANY (v_won)
             GROUP BY it.sku) s;
    IF v_skus IS NOT NULL THEN
        PERFORM 1 FROM ordergate.inventory i
         WHERE i.sku = ANY (v_skus)
         ORDER BY i.sku
           FOR NO KEY UPDATE;
        UPDATE ordergate.inventory i
           SET available = i.available + u.q
          FROM unnest(v_skus, v_qtys) AS u(sku, q)
         WHERE i.sku = ANY (v_skus)
           AND i.sku = u.sku;
    END IF;
    RETURN v_won;
END
$$;

------------------------------------------------------------------------------------------------
-- place_order: reserve stock, lock the coupon, insert the order. Outcomes:
--   placed | duplicate | out_of_stock | coupon_unavailable     (only 'placed' changes anything)
-- items: [{"sku": "...", "qty": N}, ...], 1..1000 lines, qty a positive integer; repeated skus are
-- summed; an unknown sku is out_of_stock. coupon_id NULL = no coupon. expire_at may be in the past.
--
-- Lock order: the coupon, then inventory rows in sku order, then the new order row (its primary
-- key). Checks happen after the locks, so nothing is written unless everything is available.
-- No cycle with the other functions: they lock existing orders first, and nobody waits for a
-- not-yet-committed order row except a concurrent place_order of the same order_no, which
-- already holds all its locks before it inserts.
CREATE FUNCTION ordergate.place_order(order_no text, amount_cents bigint, items jsonb,
                                      coupon_id text, expire_at timestamptz)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text        := place_order.order_no;
    p_amount   bigint      := place_order.amount_cents;
    p_items    jsonb       := place_order.items;
    p_coupon   text        := place_order.coupon_id;
    p_expire   timestamptz := place_order.expire_at;
    v_bad      bigint;
    v_skus     text[];
    v_qtys     bigint[];
    v_state    text;
    v_found    bigint;
    v_short    bigint;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('place_order: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 THEN
        PERFORM _bad_arg('place_order: amount_cents must be > 0');
    END IF;
    IF p_expire IS NULL OR NOT isfinite(p_expire) THEN
        PERFORM _bad_arg('place_order: expire_at must be a finite timestamp');
    END IF;
    IF p_coupon IS NOT NULL AND length(p_coupon) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('place_order: coupon_id must be NULL (no coupon) or 1..128 characters');
    END IF;
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array'
       OR jsonb_array_length(p_items) NOT BETWEEN 1 AND 1000 THEN
        PERFORM _bad_arg('place_order: items must be a JSON array of 1..1000 {"sku": text, "qty": positive integer}');
    END IF;
    SELECT count(*) INTO v_bad
      FROM jsonb_array_elements(p_items) e
     WHERE NOT CASE
                 WHEN jsonb_typeof(e) = 'object'
                  AND jsonb_typeof(e -> 'sku') = 'string'
                  AND jsonb_typeof(e -> 'qty') = 'number'
                  AND (e ->> 'qty') ~ '^[0-9]{1,10}$'
                 THEN length(e ->> 'sku') BETWEEN 1 AND 128
                  AND (e ->> 'qty')::bigint BETWEEN 1 AND 2147483647
                 ELSE false
               END;
    IF v_bad > 0 THEN
        PERFORM _bad_arg('place_order: items must be a JSON array of 1..1000 {"sku": text, "qty": positive integer}');
    END IF;

    SELECT array_agg(s.sku ORDER BY s.sku), array_agg(s.q ORDER BY s.sku)
      INTO v_skus, v_qtys
      FROM (SELECT e ->> 'sku' AS sku, sum((e ->> 'qty')::bigint) AS q
              FROM jsonb_array_elements(p_items) e
             GROUP BY 1) s;
    IF EXISTS (SELECT 1 FROM unnest(v_qtys) q WHERE q > 2147483647) THEN
        PERFORM _bad_arg('place_order: total qty per sku must fit in a 32-bit integer');
    END IF;

    -- Locks first (coupon, then inventory in sku order); every check below runs in a fresh snapshot
    -- taken after any wait, so it sees what the transactions we waited for committed.
    IF p_coupon IS NOT NULL THEN
        SELECT c.state INTO v_state FROM coupons c WHERE c.coupon_id = p_coupon FOR NO KEY UPDATE;
    END IF;
    PERFORM 1 FROM inventory i WHERE i.sku = ANY (v_skus) ORDER BY i.sku FOR NO KEY UPDATE;

    IF EXISTS (SELECT 1 FROM orders o WHERE o.order_no = p_order_no) THEN
        RETURN 'duplicate';
    END IF;
    IF p_coupon IS NOT NULL AND v_state IS DISTINCT FROM 'available' THEN
        RETURN 'coupon_unavailable';
    END IF;
    SELECT count(*), count(*) FILTER (WHERE i.available < u.q)
      INTO v_found, v_short
      FROM unnest(v_skus, v_qtys) AS u(sku, q)
      JOIN inventory i ON i.sku = u.sku;
    IF v_found < cardinality(v_skus) OR v_short > 0 THEN
        RETURN 'out_of_stock';
    END IF;

    -- A concurrent place_order of the same order_no that committed after our check: duplicate,
    -- and nothing has been written yet.
    INSERT INTO orders (order_no, status, amount_cents, coupon_id, expire_at)
    VALUES (p_order_no, 'pending_payment', p_amount, p_coupon, p_expire)
    ON CONFLICT (order_no) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'duplicate';
    END IF;

    IF p_coupon IS NOT NULL THEN
        UPDATE coupons c SET state = 'locked' WHERE c.coupon_id = p_coupon;
    END IF;
    UPDATE inventory i
       SET available = i.available - u.q
      FROM unnest(v_skus, v_qtys) AS u(sku, q)
     WHERE i.sku = ANY (v_skus)
       AND i.sku = u.sku;
    INSERT INTO order_items (order_no, sku, qty)
    SELECT p_order_no, u.sku, u.q::int FROM unnest(v_skus, v_qtys) AS u(sku, q);
    RETURN 'placed';
END
$$;

------------------------------------------------------------------------------------------------
-- claim_cancel: batch timeout cancel. Set-based, one round trip for up to 10000 order numbers.
-- source: timeout_consumer | timeout_scanner. One row per distinct order number, in order of
-- first appearance: cancelled (this call won) | already_cancelled | already_paid | not_due |
-- not_found; status = the order's status after the call (NULL when not_found).
CREATE FUNCTION ordergate.claim_cancel(order_nos text[], source text)
RETURNS TABLE (order_no text, outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_nos    text[] := claim_cancel.order_nos;
    p_source text   := claim_cancel.source;
    v_n      int;
    v_bad    text;
    v_won    text[];
BEGIN
    IF p_source IS NULL OR p_source NOT IN ('timeout_consumer', 'timeout_scanner') THEN
        PERFORM _bad_arg(format('claim_cancel: source must be timeout_consumer or timeout_scanner, not %L',
                                p_source));
    END IF;
    IF p_nos IS NULL THEN
        PERFORM _bad_arg('claim_cancel: order_nos must not be NULL (use an empty array for nothing)');
    END IF;
    IF array_ndims(p_nos) > 1 THEN
        PERFORM _bad_arg('claim_cancel: order_nos must be a one-dimensional array');
    END IF;
    v_n := cardinality(p_nos);
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF v_n > 10000 THEN
        PERFORM _bad_arg(format('claim_cancel: at most 10000 order numbers per call, got %s', v_n));
    END IF;
    SELECT coalesce(x, 'NULL') INTO v_bad
      FROM unnest(p_nos) x
     WHERE x IS NULL OR length(x) > 64 OR x !~ '^[A-Za-z0-9._:-]+$'
     LIMIT 1;
    IF FOUND THEN
        PERFORM _bad_arg(format('claim_cancel: invalid order number %s (1..64 characters of [A-Za-z0-9._:-], no NULL)',
                                left(v_bad, 80)));
    END IF;

    -- Lock the due pending candidates in order_no order: two batches sharing orders in opposite
    -- array order queue instead of deadlocking. A row being paid concurrently is waited for and
    -- re-checked; if it left pending it is simply not locked.
    PERFORM 1 FROM orders o
     WHERE o.order_no = ANY (p_nos)
       AND o.status = 'pending_payment'
       AND o.expire_at <= now()
     ORDER BY o.order_no
       FOR NO KEY UPDATE;

    -- The claim (one conditional UPDATE; its RETURNING is the set of winners) and the winners'
    -- side effects.
    v_won := _cancel_effects(p_nos, p_source, _actor(), NULL, true);

    -- Results: the winners are known; the others' status is read (they are locked by us, or not
    -- pending, or not found).
    RETURN QUERY
    SELECT d.no,
           CASE WHEN d.won THEN 'cancelled'
                WHEN cur.status = 'paid' THEN 'already_paid'
                WHEN cur.status = 'cancelled' THEN 'already_cancelled'
                WHEN cur.status = 'pending_payment' THEN 'not_due'
                ELSE 'not_found'
           END,
           CASE WHEN d.won THEN 'cancelled' ELSE cur.status END
      FROM (SELECT u.x AS no, min(u.i) AS first, bool_or(w.no IS NOT NULL) AS won
              FROM unnest(p_nos) WITH ORDINALITY AS u(x, i)
              LEFT JOIN unnest(v_won) AS w(no) ON w.no = u.x
             GROUP BY u.x) d
      LEFT JOIN LATERAL (SELECT o.status FROM orders o
                          WHERE o.order_no = d.no AND NOT d.won) cur ON true
     ORDER BY d.first;
END
$$;

------------------------------------------------------------------------------------------------
-- close_order: manual close by operations, any time (no due check). Same side effects as a cancel;
-- status_log source 'manual', actor = operator, note = reason. Outcomes: cancelled |
-- already_cancelled | already_paid | not_found.
CREATE FUNCTION ordergate.close_order(order_no text, operator text, reason text)
RETURNS TABLE (outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := close_order.order_no;
    p_operator text := btrim(close_order.operator);
    p_reason   text := btrim(close_order.reason);
    v_status   text;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('close_order: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_operator IS NULL OR length(p_operator) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('close_order: operator is required (1..128 characters)');
    END IF;
    IF p_reason IS NULL OR length(p_reason) NOT BETWEEN 1 AND 2000 THEN
        PERFORM _bad_arg('close_order: reason is required (1..2000 characters)');
    END IF;

    IF _cancel_effects(ARRAY[p_order_no], 'manual', p_operator, p_reason, false) IS NOT NULL THEN
        RETURN QUERY SELECT 'cancelled'::text, 'cancelled'::text;
        RETURN;
    END IF;

    SELECT o.status INTO v_status FROM orders o WHERE o.order_no = p_order_no;
    RETURN QUERY SELECT CASE v_status
                            WHEN 'paid' THEN 'already_paid'
                            WHEN 'cancelled' THEN 'already_cancelled'
                            ELSE 'not_found'
                        END::text,
                        v_status;
END
$$;

------------------------------------------------------------------------------------------------
-- claim_payment: apply a payment callback. Idempotent by txn_no. Outcomes:
--   paid            this call moved the order pending_payment -> paid (first claim wins; the clock
--                   does not matter: after expire_at but before any cancel, payment wins)
--   duplicate       txn_no seen before: nothing changes; first_outcome = that first call's outcome
--   late_payment    the order was cancelled: exception (auto_refund <= auto_refund_limit_cents,
--                   else manual_review) + outbox refund_requested | reconciliation_alert
--   double_payment  the order was paid by another txn: exception + refund event (same policy)
--   amount_mismatch order pending but amount differs: order stays pending; exception manual_review
--                   + reconciliation_alert
--   not_found       unknown order: exception unknown_order (manual_review) + reconciliation_alert
-- Every call with a new txn_no records a payments row with its outcome. status = the order's
-- status after the call (for duplicate: the status of the order the txn was first recorded for).
--
-- The payments row is inserted first (ON CONFLICT DO NOTHING): concurrent retries of one txn_no
-- serialize on its primary key, only the inserter proceeds; if the inserter rolls back (client
-- timeout), the retry inserts and proceeds itself.
CREATE FUNCTION ordergate.claim_payment(order_no text, txn_no text, amount_cents bigint, channel text)
RETURNS TABLE (outcome text, status text, first_outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text   := claim_payment.order_no;
    p_txn      text   := claim_payment.txn_no;
    p_amount   bigint := claim_payment.amount_cents;
    p_channel  text   := claim_payment.channel;
    v_coupon   text;
    v_status   text;
    v_first    text;
    v_outcome  text;
    v_kind     text;
    v_res      text;
    v_exc_id   bigint;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_payment: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_txn IS NULL OR length(p_txn) > 128 OR p_txn !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('claim_payment: txn_no must be 1..128 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 THEN
        PERFORM _bad_arg('claim_payment: amount_cents must be > 0');
    END IF;
    IF p_channel IS NULL OR length(p_channel) NOT BETWEEN 1 AND 64 THEN
        PERFORM _bad_arg('claim_payment: channel is required (1..64 characters)');
    END IF;

    INSERT INTO payments (txn_no, order_no, amount_cents, channel, outcome)
    VALUES (p_txn, p_order_no, p_amount, p_channel, 'processing')
    ON CONFLICT (txn_no) DO NOTHING;
    IF NOT FOUND THEN
        SELECT p.outcome, o.status INTO v_first, v_status
          FROM payments p
          LEFT JOIN orders o ON o.order_no = p.order_no
         WHERE p.txn_no = p_txn;
        RETURN QUERY SELECT 'duplicate'::text, v_status, v_first;
        RETURN;
    END IF;

    -- The claim.
    UPDATE orders o
       SET status = 'paid', closed_at = now()
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
       AND o.amount_cents = p_amount
    RETURNING o.coupon_id INTO v_coupon;

    IF FOUND THEN
        IF v_coupon IS NOT NULL THEN
            UPDATE coupons c SET state = 'used' WHERE c.coupon_id = v_coupon AND c.state = 'locked';
        END IF;
        INSERT INTO status_log (order_no, from_status, to_status, source, idempotency_key, actor)
        VALUES (p_order_no, 'pending_payment', 'paid', 'payment_callback', p_txn, _actor());
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('order_paid', p_order_no,
                jsonb_build_object('v', 1, 'event', 'order_paid', 'order_no', p_order_no,
                                   'txn_no', p_txn, 'amount_cents', p_amount, 'channel', p_channel,
                                   'paid_at', now()));
        UPDATE payments p SET outcome = 'paid' WHERE p.txn_no = p_txn;
        RETURN QUERY SELECT 'paid'::text, 'paid'::text, 'paid'::text;
        RETURN;
    END IF;

    -- Lost (or amount differs): read the current status under a share lock, so a pending order
    -- cannot be cancelled between this read and the exception we record for it.
    SELECT o.status INTO v_status FROM orders o WHERE o.order_no = p_order_no FOR SHARE;

    IF v_status IS NULL THEN
        v_outcome := 'not_found';       v_kind := 'unknown_order';   v_res := 'manual_review';
    ELSIF v_status = 'cancelled' THEN
        v_outcome := 'late_payment';    v_kind := 'late_payment';
    ELSIF v_status = 'paid' THEN
        v_outcome := 'double_payment';  v_kind := 'double_payment';
    ELSE
        v_outcome := 'amount_mismatch'; v_kind := 'amount_mismatch'; v_res := 'manual_review';
    END IF;
    IF v_res IS NULL THEN
        v_res := CASE WHEN p_amount <= _setting_bigint('auto_refund_limit_cents', 5000)
                      THEN 'auto_refund' ELSE 'manual_review' END;
    END IF;

    INSERT INTO exceptions (order_no, kind, txn_no, amount_cents, resolution, note)
    VALUES (p_order_no, v_kind, p_txn, p_amount, v_res,
            format('payment %s via %s, order status %s', p_txn, p_channel, coalesce(v_status, 'unknown')))
    RETURNING id INTO v_exc_id;

    INSERT INTO outbox (event_type, order_no, payload)
    VALUES (CASE v_res WHEN 'auto_refund' THEN 'refund_requested' ELSE 'reconciliation_alert' END,
            p_order_no,
            jsonb_build_object('v', 1,
                               'event', CASE v_res WHEN 'auto_refund' THEN 'refund_requested'
                                                   ELSE 'reconciliation_alert' END,
                               'order_no', p_order_no, 'txn_no', p_txn, 'amount_cents', p_amount,
                               'channel', p_channel, 'kind', v_kind, 'resolution', v_res,
                               'exception_id', v_exc_id, 'order_status', v_status));

    UPDATE payments p SET outcome = v_outcome WHERE p.txn_no = p_txn;
    RETURN QUERY SELECT v_outcome, v_status, v_outcome;
END
$$;

------------------------------------------------------------------------------------------------
-- hold_for_payment: the user is on the payment page; push expire_at out so a cancel waits.
-- new expire_at = greatest(expire_at, least(now() + seconds, original_expire_at + max_hold_seconds)):
-- never shortens, never beyond the order's original expiry + max_hold_seconds.
-- seconds must be 1..max_hold_seconds. Outcomes: held | not_pending | not_found.
-- A hold is not a transition: no status_log row, no outbox event.
CREATE FUNCTION ordergate.hold_for_payment(order_no text, seconds int)
RETURNS TABLE (outcome text, expire_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text := hold_for_payment.order_no;
    p_seconds  int  := hold_for_payment.seconds;
    v_max      bigint := _setting_bigint('max_hold_seconds', 900);
    v_expire   timestamptz;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('hold_for_payment: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_seconds IS NULL OR p_seconds < 1 OR p_seconds > v_max THEN
        PERFORM _bad_arg(format('hold_for_payment: seconds must be 1..%s (max_hold_seconds)', v_max));
    END IF;

    UPDATE orders o
       SET expire_at = greatest(o.expire_at,
                                least(now() + make_interval(secs => p_seconds),
                                      o.original_expire_at + make_interval(secs => v_max)))
     WHERE o.order_no = p_order_no
       AND o.status = 'pending_payment'
    RETURNING o.expire_at INTO v_expire;
    IF FOUND THEN
        RETURN QUERY SELECT 'held'::text, v_expire;
        RETURN;
    END IF;

    SELECT o.expire_at INTO v_expire FROM orders o WHERE o.order_no = p_order_no;
    IF FOUND THEN
        RETURN QUERY SELECT 'not_pending'::text, v_expire;
    ELSE
        RETURN QUERY SELECT 'not_found'::text, NULL::timestamptz;
    END IF;
END
$$;

------------------------------------------------------------------------------------------------
-- Outbox relay. The relay opens a transaction, outbox_lock_batch (rows stay locked, SKIP LOCKED
-- lets several relays share the work), publishes, waits for the broker's acknowledgement,
-- outbox_mark_published, commits. A crash before the commit publishes again: at least once.
CREATE FUNCTION ordergate.outbox_lock_batch(p_limit int)
RETURNS TABLE (id bigint, event_type text, order_no text, payload text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        PERFORM _bad_arg('outbox_lock_batch: p_limit must be 1..10000');
    END IF;
    RETURN QUERY
    SELECT b.id, b.event_type, b.order_no, b.payload::text
      FROM outbox b
     WHERE b.published_at IS NULL
     ORDER BY b.id
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED;
END
$$;

CREATE FUNCTION ordergate.outbox_mark_published(p_ids bigint[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_n bigint;
BEGIN
    IF p_ids IS NULL OR array_ndims(p_ids) > 1 THEN
        PERFORM _bad_arg('outbox_mark_published: p_ids must be a one-dimensional array');
    END IF;
    IF cardinality(p_ids) > 10000 THEN
        PERFORM _bad_arg('outbox_mark_published: at most 10000 ids per call');
    END IF;
    UPDATE outbox b SET published_at = clock_timestamp()
     WHERE b.id = ANY (p_ids) AND b.published_at IS NULL;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

CREATE FUNCTION ordergate.outbox_backlog() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT count(*) FROM ordergate.outbox b WHERE b.published_at IS NULL
$$;

-- Age of the oldest unpublished event (NULL when none): the relay's lag, for metrics and alerts.
CREATE FUNCTION ordergate.outbox_oldest_age() RETURNS interval
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
    SELECT now() - min(b.created_at) FROM ordergate.outbox b WHERE b.published_at IS NULL
$$;

------------------------------------------------------------------------------------------------
-- Administration (ordergate_admin): additive changes that keep the invariants.

-- add_stock: create a sku or add to it; adds to available and total alike (invariant 2). A
-- negative qty writes stock off (never below zero available: SQLSTATE 23514). Returns available.
CREATE FUNCTION ordergate.add_stock(p_sku text, p_qty bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_available bigint;
BEGIN
    IF p_sku IS NULL OR length(p_sku) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('add_stock: sku must be 1..128 characters');
    END IF;
    IF p_qty IS NULL THEN
        PERFORM _bad_arg('add_stock: qty must not be NULL');
    END IF;
    INSERT INTO inventory AS i (sku, available, total)
    VALUES (p_sku, p_qty, p_qty)
    ON CONFLICT (sku) DO UPDATE
       SET available = i.available + excluded.available,
           total     = i.total + excluded.total
    RETURNING i.available INTO v_available;
    RETURN v_available;
END
$$;

-- add_coupon: created | exists.
CREATE FUNCTION ordergate.add_coupon(p_coupon_id text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF p_coupon_id IS NULL OR length(p_coupon_id) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('add_coupon: coupon_id must be 1..128 characters');
    END IF;
    INSERT INTO coupons (coupon_id) VALUES (p_coupon_id) ON CONFLICT (coupon_id) DO NOTHING;
    RETURN CASE WHEN FOUND THEN 'created' ELSE 'exists' END;
END
$$;

-- set_setting: only known keys, only non-negative integers. Returns the previous value.
CREATE FUNCTION ordergate.set_setting(p_key text, p_value text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_old text;
BEGIN
    IF p_key IS NULL OR p_key NOT IN ('auto_refund_limit_cents', 'max_hold_seconds') THEN
        PERFORM _bad_arg('set_setting: key must be auto_refund_limit_cents or max_hold_seconds');
    END IF;
    IF p_value IS NULL OR p_value !~ '^[0-9]{1,15}$'
       OR (p_key = 'max_hold_seconds' AND p_value::bigint NOT BETWEEN 1 AND 2147483647) THEN
        PERFORM _bad_arg('set_setting: value must be a non-negative integer (max_hold_seconds >= 1)');
    END IF;
    SELECT s.value INTO v_old FROM settings s WHERE s.key = p_key FOR UPDATE;
    INSERT INTO settings AS s (key, value) VALUES (p_key, p_value)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    RETURN v_old;
END
$$;

-- resolve_exception: an operator closes a follow-up. resolved | already_resolved | not_found.
CREATE FUNCTION ordergate.resolve_exception(p_id bigint, p_operator text, p_note text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
DECLARE
    v_state text;
BEGIN
    IF p_id IS NULL THEN
        PERFORM _bad_arg('resolve_exception: id is required');
    END IF;
    IF p_operator IS NULL OR length(btrim(p_operator)) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('resolve_exception: operator is required (1..128 characters)');
    END IF;
    UPDATE exceptions e
       SET state = 'resolved', resolved_at = now(), resolved_by = btrim(p_operator),
           note = CASE WHEN p_note IS NULL OR btrim(p_note) = '' THEN e.note
                       ELSE concat_ws(E'\n', e.note, btrim(p_note)) END
     WHERE e.id = p_id AND e.state = 'open';
    IF FOUND THEN
        RETURN 'resolved';
    END IF;
    SELECT e.state INTO v_state FROM exceptions e WHERE e.id = p_id;
    RETURN CASE WHEN v_state IS NULL THEN 'not_found' ELSE 'already_resolved' END;
END
$$;

------------------------------------------------------------------------------------------------
-- Privileges. Internal helpers (_*) are granted to nobody.

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA ordergate FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
    ordergate.place_order(text, bigint, jsonb, text, timestamptz),
    ordergate.claim_cancel(text[], text),
    ordergate.close_order(text, text, text),
    ordergate.claim_payment(text, text, bigint, text),
    ordergate.hold_for_payment(text, int),
    ordergate.outbox_lock_batch(int),
    ordergate.outbox_mark_published(bigint[]),
    ordergate.outbox_backlog(),
    ordergate.outbox_oldest_age()
TO ordergate_service;

GRANT EXECUTE ON FUNCTION
    ordergate.add_stock(text, bigint),
    ordergate.add_coupon(text),
    ordergate.set_setting(text, text),
    ordergate.resolve_exception(bigint, text, text)
TO ordergate_admin;

INSERT INTO ordergate.schema_migrations (version) VALUES ('002');

COMMIT;

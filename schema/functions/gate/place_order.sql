-- place_order: reserve stock, lock the coupon, insert the order. Outcomes:
--   placed | duplicate | out_of_stock | coupon_unavailable     (only 'placed' changes anything)
-- items: [{"sku": "...", "qty": N}, ...], 0..1000 lines, qty a positive integer; repeated skus are
-- summed; an unknown sku is out_of_stock. items '[]' is a gate-only order: the shop keeps its own
-- stock, and no inventory row is read or written for it (docs/integrate.md). coupon_id NULL = no
-- coupon. expire_at may be in the past, never beyond now() + max_deadline_seconds. shop: NULL or a JSON object of at most 16 KB, the shop's
-- own data for the order (for a gate-only order: its lines and coupon), stored with the order and
-- carried verbatim as "shop" in every event of the order; ordergate never reads inside it.
-- With the setting schedule_cancels = 1 the order's cancel message is written in the same
-- transaction: an outbox event cancel_scheduled whose payload is the cancel message
-- ({"v":1,"order_no":...,"due_at":...}, due_at = expire_at to the microsecond), which the relay
-- publishes to the delay topic that fits (docs/consumer.md, "Scheduling from the database").
-- currency: an ISO 4217 code in currencies (NULL: the setting default_currency); amount_cents is
-- in its minor units, 1..10^15 (sums of parts and JSON readers stay exact). allow_partial: the
-- order may be paid in parts (claim_payment: partial, then paid or overpaid).
-- With the setting reminder_before_seconds (offsets, e.g. '300,60') the order gets a reminders
-- row per offset whose due time expire_at - offset is still ahead (claim_reminder sends it), and
-- with schedule_cancels = 1 each one's message (_reminder_message) for the delay topics. Both
-- settings are read in one lookup, so an order without reminders costs what it did.
--
-- Lock order: the coupon, then inventory rows in sku order, then the new order row (its primary
-- key). Checks happen after the locks, so nothing is written unless everything is available.
-- No cycle with the other functions: they lock existing orders first, and nobody waits for a
-- not-yet-committed order row except a concurrent place_order of the same order_no, which
-- already holds all its locks before it inserts.
CREATE OR REPLACE FUNCTION ordergate.place_order(order_no text, amount_cents bigint, items jsonb,
                                      coupon_id text, expire_at timestamptz,
                                      shop jsonb DEFAULT NULL,
                                      currency text DEFAULT NULL,
                                      allow_partial boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_order_no text        := place_order.order_no;
    p_amount   bigint      := place_order.amount_cents;
    p_items    jsonb       := place_order.items;
    p_coupon   text        := place_order.coupon_id;
    p_expire   timestamptz := place_order.expire_at;
    p_shop     jsonb       := place_order.shop;
    p_currency text        := coalesce(place_order.currency, _default_currency());
    p_partial  boolean     := coalesce(place_order.allow_partial, false);
    v_skus     text[];
    v_qtys     bigint[];
    v_state    text;
    v_found    bigint;
    v_short    bigint;
    v_schedule boolean;
    v_offsets  text;
BEGIN
    IF p_order_no IS NULL OR length(p_order_no) > 64 OR p_order_no !~ '^[A-Za-z0-9._:-]+$' THEN
        PERFORM _bad_arg('place_order: order_no must be 1..64 characters of [A-Za-z0-9._:-]');
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 OR p_amount > 1000000000000000 THEN
        PERFORM _bad_arg('place_order: amount_cents must be 1..10^15 (minor units of the currency)');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM currencies c WHERE c.code = p_currency) THEN
        PERFORM _bad_arg(format('place_order: currency %s is not an ISO 4217 code in currencies',
                                p_currency));
    END IF;
    IF p_expire IS NULL OR NOT isfinite(p_expire) THEN
        PERFORM _bad_arg('place_order: expire_at must be a finite timestamp');
    END IF;
    -- A deadline the cancel message cannot carry (a time in milliseconds read as seconds lands
    -- in year 57900) would leave the order uncancellable: refused beyond the horizon.
    IF p_expire > now() + make_interval(secs => _setting_bigint('max_deadline_seconds', 31622400)) THEN
        PERFORM _bad_arg(format('place_order: expire_at %s is more than max_deadline_seconds (%s s) from now',
                                p_expire, _setting_bigint('max_deadline_seconds', 31622400)));
    END IF;
    IF p_coupon IS NOT NULL AND length(p_coupon) NOT BETWEEN 1 AND 128 THEN
        PERFORM _bad_arg('place_order: coupon_id must be NULL (no coupon) or 1..128 characters');
    END IF;
    IF p_shop IS NOT NULL AND (jsonb_typeof(p_shop) <> 'object'
                               OR octet_length(p_shop::text) > 16384) THEN
        PERFORM _bad_arg('place_order: shop must be NULL or a JSON object of at most 16384 bytes');
    END IF;
    SELECT i.o_skus, i.o_qtys INTO v_skus, v_qtys FROM _order_items_parse('place_order', p_items) i;

    -- Locks first (coupon, then inventory in sku order); every check below runs in a fresh snapshot
    -- taken after any wait, so it sees what the transactions we waited for committed.
    IF p_coupon IS NOT NULL THEN
        SELECT c.state INTO v_state FROM coupons c WHERE c.coupon_id = p_coupon FOR NO KEY UPDATE;
    END IF;
    IF v_skus IS NOT NULL THEN
        PERFORM 1 FROM inventory i WHERE i.sku = ANY (v_skus) ORDER BY i.sku FOR NO KEY UPDATE;
    END IF;

    -- An order number is unique across hot and archived history. One statement reads both
    -- tables in one snapshot, and archive() moves an order in one transaction, so the number is
    -- seen in one of them whenever it exists: a batch committing meanwhile cannot hide it.
    IF EXISTS (SELECT 1 FROM orders o WHERE o.order_no = p_order_no)
       OR EXISTS (SELECT 1 FROM archived_orders a WHERE a.order_no = p_order_no) THEN
        RETURN 'duplicate';
    END IF;
    IF p_coupon IS NOT NULL AND v_state IS DISTINCT FROM 'available' THEN
        RETURN 'coupon_unavailable';
    END IF;
    IF v_skus IS NOT NULL THEN
        SELECT count(*), count(*) FILTER (WHERE i.available < u.q)
          INTO v_found, v_short
          FROM unnest(v_skus, v_qtys) AS u(sku, q)
          JOIN inventory i ON i.sku = u.sku;
        IF v_found < cardinality(v_skus) OR v_short > 0 THEN
            RETURN 'out_of_stock';
        END IF;
    END IF;

    -- A concurrent place_order of the same order_no that committed after our check: duplicate,
    -- and nothing has been written yet.
    INSERT INTO orders (order_no, status, amount_cents, coupon_id, expire_at, shop, currency,
                        allow_partial)
    VALUES (p_order_no, 'pending_payment', p_amount, p_coupon, p_expire, p_shop, p_currency,
            p_partial)
    ON CONFLICT (order_no) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'duplicate';
    END IF;
    -- Again after the insert, on a new snapshot: an order of this number that was placed, closed
    -- and archived between the check above and the insert (the insert waited for that batch to
    -- commit its delete) is in archived_orders now. Our row is removed again before anything
    -- else is written; no later batch can archive the number under us while we hold its key.
    IF EXISTS (SELECT 1 FROM archived_orders a WHERE a.order_no = p_order_no) THEN
        DELETE FROM orders o WHERE o.order_no = p_order_no;
        RETURN 'duplicate';
    END IF;

    IF p_coupon IS NOT NULL THEN
        UPDATE coupons c SET state = 'locked' WHERE c.coupon_id = p_coupon;
    END IF;
    IF v_skus IS NOT NULL THEN
        UPDATE inventory i
           SET available = i.available - u.q
          FROM unnest(v_skus, v_qtys) AS u(sku, q)
         WHERE i.sku = ANY (v_skus)
           AND i.sku = u.sku;
        INSERT INTO order_items (order_no, sku, qty)
        SELECT p_order_no, u.sku, u.q::int FROM unnest(v_skus, v_qtys) AS u(sku, q);
    END IF;
    SELECT coalesce(max(s.value) FILTER (WHERE s.key = 'schedule_cancels'), '0') = '1',
           max(s.value) FILTER (WHERE s.key = 'reminder_before_seconds')
      INTO v_schedule, v_offsets
      FROM settings s
     WHERE s.key IN ('schedule_cancels', 'reminder_before_seconds');
    IF v_offsets <> '' THEN
        -- Only offsets still ahead: a reminder due before the order existed is never sent.
        -- Their messages before the cancel's, earliest due first: in a delay topic's partition
        -- a message waits behind the ones produced before it.
        WITH r AS (
            INSERT INTO reminders (order_no, offset_seconds)
            SELECT p_order_no, x::int
              FROM unnest(string_to_array(v_offsets, ',')) AS x
             WHERE p_expire - make_interval(secs => x::int) > now()
            RETURNING reminders.offset_seconds
        )
        INSERT INTO outbox (event_type, order_no, payload)
        SELECT 'reminder_scheduled', p_order_no,
               _reminder_message(p_order_no, r.offset_seconds,
                                 p_expire - make_interval(secs => r.offset_seconds))
          FROM r
         WHERE v_schedule
         ORDER BY r.offset_seconds DESC;
    END IF;
    IF v_schedule THEN
        INSERT INTO outbox (event_type, order_no, payload)
        VALUES ('cancel_scheduled', p_order_no, _cancel_message(p_order_no, p_expire));
    END IF;
    RETURN 'placed';
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.place_order(text,bigint,jsonb,text,timestamptz,jsonb,text,boolean) TO ordergate_order_service;
COMMENT ON FUNCTION ordergate.place_order(text,bigint,jsonb,text,timestamp with time zone,jsonb,text,boolean) IS
    'Places an order: reserves its stock, locks its coupon, inserts it pending_payment';

-- _cancel_orders_claim: step 1 of _cancel_orders, the cancel claim and ordergate's own side
-- effects but the stock (_cancel_orders runs the shop's hooks after it, then step 3,
-- _cancel_orders_restock). p_nos: candidate order numbers
-- (close_order passes one). p_due_only: only orders due (timeouts): expire_at <= now() and no
-- charge pending within its bound (charge_until NULL or <= now(), migrations/016_charges.sql);
-- else any pending order (manual close: an operator decides, pending charges included). o_won: the order numbers this call won (NULL if none); o_skus,
-- o_qtys: the stock to give back, summed per sku, in sku order (NULL if none).
--
-- Set-based, a fixed number of statements whatever the batch size:
--  1. lock the pending candidates in order_no order (two batches sharing orders in opposite array
--     order queue instead of deadlocking); the lock pass returns the locked row versions;
--  2. the claim updates exactly those versions by ctid (a TID scan, no second primary-key probe;
--     the lock taken in 1 keeps them pending), with, for exactly the returned rows, one
--     status_log row and one outbox event each (data-modifying CTEs of the same statement); the
--     same statement reads the winners' lines once, for the events' items and for the stock to
--     give back summed per SKU;
--  3. coupons of the winners back to available; each captured part of a winner (allow_partial
--     orders) an exception cancelled_part with its refund event;
--  4. (_cancel_orders_restock, after the hooks) the inventory rows locked in sku order and
--     updated.
--     Stock goes last, so hot SKU rows stay locked only from there to the commit, never while a
--     hook runs.
--
-- Every statement looks rows up by key (the lock pass by a primary-key probe per order; the
-- claim by ctid; the lines by one scan of their primary key for the array of winners;
-- coupons and stock by key arrays), and the plans are pinned to that (schema/README.md, "Plan
-- stability"): enable_seqscan is off for this function, so planned from defaults (a table never
-- analyzed, or never vacuumed: reltuples -1, a flash sale's first minute, a restore) no
-- statement turns into a scan of a whole table; the lines are read by a condition on the array
-- alone (order_no = ANY), which only their primary key serves, never joined with the winners,
-- which the planner may turn into a walk of all lines. jit is off too: estimated from defaults, the claim's cost
-- passes jit_above_cost and compiling it took about 300 ms, for a statement that runs in 10.
-- enable_bitmapscan is off as well: each key probe returns one row (an order) or a few (its
-- lines), for which a bitmap (built, then walked) cost more instructions than a plain index scan
-- (tools/bench/sql/bench_instructions.sh cancel: about 2,700 per order for the lines alone).
-- None of these settings leaves this function: the hooks run outside it.
CREATE OR REPLACE FUNCTION ordergate._cancel_orders_claim(p_nos text[], p_source text, p_actor text,
                                                          p_note text, p_due_only boolean,
                                                          OUT o_won text[], OUT o_skus text[], OUT o_qtys bigint[])
LANGUAGE plpgsql
SET search_path = ordergate, pg_temp
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
AS $$
DECLARE
    v_locked  tid[];
    v_coupons text[];
    v_parts   text[];                         -- winners with captured parts
    v_at      text := to_json(now())::text;   -- closed_at of every winner, formatted once
    v_actor   text := to_json(p_actor)::text;
    v_mid     text;                           -- the event's parts the batch shares, joined once
    v_tail    text;
    v_noshop  text;
    v_noshopi text;
BEGIN
    -- The lock pass looks each listed order up by its primary key, in order_no order, and locks
    -- the rows in that order. Timeouts (p_due_only) skip a row another transaction holds locked
    -- (a payment or hold in flight, an order service's open transaction): one locked order must
    -- not hold the whole batch, and claim_cancel reports it busy for the caller to retry. Two
    -- timeout batches sharing orders therefore never wait for each other on orders. The manual
    -- close waits for the lock and re-checks the row; if it left pending it is not locked.
    --
    -- Timeouts: one index scan of orders_pkey for the whole array (order_no = ANY: the btree
    -- sorts the array, drops repeats and walks it, one descent per distinct order number, rows
    -- in order_no order), each row locked as it comes. The state is compared with an initplan's
    -- value, (SELECT 'pending_payment'), not with the literal: the planner cannot prove the
    -- partial overdue index's predicate (status = 'pending_payment') from it, so that index is
    -- never a candidate, and the only index the condition fits is the primary key, whatever the
    -- statistics say or whether the plan is generic (with the literal, planned from defaults,
    -- the planner could walk every pending order in the overdue index and test it against the
    -- array: schema/README.md, "Plan stability"). A LATERAL probe per order number, driven by
    -- the array sorted and made distinct first, read the same entries but set up and rescanned
    -- its scan for every order: about 5,600 instructions more per cancelled order.
    IF p_due_only THEN
        SELECT array_agg(l.ctid) INTO v_locked
          FROM (SELECT o.ctid
                  FROM ordergate.orders o
                 WHERE o.order_no = ANY (p_nos)
                   AND o.status = (SELECT 'pending_payment'::text)
                   AND o.expire_at <= now()
                   AND (o.charge_until IS NULL OR o.charge_until <= now())
                   FOR NO KEY UPDATE SKIP LOCKED) l;
    ELSE
        -- The manual close (one order): a LATERAL probe per distinct order number, in order.
        SELECT array_agg(l.ctid) INTO v_locked
          FROM (SELECT u.x FROM unnest(p_nos) AS u(x) GROUP BY u.x ORDER BY u.x) n
         CROSS JOIN LATERAL (
                SELECT o.ctid
                  FROM ordergate.orders o
                 WHERE o.order_no = n.x
                   AND o.status = 'pending_payment'
                   FOR NO KEY UPDATE) l;
    END IF;
    IF v_locked IS NULL THEN
        RETURN;
    END IF;
    -- The event's text between the order number and the amount, and between the shop and the
    -- currency, is the same for every winner of the batch: joined here once, each event is four
    -- concatenations shorter (about 1,500 instructions per cancelled order). v_noshop: the text
    -- from the items' end to the currency of an order without shop data (v_noshopi: the same
    -- after a last item, whose closing brace it carries); with the coupon's "null" written as one
    -- literal too, an order without coupon and shop data takes three concatenations fewer again.
    v_mid := '", "source": "' || p_source || '", "actor": ' || v_actor || ', "amount_cents": ';
    v_tail := ', "cancelled_at": ' || v_at || ', "currency": "';
    v_noshop := '], "shop": null' || v_tail;
    v_noshopi := '}' || v_noshop;

    WITH won AS (
        UPDATE ordergate.orders o
           SET status = 'cancelled', closed_at = now()
         WHERE o.ctid = ANY (v_locked)
        -- No status re-check: every locked version was pending when the lock pass took it, and
        -- the lock we hold keeps it so until the commit (the state-machine trigger refuses
        -- anything else regardless). A status predicate here would let the planner pick a walk
        -- of the partial overdue index instead of the TID scan.
        RETURNING o.order_no, o.amount_cents, o.coupon_id, o.shop, o.currency, o.captured_cents
    ), l AS (
        INSERT INTO ordergate.status_log
               (order_no, from_status, to_status, source, idempotency_key, actor, note)
        SELECT won.order_no, 'pending_payment', 'cancelled', p_source, won.order_no, p_actor, p_note
          FROM won
        -- No RETURNING here nor in ev: nothing reads them, and a RETURNING list is projected
        -- for every row written.
    ), wi AS (
        -- The winners' lines, read once, for the events' items and for the stock to give back:
        -- one index scan of order_items' primary key for the array of winners (the btree walks
        -- the sorted array, one descent per order; the winners are distinct, so each line comes
        -- once). A LATERAL probe per winner read the same entries but set up and rescanned the
        -- scan for every winner: about 4,000 instructions more per cancelled order.
        SELECT it.order_no, it.sku, it.qty
          FROM ordergate.order_items it
         WHERE it.order_no = ANY (ARRAY(SELECT won.order_no FROM won))
    ), ws AS (
        -- Stock to give back, summed per sku (an UPDATE ... FROM with repeated skus would
        -- apply only one of them). Read twice (the results, and the check of the skus below),
        -- so computed once.
        SELECT wi.sku, sum(wi.qty)::bigint AS q FROM wi GROUP BY wi.sku
    ), wa AS (
        -- Each winner's items in sku order: the lines sorted once by (order_no, sku) and
        -- aggregated in that order (string_agg takes its input as the sorted subquery gives it).
        -- string_agg(... ORDER BY sku) would give the same text, at the price of one sort set up
        -- and run per winner.
        -- Each item is '{"sku": ' || to_json(sku)::text || ', "qty": ' || qty || '}', written
        -- with two concatenations instead of four: the text between one item's sku and the
        -- next one's ('", "qty": ' before the quantity, '}, {"sku": "' as string_agg's
        -- separator) is spliced per item, the first item's '{"sku": "' and the last one's '}'
        -- by the event's literals. A sku is text that to_json escapes only for '"', '\' and
        -- the control characters U+0001 to U+001F; when none of the batch's distinct skus has
        -- one of them (one match over them all, the scalar subquery below, run once per
        -- statement), to_json(sku)::text is '"' || sku || '"', and the sku is spliced as it is,
        -- without to_json's lookup of the type's output function on every call (about 2,000
        -- instructions per line); else each sku goes through to_json, its quotes taken off.
        -- The pattern is an E'' string: this SQL is parsed in the caller's session, and a plain
        -- literal's backslashes would mean something else under standard_conforming_strings off.
        SELECT s.order_no,
               string_agg(CASE WHEN (SELECT string_agg(ws.sku, '') !~ E'[\\x01-\\x1f"\\\\]' FROM ws)
                               THEN s.sku
                               ELSE left(substr(to_json(s.sku)::text, 2), -1)
                          END || '", "qty": ' || s.qty, '}, {"sku": "') AS items
          FROM (SELECT wi.order_no, wi.sku, wi.qty FROM wi ORDER BY wi.order_no, wi.sku) s
         GROUP BY s.order_no
    ), ev AS (
        INSERT INTO ordergate.outbox (event_type, order_no, payload)
        SELECT 'order_cancelled', won.order_no,
               -- The document jsonb_build_object('v', 1, 'event', 'order_cancelled', 'order_no',
               -- ..., 'source', ..., 'actor', ..., 'amount_cents', ..., 'coupon_id', ...,
               -- 'items', ..., 'cancelled_at', ..., 'currency', ...) would give, spliced as text
               -- at a fraction of its cost. Safe: order_no is [A-Za-z0-9._:-] (checked by the
               -- table), source one of four words, amount an integer, currency a code of
               -- currencies ([A-Z]{3}, its foreign key); actor, coupon_id and the timestamp go
               -- through to_json, each sku through to_json or as to_json would write it (wa). The
               -- json cast checks the result is valid JSON.
               -- items: the order's lines in sku order ([] for a gate-only order), so a reader
               -- can restock from the event alone; shop: the shop's own data given to
               -- place_order (null if none), a jsonb whose text form is valid JSON.
               -- v_mid: source, actor, the amount's key; v_tail: cancelled_at, the currency's key.
               ('{"v": 1, "event": "order_cancelled", "order_no": "' || won.order_no
                || v_mid || won.amount_cents
                || CASE WHEN won.coupon_id IS NOT NULL
                        THEN ', "coupon_id": ' || to_json(won.coupon_id)::text
                             || CASE WHEN wa.items IS NULL THEN ', "items": ['
                                     ELSE ', "items": [{"sku": "' END
                        WHEN wa.items IS NULL THEN ', "coupon_id": null, "items": ['
                        ELSE ', "coupon_id": null, "items": [{"sku": "'
                   END
                || coalesce(wa.items, '')
                || CASE WHEN won.shop IS NOT NULL
                        THEN CASE WHEN wa.items IS NULL THEN '], "shop": ' ELSE '}], "shop": ' END
                             || won.shop::text || v_tail
                        WHEN wa.items IS NULL THEN v_noshop
                        ELSE v_noshopi
                   END
                || won.currency || '"}')::json
          FROM won
          LEFT JOIN wa ON wa.order_no = won.order_no
    )
    -- The results read won once and ws once (a subquery per value read each again). The stock's
    -- two arrays are aggregated from one sort of ws by sku, in that order (as wa's string_agg
    -- takes its sorted subquery's order), so both list the skus in the same order, the order
    -- _cancel_orders_restock locks them in; array_agg(... ORDER BY sku) for each sorted ws
    -- twice (about 1,100 instructions per cancelled order more with 500 orders over 200 SKUs).
    -- ws is computed once (it has two readers), so the sort is of its summed rows, not of
    -- every line.
    SELECT a.nos, a.coupons, s.skus, s.qtys, a.parts
      FROM (SELECT array_agg(won.order_no) AS nos,
                   array_agg(won.coupon_id) FILTER (WHERE won.coupon_id IS NOT NULL) AS coupons,
                   array_agg(won.order_no) FILTER (WHERE won.captured_cents > 0) AS parts
              FROM won) a,
           (SELECT array_agg(w.sku) AS skus, array_agg(w.q) AS qtys
              FROM (SELECT ws.sku, ws.q FROM ws ORDER BY ws.sku) w) s
      INTO o_won, v_coupons, o_skus, o_qtys, v_parts;

    IF o_won IS NULL THEN
        RETURN;
    END IF;

    -- Captured parts of the winners (allow_partial orders cancelled before the parts reached the
    -- amount): each part becomes an exception cancelled_part asking for its refund, auto within
    -- the currency's limit (_refund_limit), else reviewed, with its event. Only the winners with
    -- captured_cents > 0 are looked at: orders without parts pay nothing here. A part committed
    -- before our lock on the order is visible to this statement's snapshot (taken after the
    -- lock pass) and counted in the captured_cents we read; a part that comes later waits for
    -- our lock and finds the order cancelled (late_payment). Each part's payment is probed by
    -- the order's index (payments_order_no_idx) and keeps its outcome, partial.
    IF v_parts IS NOT NULL THEN
        WITH pt AS (
            SELECT p.txn_no, p.order_no, p.amount_cents, p.channel, p.currency,
                   CASE WHEN p.amount_cents <= _refund_limit(p.currency)
                        THEN 'auto_refund' ELSE 'manual_review' END AS res
              FROM unnest(v_parts) AS n(order_no)
             CROSS JOIN LATERAL (SELECT q.txn_no, q.order_no, q.amount_cents, q.channel, q.currency
                                   FROM ordergate.payments q
                                  WHERE q.order_no = n.order_no AND q.outcome = 'partial'
                                 OFFSET 0) p
        ), x AS (
            INSERT INTO ordergate.exceptions (order_no, kind, txn_no, amount_cents, resolution,
                                              currency, note)
            SELECT pt.order_no, 'cancelled_part', pt.txn_no, pt.amount_cents, pt.res, pt.currency,
                   format('part %s via %s of an order cancelled (%s): refund it',
                          pt.txn_no, pt.channel, p_source)
              FROM pt
            RETURNING id, order_no, txn_no, amount_cents, resolution, currency
        )
        INSERT INTO ordergate.outbox (event_type, order_no, payload)
        SELECT CASE x.resolution WHEN 'auto_refund' THEN 'refund_requested' ELSE 'reconciliation_alert' END,
               x.order_no,
               jsonb_build_object('v', 1,
                                  'event', CASE x.resolution WHEN 'auto_refund' THEN 'refund_requested'
                                                             ELSE 'reconciliation_alert' END,
                                  'order_no', x.order_no, 'txn_no', x.txn_no,
                                  'amount_cents', x.amount_cents, 'kind', 'cancelled_part',
                                  'resolution', x.resolution, 'exception_id', x.id,
                                  'order_status', 'cancelled', 'source', p_source, 'actor', p_actor,
                                  'currency', x.currency)
          FROM x;
    END IF;

    IF v_coupons IS NOT NULL THEN
        UPDATE ordergate.coupons c
           SET state = 'available'
         WHERE c.coupon_id = ANY (v_coupons)
           AND c.state = 'locked';
    END IF;
END
$$;
COMMENT ON FUNCTION ordergate._cancel_orders_claim(text[],text,text,text,boolean) IS
    'Internal: cancel step 1: lock and claim the orders, log, events, coupons; returns the stock to give back';

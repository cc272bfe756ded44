-- archive: retention. Moves closed history older than p_before from the hot tables to the
-- archived_* tables (migration 007), one batch of at most p_batch orders per call; call it again
-- while `more` is true (ordergatectl archive does). Admin only.
--
-- An order moves when it is closed (paid, cancelled or released) with closed_at < p_before, no exception of
-- it is open and every outbox event of it is published; it moves with its order_items, its
-- status_log rows, its payments, its charges, its amendments and deadline changes, its
-- reminders, its exceptions, their refunds and its outbox events,
-- all in this transaction, every column with it (currency, parts, a staff payment's operator and
-- reason, a charge's bound). A charge still pending moves too: its order is closed, and a late
-- capture or failure of it answers from archived_charges. Beside orders, one call also moves up
-- to p_batch closed exceptions of no order in
-- the hot table (unknown orders, refused payments, late payments for archived orders) with their
-- payments and refunds, up to p_batch published outbox events of no order in the hot table, and
-- deletes up to p_batch finished scanner runs and up to p_batch reconciliation runs (never the
-- newest of either); all older than p_before.
-- Pending orders, open exceptions and unpublished events are never touched.
--
-- Races: the orders are locked FOR UPDATE SKIP LOCKED, so an order a claim, a payment or an
-- order service holds is left for a later run instead of waited for, and a payment that comes
-- after the lock waits and then finds the order archived (claim_payment looks there). Their
-- exceptions are locked the same way (an order whose exception record_refund holds is left; a
-- refund result that comes after the lock waits and then answers from the archive). The open
-- exception and unpublished event conditions are checked again after the lock, on a snapshot
-- that sees every payment that committed before it. Lock order as the gate's: orders, then
-- exceptions, then inventory by sku, last (hot SKU rows stay locked only until the commit).
--
-- One row never fails the batch: an order (with all its rows), a detached exception or a
-- detached event whose key is already in the archive (an order number placed again before
-- place_order looked at the archive, a reference recorded twice, a row copied by hand) is
-- skipped and the rest moves. Order numbers are probed in archived_orders for every candidate;
-- any other archived key fails the move (in a subtransaction) with 23505, and only then is
-- every key of the batch probed and the move tried once more without the orders that hit one.
--
-- Result: rows moved per table (scanner_runs: sweep and reconciliation runs deleted), kept = rows locked as candidates but
-- left in the hot tables: orders a payment or a refund result settled meanwhile (a later run
-- takes them), plus skipped rows (every run meets them again until an operator resolves them;
-- a WARNING names up to ten with the reason), more = some batch was full (call again).
--
-- Invariant 2 over what remains: a paid or released order's lines add their qty to
-- inventory.archived_qty. A released order archived before its payment came stays so: that
-- payment is reviewed by hand (claim_payment: amount_mismatch, manual_review).
-- Errors: 22023 for a NULL or future p_before, or p_batch outside 1..100000 (nothing changes).
CREATE OR REPLACE FUNCTION ordergate.archive(p_before timestamptz, p_batch int DEFAULT 10000)
RETURNS TABLE (orders bigint, order_items bigint, status_log bigint, payments bigint,
               exceptions bigint, refunds bigint, outbox bigint, scanner_runs bigint,
               kept bigint, more boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_orders text[];
    v_locked int;
    v_exc    bigint[];
    v_ev     bigint[];
    v_busy   text[];
    v_skip   text[];
    v_skip2  text[];
    v_why2   text[];
    v_exc_skip bigint[];
    v_ev_skip  bigint[];
    v_why      text[];
    v_exc_why  text[];
    v_ev_why   text[];
    v_skus   text[];
    v_qty    bigint[];
    n_orders bigint := 0;
    n_items  bigint := 0;
    n_log    bigint := 0;
    n_pay    bigint := 0;
    n_exc    bigint := 0;
    n_ref    bigint := 0;
    n_out    bigint := 0;
    n_runs   bigint := 0;
    n_kept   bigint := 0;
    v_n      bigint;
    v_more   boolean := false;
BEGIN
    IF p_before IS NULL THEN
        PERFORM _bad_arg('archive: p_before is required (archive history closed before it)');
    END IF;
    IF p_before > now() THEN
        PERFORM _bad_arg(format('archive: p_before %s is in the future', p_before));
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        PERFORM _bad_arg('archive: p_batch must be 1..100000');
    END IF;

    PERFORM set_config('ordergate.archiving', pg_current_xact_id()::text, true);

    -- Orders: lock a batch of candidates, oldest closed first. The two NOT EXISTS are probes by
    -- order_no per candidate whatever the statistics say: the inner OFFSET 0 keeps the state
    -- test out of the scan, so the only index that fits is the one on order_no, and the outer
    -- OFFSET 0 keeps each a correlated subplan. Planned as an anti-join, or through the small
    -- partial indexes of open exceptions and unpublished events, every candidate was compared
    -- with every such row (10,000 candidates x 2,500 unpublished events: 2 to 7 s a batch).
    SELECT array_agg(c.order_no), count(*)
      INTO v_orders, v_locked
      FROM (SELECT o.order_no
              FROM orders o
             WHERE o.status <> 'pending_payment'
               AND o.closed_at < p_before
               AND NOT EXISTS (SELECT 1
                                 FROM (SELECT x.state FROM exceptions x
                                        WHERE x.order_no = o.order_no OFFSET 0) x
                                WHERE x.state = 'open' OFFSET 0)
               AND NOT EXISTS (SELECT 1
                                 FROM (SELECT b.published_at FROM outbox b
                                        WHERE b.order_no = o.order_no OFFSET 0) b
                                WHERE b.published_at IS NULL OFFSET 0)
             ORDER BY o.closed_at
             LIMIT p_batch
               FOR UPDATE OF o SKIP LOCKED) c;
    v_more := v_locked >= p_batch;

    IF v_locked > 0 THEN
        -- Their exceptions too, without waiting: one that record_refund holds (it may add a
        -- refund or an event) keeps its order for a later run, instead of failing this batch's
        -- delete on the new refund row or moving the new event unpublished.
        WITH l AS (
            SELECT x.id FROM exceptions x WHERE x.order_no = ANY (v_orders)
               FOR UPDATE OF x SKIP LOCKED
        )
        SELECT array_agg(DISTINCT x.order_no)
          INTO v_busy
          FROM exceptions x
         WHERE x.order_no = ANY (v_orders)
           AND x.id NOT IN (SELECT l.id FROM l);

        -- Again on a newer snapshot: a payment that committed between the first snapshot and the
        -- lock may have opened an exception or written an event.
        SELECT array_agg(n.order_no ORDER BY n.order_no)
          INTO v_orders
          FROM unnest(v_orders) AS n(order_no)
         WHERE n.order_no <> ALL (coalesce(v_busy, '{}'))
           AND NOT EXISTS (SELECT 1
                             FROM (SELECT x.state FROM exceptions x
                                    WHERE x.order_no = n.order_no OFFSET 0) x
                            WHERE x.state = 'open' OFFSET 0)
           AND NOT EXISTS (SELECT 1
                             FROM (SELECT b.published_at FROM outbox b
                                    WHERE b.order_no = n.order_no OFFSET 0) b
                            WHERE b.published_at IS NULL OFFSET 0);
        n_kept := v_locked - coalesce(cardinality(v_orders), 0);
    END IF;

    -- Rows that cannot move: a key of the order or of one of its rows is already archived. An
    -- order number is the one that happens (placed again before place_order looked at the
    -- archive): probed here for every candidate, in archived_orders' primary key (OFFSET 0: a
    -- probe per candidate, never a join that reads the archive whole). The order is
    -- skipped: it stays whole in the hot tables, the rest of the batch moves, and it is counted
    -- in kept and named in a WARNING.
    IF v_orders IS NOT NULL THEN
        SELECT array_agg(n.order_no ORDER BY n.order_no),
               array_agg(format('order %s: order_no already archived', n.order_no) ORDER BY n.order_no)
          INTO v_skip, v_why
          FROM unnest(v_orders) AS n(order_no)
         WHERE EXISTS (SELECT 1 FROM archived_orders a WHERE a.order_no = n.order_no OFFSET 0);
        IF v_skip IS NOT NULL THEN
            n_kept := n_kept + cardinality(v_skip);
            SELECT array_agg(n.order_no ORDER BY n.order_no)
              INTO v_orders
              FROM unnest(v_orders) AS n(order_no)
             WHERE n.order_no <> ALL (v_skip);
        END IF;
    END IF;

    -- The move, in a subtransaction: any other key already archived (a payment, exception,
    -- refund or event copied by hand, a log row or lines without their order) fails it with
    -- 23505. Then every key of every order is probed in the archive, the orders that hit one
    -- are skipped as above, and the rest moves on the second try. The probes cost a batch only
    -- when it needs them.
    FOR v_try IN 1 .. 2 LOOP
        EXIT WHEN v_orders IS NULL;
        BEGIN
            WITH d AS (
                DELETE FROM refunds r
                 USING exceptions x
                 WHERE x.id = r.exception_id AND x.order_no = ANY (v_orders)
                RETURNING r.*
            )
            INSERT INTO archived_refunds (refund_ref, txn_no, exception_id, outcome, actor, recorded_at)
            SELECT d.refund_ref, d.txn_no, d.exception_id, d.outcome, d.actor, d.recorded_at FROM d;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            n_ref := n_ref + v_n;

            WITH d AS (DELETE FROM exceptions x WHERE x.order_no = ANY (v_orders) RETURNING x.*)
            INSERT INTO archived_exceptions (id, order_no, kind, txn_no, amount_cents, resolution, state,
                                             note, created_at, resolved_at, resolved_by, refused_key,
                                             currency)
            SELECT d.id, d.order_no, d.kind, d.txn_no, d.amount_cents, d.resolution, d.state, d.note,
                   d.created_at, d.resolved_at, d.resolved_by, d.refused_key, d.currency FROM d;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            n_exc := n_exc + v_n;

            WITH d AS (DELETE FROM payments p WHERE p.order_no = ANY (v_orders) RETURNING p.*)
            INSERT INTO archived_payments (txn_no, order_no, amount_cents, channel, outcome, created_at,
                                           currency, operator, reason, charge_ref)
            SELECT d.txn_no, d.order_no, d.amount_cents, d.channel, d.outcome, d.created_at,
                   d.currency, d.operator, d.reason, d.charge_ref FROM d;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            n_pay := n_pay + v_n;

            -- Before the orders, which they reference. Not counted in the result: its columns
            -- stay as callers read them.
            WITH d AS (DELETE FROM charges c WHERE c.order_no = ANY (v_orders) RETURNING c.*)
            INSERT INTO archived_charges (charge_ref, order_no, state, begun_at, bound_at, ended_at,
                                          txn_no, ended_late)
            SELECT d.charge_ref, d.order_no, d.state, d.begun_at, d.bound_at, d.ended_at, d.txn_no,
                   d.ended_late FROM d;

            -- Its reminders, before the orders they reference; not counted either.
            WITH d AS (DELETE FROM reminders r WHERE r.order_no = ANY (v_orders) RETURNING r.*)
            INSERT INTO archived_reminders (order_no, offset_seconds, state, created_at, due_at,
                                            sent_at, ended_at, skip_reason)
            SELECT d.order_no, d.offset_seconds, d.state, d.created_at, d.due_at, d.sent_at,
                   d.ended_at, d.skip_reason FROM d;

            WITH d AS (DELETE FROM outbox b WHERE b.order_no = ANY (v_orders) RETURNING b.*)
            INSERT INTO archived_outbox (id, event_type, order_no, payload, created_at, published_at)
            SELECT d.id, d.event_type, d.order_no, d.payload, d.created_at, d.published_at FROM d;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            n_out := n_out + v_n;

            WITH d AS (DELETE FROM status_log l WHERE l.order_no = ANY (v_orders) RETURNING l.*)
            INSERT INTO archived_status_log (order_no, id, from_status, to_status, source,
                                             idempotency_key, actor, note, created_at)
            SELECT d.order_no, d.id, d.from_status, d.to_status, d.source, d.idempotency_key, d.actor,
                   d.note, d.created_at FROM d;
            GET DIAGNOSTICS n_log = ROW_COUNT;

            -- Amendments and deadline changes, before the orders they reference. Not counted
            -- in the result, as charges.
            WITH d AS (DELETE FROM amendments m WHERE m.order_no = ANY (v_orders) RETURNING m.*)
            INSERT INTO archived_amendments (id, order_no, operator, amended_at, before, after)
            SELECT d.id, d.order_no, d.operator, d.amended_at, d.before, d.after FROM d;
            WITH d AS (DELETE FROM deadline_changes c WHERE c.order_no = ANY (v_orders) RETURNING c.*)
            INSERT INTO archived_deadline_changes (id, order_no, operator, changed_at, before, after)
            SELECT d.id, d.order_no, d.operator, d.changed_at, d.before, d.after FROM d;

            -- The lines, and per sku the qty paid and released orders keep (invariant 2), in sku
            -- order.
            WITH d AS (DELETE FROM order_items it WHERE it.order_no = ANY (v_orders) RETURNING it.*),
            ins AS (
                INSERT INTO archived_order_items (order_no, sku, qty)
                SELECT d.order_no, d.sku, d.qty FROM d
                RETURNING 1
            ), sold AS (
                -- A probe per line (OFFSET 0: a correlated subplan): as a join the planner hashed
                -- every paid order in the table (1.1 s a batch at 2.8 million paid orders).
                SELECT d.sku, sum(d.qty)::bigint AS q
                  FROM d
                 WHERE EXISTS (SELECT 1 FROM orders o
                                WHERE o.order_no = d.order_no AND o.status IN ('paid', 'released')
                                OFFSET 0)
                 GROUP BY d.sku
            )
            SELECT (SELECT count(*) FROM ins),
                   array_agg(sold.sku ORDER BY sold.sku), array_agg(sold.q ORDER BY sold.sku)
              INTO n_items, v_skus, v_qty
              FROM sold;

            WITH d AS (DELETE FROM orders o WHERE o.order_no = ANY (v_orders) RETURNING o.*)
            INSERT INTO archived_orders (order_no, status, amount_cents, coupon_id, expire_at,
                                         original_expire_at, created_at, closed_at, shop,
                                         currency, allow_partial, captured_cents, charge_until,
                                         held_until)
            SELECT d.order_no, d.status, d.amount_cents, d.coupon_id, d.expire_at,
                   d.original_expire_at, d.created_at, d.closed_at, d.shop,
                   d.currency, d.allow_partial, d.captured_cents, d.charge_until,
                   d.held_until FROM d;
            GET DIAGNOSTICS n_orders = ROW_COUNT;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            IF v_try = 2 THEN
                RAISE;
            END IF;
            n_items := 0; n_log := 0; n_pay := 0; n_exc := 0; n_ref := 0; n_out := 0;
            v_skus := NULL; v_qty := NULL;
            SELECT array_agg(c.order_no ORDER BY c.order_no),
                   array_agg(format('order %s: %s', c.order_no, c.why) ORDER BY c.order_no)
              INTO v_skip2, v_why2
              FROM (SELECT n.order_no,
                           coalesce(
                               (SELECT 'order_no already archived' FROM archived_orders a
                                 WHERE a.order_no = n.order_no),
                               (SELECT 'status_log row already archived' FROM archived_status_log a
                                 WHERE a.order_no = n.order_no),
                               (SELECT 'order_items already archived' FROM archived_order_items a
                                 WHERE a.order_no = n.order_no LIMIT 1),
                               (SELECT 'payment ' || p.txn_no || ' already archived'
                                  FROM payments p JOIN archived_payments a ON a.txn_no = p.txn_no
                                 WHERE p.order_no = n.order_no LIMIT 1),
                               (SELECT 'exception ' || x.id || ' already archived'
                                  FROM exceptions x JOIN archived_exceptions a ON a.id = x.id
                                 WHERE x.order_no = n.order_no LIMIT 1),
                               (SELECT 'refund ' || r.refund_ref || ' already archived'
                                  FROM exceptions x
                                  JOIN refunds r ON r.exception_id = x.id
                                  JOIN archived_refunds a ON a.refund_ref = r.refund_ref
                                 WHERE x.order_no = n.order_no LIMIT 1),
                               (SELECT 'charge ' || c.charge_ref || ' already archived'
                                  FROM charges c JOIN archived_charges a ON a.charge_ref = c.charge_ref
                                 WHERE c.order_no = n.order_no LIMIT 1),
                               (SELECT 'amendment ' || m.id || ' already archived'
                                  FROM amendments m JOIN archived_amendments a ON a.id = m.id
                                 WHERE m.order_no = n.order_no LIMIT 1),
                               (SELECT 'deadline change ' || c.id || ' already archived'
                                  FROM deadline_changes c
                                  JOIN archived_deadline_changes a ON a.id = c.id
                                 WHERE c.order_no = n.order_no LIMIT 1),
                               (SELECT 'reminder ' || r.offset_seconds || ' already archived'
                                  FROM reminders r
                                  JOIN archived_reminders a
                                    ON a.order_no = r.order_no AND a.offset_seconds = r.offset_seconds
                                 WHERE r.order_no = n.order_no LIMIT 1),
                               (SELECT 'event ' || b.id || ' already archived'
                                  FROM outbox b JOIN archived_outbox a ON a.id = b.id
                                 WHERE b.order_no = n.order_no LIMIT 1)) AS why
                      FROM unnest(v_orders) AS n(order_no)) c
             WHERE c.why IS NOT NULL;
            IF v_skip2 IS NULL THEN
                RAISE;
            END IF;
            n_kept := n_kept + cardinality(v_skip2);
            v_why := v_why || v_why2;
            SELECT array_agg(n.order_no ORDER BY n.order_no)
              INTO v_orders
              FROM unnest(v_orders) AS n(order_no)
             WHERE n.order_no <> ALL (v_skip2);
        END;
    END LOOP;

    -- Closed exceptions of no order in the hot table, with their payments and refunds: read from
    -- the detached ones only (exceptions_detached_idx, migration 009), never the whole table.
    SELECT array_agg(c.id ORDER BY c.id)
      INTO v_exc
      FROM (SELECT x.id
              FROM exceptions x
             WHERE x.detached
               AND x.state <> 'open'
               AND x.created_at < p_before
               AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_no = x.order_no)
             ORDER BY x.id
             LIMIT p_batch
               FOR UPDATE OF x SKIP LOCKED) c;
    IF v_exc IS NOT NULL THEN
        v_more := v_more OR cardinality(v_exc) >= p_batch;
        -- Skipped, as orders are: an exception whose id, refund reference or payment (when it
        -- would move) is already archived.
        SELECT array_agg(c.id ORDER BY c.id),
               array_agg(format('exception %s: %s', c.id, c.why) ORDER BY c.id)
          INTO v_exc_skip, v_exc_why
          FROM (SELECT e.id,
                       coalesce(
                           (SELECT 'id already archived' FROM archived_exceptions a WHERE a.id = e.id),
                           (SELECT 'refund ' || r.refund_ref || ' already archived'
                              FROM refunds r JOIN archived_refunds a ON a.refund_ref = r.refund_ref
                             WHERE r.exception_id = e.id LIMIT 1),
                           (SELECT 'payment ' || p.txn_no || ' already archived'
                              FROM exceptions x
                              JOIN payments p ON p.txn_no = x.txn_no
                              JOIN archived_payments a ON a.txn_no = p.txn_no
                             WHERE x.id = e.id
                               AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_no = p.order_no))) AS why
                  FROM unnest(v_exc) AS e(id)) c
         WHERE c.why IS NOT NULL;
        IF v_exc_skip IS NOT NULL THEN
            n_kept := n_kept + cardinality(v_exc_skip);
            v_why := v_why || v_exc_why;
            SELECT array_agg(e.id ORDER BY e.id) INTO v_exc
              FROM unnest(v_exc) AS e(id) WHERE e.id <> ALL (v_exc_skip);
        END IF;
    END IF;
    IF v_exc IS NOT NULL THEN
        WITH d AS (DELETE FROM refunds r WHERE r.exception_id = ANY (v_exc) RETURNING r.*)
        INSERT INTO archived_refunds (refund_ref, txn_no, exception_id, outcome, actor, recorded_at)
        SELECT d.refund_ref, d.txn_no, d.exception_id, d.outcome, d.actor, d.recorded_at FROM d;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        n_ref := n_ref + v_n;

        WITH d AS (
            DELETE FROM payments p
             USING exceptions x
             WHERE x.id = ANY (v_exc) AND p.txn_no = x.txn_no
               AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_no = p.order_no)
            RETURNING p.*
        )
        INSERT INTO archived_payments (txn_no, order_no, amount_cents, channel, outcome, created_at,
                                       currency, operator, reason, charge_ref)
        SELECT d.txn_no, d.order_no, d.amount_cents, d.channel, d.outcome, d.created_at,
               d.currency, d.operator, d.reason, d.charge_ref FROM d;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        n_pay := n_pay + v_n;

        WITH d AS (DELETE FROM exceptions x WHERE x.id = ANY (v_exc) RETURNING x.*)
        INSERT INTO archived_exceptions (id, order_no, kind, txn_no, amount_cents, resolution, state,
                                         note, created_at, resolved_at, resolved_by, refused_key,
                                         currency)
        SELECT d.id, d.order_no, d.kind, d.txn_no, d.amount_cents, d.resolution, d.state, d.note,
               d.created_at, d.resolved_at, d.resolved_by, d.refused_key, d.currency FROM d;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        n_exc := n_exc + v_n;
    END IF;

    -- Published events of no order in the hot table (alerts and refund requests for unknown or
    -- archived orders), oldest first, read from the detached ones only (outbox_detached_idx).
    -- Transition events always move with their order.
    -- An event whose id is already archived is skipped (kept, named in the WARNING).
    SELECT array_agg(c.id ORDER BY c.id)
      INTO v_ev
      FROM (SELECT b.id
              FROM outbox b
             WHERE b.detached
               AND b.published_at IS NOT NULL
               AND b.created_at < p_before
               AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_no = b.order_no)
             ORDER BY b.id
             LIMIT p_batch
               FOR UPDATE OF b SKIP LOCKED) c;
    IF v_ev IS NOT NULL THEN
        v_more := v_more OR cardinality(v_ev) >= p_batch;
        SELECT array_agg(e.id ORDER BY e.id),
               array_agg(format('event %s: id already archived', e.id) ORDER BY e.id)
          INTO v_ev_skip, v_ev_why
          FROM unnest(v_ev) AS e(id)
         WHERE EXISTS (SELECT 1 FROM archived_outbox a WHERE a.id = e.id OFFSET 0);
        IF v_ev_skip IS NOT NULL THEN
            n_kept := n_kept + cardinality(v_ev_skip);
            v_why := v_why || v_ev_why;
        END IF;
        WITH d AS (
            DELETE FROM outbox b
             WHERE b.id = ANY (v_ev) AND b.id <> ALL (coalesce(v_ev_skip, '{}'))
            RETURNING b.*
        )
        INSERT INTO archived_outbox (id, event_type, order_no, payload, created_at, published_at)
        SELECT d.id, d.event_type, d.order_no, d.payload, d.created_at, d.published_at FROM d;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        n_out := n_out + v_n;
    END IF;

    -- The scanner's run log is operations, not money: finished runs are dropped, the newest and the
    -- one the lease names (migration 006) kept.
    DELETE FROM scanner_runs s
     WHERE s.run_id IN (SELECT r.run_id
                          FROM scanner_runs r
                         WHERE r.status <> 'running'
                           AND r.finished_at < p_before
                           AND r.run_id < (SELECT max(m.run_id) FROM scanner_runs m)
                           AND NOT EXISTS (SELECT 1 FROM scanner_lease l WHERE l.run_id = r.run_id)
                         ORDER BY r.run_id
                         LIMIT p_batch);
    GET DIAGNOSTICS n_runs = ROW_COUNT;
    v_more := v_more OR n_runs >= p_batch;
    -- Reconciliation runs (migration 022) likewise, the newest kept; counted with the sweep's.
    DELETE FROM reconcile_runs s
     WHERE s.run_id IN (SELECT r.run_id
                          FROM reconcile_runs r
                         WHERE r.finished_at < p_before
                           AND r.run_id < (SELECT max(m.run_id) FROM reconcile_runs m)
                         ORDER BY r.run_id
                         LIMIT p_batch);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    n_runs := n_runs + v_n;
    v_more := v_more OR v_n >= p_batch;

    -- Last: stock rows in sku order, locked only until the commit.
    IF v_skus IS NOT NULL THEN
        PERFORM 1 FROM inventory i WHERE i.sku = ANY (v_skus) ORDER BY i.sku FOR UPDATE;
        UPDATE inventory i
           SET archived_qty = i.archived_qty + s.q
          FROM unnest(v_skus, v_qty) AS s(sku, q)
         WHERE i.sku = s.sku;
    END IF;

    -- The skipped rows stay where they are, and every later run meets them again: say which,
    -- and why (an operator resolves them, docs/operations.md, "Retention").
    IF v_why IS NOT NULL THEN
        RAISE WARNING 'archive: % row(s) skipped, their keys are already archived: %',
            cardinality(v_why), array_to_string(v_why[1:10], '; ')
              || CASE WHEN cardinality(v_why) > 10 THEN '; ...' ELSE '' END
            USING ERRCODE = '01000',
                  HINT = 'They stay in the hot tables, counted in kept; see docs/operations.md, "Retention".';
    END IF;

    PERFORM set_config('ordergate.archiving', '', true);
    RETURN QUERY SELECT n_orders, n_items, n_log, n_pay, n_exc, n_ref, n_out, n_runs, n_kept, v_more;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.archive(timestamptz,int) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.archive(timestamp with time zone,integer) IS
    'Retention: moves one batch of closed history older than p_before to the archived_* tables';

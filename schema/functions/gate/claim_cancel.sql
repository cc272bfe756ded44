-- claim_cancel: batch timeout cancel. Set-based, one round trip for up to 10000 order numbers.
-- source: timeout_consumer | timeout_scanner. One row per distinct order number, in order of
-- first appearance: cancelled (this call won) | already_cancelled | already_paid |
-- already_released (staff released it unpaid: release_order; final, never cancelled) | busy (pending
-- and due, its row locked by another transaction: retry) | not_due (before expire_at, or a charge
-- pending within its bound: due_times says until when) | not_found; status = the
-- order's status after the call (NULL when not_found). The claim and its side effects are
-- _cancel_orders'.
CREATE OR REPLACE FUNCTION ordergate.claim_cancel(order_nos text[], source text)
RETURNS TABLE (order_no text, outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
#variable_conflict use_column
DECLARE
    p_nos    text[] := claim_cancel.order_nos;
    p_source text   := claim_cancel.source;
    v_n      int;
    v_bad    text;
    v_all    text;     -- the elements joined by spaces, for the check of their form
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
    -- Every element 1..64 characters of [A-Za-z0-9._:-], checked by one match over the elements
    -- joined by spaces instead of one regular-expression call per element (whose set-up cost
    -- more than the match): the joined text must be valid names separated by single spaces, and
    -- hold exactly v_n - 1 spaces, so no element holds a space itself and each name is one
    -- element (an empty, longer or otherwise bad element fails the match). array_to_string
    -- leaves NULLs out; array_position finds them. Only when this fails are the elements read
    -- one by one, to name the first bad one.
    v_all := array_to_string(p_nos, ' ');
    IF array_position(p_nos, NULL) IS NOT NULL
       OR length(v_all) - length(replace(v_all, ' ', '')) <> v_n - 1
       OR v_all !~ '^[A-Za-z0-9._:-]{1,64}( [A-Za-z0-9._:-]{1,64})*$' THEN
        SELECT coalesce(x, 'NULL') INTO v_bad
          FROM unnest(p_nos) x
         WHERE x IS NULL OR length(x) > 64 OR x !~ '^[A-Za-z0-9._:-]+$'
         LIMIT 1;
        PERFORM _bad_arg(format('claim_cancel: invalid order number %s (1..64 characters of [A-Za-z0-9._:-], no NULL)',
                                left(v_bad, 80)));
    END IF;

    -- Lock (in order_no order), claim and side effects: one place, shared with close_order.
    v_won := _cancel_orders(p_nos, p_source, _actor(), NULL, true);

    -- As many winners as array elements: every element won and none repeats (winners are
    -- distinct), so each row is 'cancelled' in array order. The usual case for the consumer and
    -- the scanner.
    IF cardinality(v_won) = v_n THEN
        RETURN QUERY SELECT u.x, 'cancelled'::text, 'cancelled'::text FROM unnest(p_nos) AS u(x);
        RETURN;
    END IF;

    -- Otherwise: one row per distinct order number in order of first appearance; the current
    -- status is read only for the ones this call did not win (a CASE evaluates its subquery only
    -- in the branch taken; OFFSET 0 keeps the subquery from being inlined into, and evaluated
    -- for, each reference to st).
    RETURN QUERY
    SELECT r.no,
           CASE WHEN r.won THEN 'cancelled'
                WHEN r.st = 'paid' THEN 'already_paid'
                WHEN r.st = 'cancelled' THEN 'already_cancelled'
                WHEN r.st = 'released' THEN 'already_released'
                -- Still pending and due, yet not won: the lock pass skipped it, another
                -- transaction holds its row (read in this statement's snapshot, like st).
                -- Due is the claim's own test: deadline passed, no charge within its bound.
                WHEN r.st = 'pending_payment'
                     AND (SELECT o.expire_at <= now()
                                 AND (o.charge_until IS NULL OR o.charge_until <= now())
                            FROM orders o WHERE o.order_no = r.no)
                    THEN 'busy'
                WHEN r.st = 'pending_payment' THEN 'not_due'
                ELSE 'not_found'
           END,
           r.st
      FROM (SELECT d.no, d.first, d.won,
                   CASE WHEN d.won THEN 'cancelled'
                        ELSE (SELECT o.status FROM orders o WHERE o.order_no = d.no)
                   END AS st
              FROM (SELECT u.x AS no, min(u.i) AS first, bool_or(w.no IS NOT NULL) AS won
                      FROM unnest(p_nos) WITH ORDINALITY AS u(x, i)
                      LEFT JOIN unnest(v_won) AS w(no) ON w.no = u.x
                     GROUP BY u.x) d
            OFFSET 0) r
     ORDER BY r.first;
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.claim_cancel(text[],text) TO ordergate_trigger;
COMMENT ON FUNCTION ordergate.claim_cancel(text[],text) IS
    'Cancels the due pending orders of a batch (consumer, scanner): one outcome row per distinct order number';

-- Helpers for the isolation specs, applied by run.sh to each throwaway database (never to the
-- template, never to a real database). They read the books so each spec's final step shows them.
BEGIN;

-- og_reset() (the global setup of each permutation) is tests/support/reset.sql's, loaded first.

-- 'SKU-1:2,SKU-2:1' -> '[{"sku":"SKU-1","qty":2},{"sku":"SKU-2","qty":1}]' (spec files cannot
-- contain braces inside a step).
CREATE FUNCTION public.og_items(p_spec text) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path = ordergate, pg_temp AS $$
    SELECT jsonb_agg(jsonb_build_object('sku', split_part(x, ':', 1), 'qty', split_part(x, ':', 2)::int)
                     ORDER BY n)
      FROM unnest(string_to_array(p_spec, ',')) WITH ORDINALITY AS t(x, n)
$$;

-- One line per order: status, coupon state, log (source/key[/actor: note]), exceptions
-- (kind/resolution/txn), outbox events in id order.
CREATE FUNCTION public.og_books()
RETURNS TABLE (order_no text, status text, coupon text, log text, exceptions text, events text)
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT o.order_no, o.status, c.state,
           (SELECT string_agg(l.source || '/' || l.idempotency_key
                              || CASE WHEN l.source = 'manual' THEN '/' || l.actor || ': ' || l.note ELSE '' END,
                              ',' ORDER BY l.id)
              FROM ordergate.status_log l WHERE l.order_no = o.order_no),
           (SELECT string_agg(e.kind || '/' || e.resolution || '/' || e.txn_no, ',' ORDER BY e.id)
              FROM ordergate.exceptions e WHERE e.order_no = o.order_no),
           (SELECT string_agg(b.event_type, ',' ORDER BY b.id)
              FROM ordergate.outbox b WHERE b.order_no = o.order_no)
      FROM ordergate.orders o
      LEFT JOIN ordergate.coupons c ON c.coupon_id = o.coupon_id
     ORDER BY o.order_no
$$;

CREATE FUNCTION public.og_stock() RETURNS TABLE (sku text, available bigint, total bigint)
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT i.sku, i.available, i.total FROM ordergate.inventory i ORDER BY i.sku
$$;

CREATE FUNCTION public.og_payments() RETURNS TABLE (txn_no text, order_no text, amount_cents bigint, outcome text)
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT p.txn_no, p.order_no, p.amount_cents, p.outcome FROM ordergate.payments p ORDER BY p.txn_no
$$;

-- 'clean' or the violated invariants as "n:count".
CREATE FUNCTION public.og_reconcile() RETURNS text
LANGUAGE sql STABLE SET search_path = ordergate, pg_temp AS $$
    SELECT coalesce(string_agg(r.invariant || ':' || r.violations, ' ' ORDER BY r.invariant)
                        FILTER (WHERE r.violations > 0), 'clean')
      FROM ordergate.reconcile() r
$$;

COMMIT;

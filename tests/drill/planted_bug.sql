-- A deliberately broken cancel, for the drill's own test only: it puts the side effects before
-- the claim (restock first, change the status at the end), the order schema/README.md's "Design
-- notes" rule out (the claim first, side effects only for its winners). Every order in the batch
-- is restocked whether or not this call wins it, so an order the customer just paid gives its
-- goods back to the shelf. The drill must notice (stock
-- invariant, and late restocks of paid orders) and exit non-zero.
BEGIN;
-- Keep the correct function under another name (its body qualifies parameters with the function's
-- name, so it is copied with the name replaced rather than renamed).
DO $copy$
DECLARE
    v_src text := pg_get_functiondef('ordergate.claim_cancel(text[], text)'::regprocedure);
BEGIN
    v_src := replace(v_src, 'ordergate.claim_cancel(', 'ordergate.claim_cancel_correct(');
    v_src := replace(v_src, 'claim_cancel.', 'claim_cancel_correct.');
    EXECUTE v_src;
END
$copy$;

CREATE OR REPLACE FUNCTION ordergate.claim_cancel(order_nos text[], source text)
RETURNS TABLE (order_no text, outcome text, status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    UPDATE inventory i SET available = i.available + x.qty
      FROM (SELECT it.sku, sum(it.qty) AS qty
              FROM order_items it
              JOIN orders o ON o.order_no = it.order_no
             WHERE it.order_no = ANY (order_nos) AND o.status <> 'cancelled'
             GROUP BY it.sku) x
     WHERE i.sku = x.sku;
    RETURN QUERY SELECT * FROM claim_cancel_correct(order_nos, source);
END
$$;
COMMIT;

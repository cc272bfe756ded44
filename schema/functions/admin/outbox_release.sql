-- outbox_release (admin): gives a quarantined event back to the relay once its cause is fixed
-- (a larger message.max.bytes on the broker, a relay that can route it). The relay tries it
-- again at its next step; an event that still cannot be published is quarantined again, with
-- the reason of that attempt. A cancel_scheduled of an order that is no longer pending (closed by
-- an operator because its deadline could never be carried) is rewritten to be due at the order's
-- closed_at: the message is then valid, the consumer answers it already_cancelled or already_paid,
-- and once published the order can be archived. Outcomes: released | not_quarantined (published,
-- or never set aside) | not_found. 22023 for a NULL id.
CREATE OR REPLACE FUNCTION ordergate.outbox_release(p_id bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = ordergate, pg_temp AS $$
BEGIN
    IF p_id IS NULL THEN
        PERFORM _bad_arg('outbox_release: p_id is required');
    END IF;
    UPDATE outbox b
       SET quarantined_at = NULL, quarantine_reason = NULL,
           payload = coalesce((SELECT _cancel_message(o.order_no, o.closed_at)
                                 FROM orders o
                                WHERE b.event_type = 'cancel_scheduled'
                                  AND o.order_no = b.order_no
                                  AND o.status <> 'pending_payment'), b.payload)
     WHERE b.id = p_id AND b.quarantined_at IS NOT NULL;
    IF FOUND THEN
        RETURN 'released';
    END IF;
    IF EXISTS (SELECT 1 FROM outbox b WHERE b.id = p_id) THEN
        RETURN 'not_quarantined';
    END IF;
    RETURN 'not_found';
END
$$;

GRANT EXECUTE ON FUNCTION ordergate.outbox_release(bigint) TO ordergate_admin;
COMMENT ON FUNCTION ordergate.outbox_release(bigint) IS
    'Gives a quarantined event back to the relay once its cause is fixed';

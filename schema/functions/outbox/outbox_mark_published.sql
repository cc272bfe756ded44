-- The relay marks what the broker acknowledged, then commits. Returns how many rows it marked.
CREATE OR REPLACE FUNCTION ordergate.outbox_mark_published(p_ids bigint[]) RETURNS bigint
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

GRANT EXECUTE ON FUNCTION ordergate.outbox_mark_published(bigint[]) TO ordergate_relay;
COMMENT ON FUNCTION ordergate.outbox_mark_published(bigint[]) IS
    'Marks the events the broker acknowledged as published; returns how many';

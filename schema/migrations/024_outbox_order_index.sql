-- 024_outbox_order_index.sql: one index on outbox's order number instead of two. Every event was
-- written into outbox_order_no_idx (order_no: an order's events, for archive() and the staff
-- acts), and each transition event (order_paid, order_cancelled) into outbox_transition_uq as
-- well (order_no, unique where the event is a transition: invariant 7's "at most one per
-- order"). Both are btrees led by order_no; one unique index over (order_no, a transition mark)
-- does both jobs:
--   - the mark is true for a transition event and NULL for any other, so two transition events
--     of one order collide on (order_no, true) and the database refuses the second, as before;
--     NULLs never collide (NULLS DISTINCT), so an order keeps any number of other events, and
--     their inserts skip the uniqueness check;
--   - led by order_no, it serves every lookup by order number (order_no = ..., = ANY (...)) that
--     outbox_order_no_idx served.
-- Each event is written into one order index instead of two for a transition (a cancel, a
-- payment: one btree insert less each), and as many as before for the others.
-- The relay's publication is no HOT update (published_at is in outbox_unpublished_idx's
-- predicate), so it too writes one index entry less per transition event.
-- The index is built inside the migration's transaction, so writes to outbox (every claim) wait
-- for the build: about 0.9 s per million events on the development machine (a million-row
-- copy of the key columns, in memory); archive() keeps outbox to the recent traffic.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

CREATE UNIQUE INDEX outbox_order_no_uq ON ordergate.outbox
    (order_no, (CASE WHEN event_type IN ('order_paid', 'order_cancelled') THEN true END))
    NULLS DISTINCT;
COMMENT ON INDEX ordergate.outbox_order_no_uq IS
    'An order''s events (archive()), at most one transition event (order_paid or order_cancelled) per order (invariant 7)';
DROP INDEX ordergate.outbox_order_no_idx;
DROP INDEX ordergate.outbox_transition_uq;

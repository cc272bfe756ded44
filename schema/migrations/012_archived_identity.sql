-- 012_archived_identity.sql: archived history keeps its identities. A refund result for a
-- payment whose exception was archived is answered from the archive (record_refund looks the
-- exception up by txn_no, and its earlier refunds by exception id), as it is from the hot
-- tables; without these indexes each such lookup would read the whole archive.
-- (An archived order number is found through archived_orders' primary key: place_order answers
-- duplicate for it.)
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

CREATE INDEX archived_exceptions_txn_no_idx ON ordergate.archived_exceptions (txn_no)
    WHERE txn_no IS NOT NULL;
CREATE INDEX archived_refunds_exception_id_idx ON ordergate.archived_refunds (exception_id);

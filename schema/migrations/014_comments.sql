-- 014_comments.sql: the cancel's call chain named in call order: claim_cancel and close_order
-- call _cancel_orders, whose steps are _cancel_orders_claim, the hooks (_hooks_run), then
-- _cancel_orders_restock. The old names (_cancel_effects, _cancel_claim, _cancel_restock) go
-- here; the function files create the new ones in the same run.
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

DROP FUNCTION IF EXISTS ordergate._cancel_effects(text[], text, text, text, boolean);
DROP FUNCTION IF EXISTS ordergate._cancel_claim(text[], text, text, text, boolean);
DROP FUNCTION IF EXISTS ordergate._cancel_restock(text[], bigint[]);

-- 010_hook_identity.sql: a registered hook is called as exactly the function that was checked
-- when it was registered, and never with ordergate's rights (add_hook, _hook_inspect, _hooks_run).
--
-- ordergate_hooks holds one operator per registration, (text[] OPERATOR text), whose function is
-- the registered hook: an operator stores its function's OID, so the claims call that function
-- and no other, whatever overloads the shop adds later (a call by name could resolve to, or be
-- made ambiguous by, a "v2" with a defaulted parameter). Only ordergate_owner may create
-- anything there. The schema is created before the role switch below: it is created like the
-- ordergate schema in 001, by the migrating role, owned by ordergate_owner from the start.
--
-- hooks.opname: that operator's name (add_hook makes it from the registration's id).
-- hooks.fingerprint: what was checked at registration (owner, SECURITY DEFINER, settings,
-- language, body, signature; _hook_inspect). A claim refuses a hook whose fingerprint differs
-- until it is registered again. Registrations made before this migration have neither: every
-- claim of their event is refused with a message saying to re-register them (add_hook checks
-- them and answers 'updated'), so no hook that was never checked runs after the upgrade.
--
-- _cancel_claim stops before the stock (its result becomes the winners and the stock to give
-- back): the hooks run between the claim and the stock, so they hold no inventory row
-- (_cancel_effects, _cancel_restock). The old signature is dropped; the function files create
-- the new one.
CREATE SCHEMA ordergate_hooks AUTHORIZATION ordergate_owner;
SET LOCAL ROLE ordergate_owner;
SET LOCAL search_path = ordergate, pg_temp;

COMMENT ON SCHEMA ordergate_hooks IS
    'ordergate: one operator per effect hook registration, bound to the registered function (add_hook)';

ALTER TABLE ordergate.hooks
    ADD COLUMN opname text UNIQUE CHECK (opname ~ '^@[~!@#%^&|]+$'),
    ADD COLUMN fingerprint text;

DROP FUNCTION IF EXISTS ordergate._cancel_claim(text[], text, text, text, boolean);

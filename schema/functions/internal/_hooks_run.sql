-- _hooks_run: calls the shop's hooks registered for p_event (add_hook), in registration order,
-- each once with p_nos (the orders this claim statement won for the event, sorted and distinct),
-- p_source and, for a three-argument hook, the context. Called by the claims after the claim
-- itself, inside their transaction, so a hook's writes commit or roll back with the claim; in the
-- cancel paths before the stock is given back (_cancel_orders), so a hook never holds an
-- inventory row.
--
-- p_context: what the caller knows of each order, a JSON object keyed by order_no whose values
-- are objects (schema/README.md, "Effect hooks", lists the keys per event); NULL = nothing. A
-- three-argument hook gets, per order of p_nos, {"shop": <the order's shop data>} merged with
-- the caller's object for that order (the caller's keys win). It is built once per call, and
-- only when a three-argument hook is registered for the event. The callers look at the event's
-- hooks first (max(hooks.nargs)): with none they do not call this at all, with two-argument
-- ones only they pass no context, so a claim pays for what its hooks take and no more.
--
-- Runs as the claim's owner (ordergate_owner: the claims are SECURITY DEFINER). Before each call
-- the hook is checked again as add_hook checked it (_hook_inspect: SECURITY DEFINER, so it runs
-- as its owner; an owner that is no superuser, no ordergate role and no member of
-- ordergate_owner; its own search_path), and its fingerprint must be the one registered: a
-- function replaced or altered since is refused until add_hook registers it again. A hook is
-- called through the operator add_hook bound to its OID (ordergate_hooks), so the registered
-- function runs and no other, whatever overloads exist; the inputs are bound parameters, never
-- SQL text. A two-argument hook is the operator's function; a three-argument hook is called by
-- the operator's function, the wrapper ordergate_hooks.hook_<id>, whose SQL-standard body holds
-- the hook's OID (add_hook): the operator is bound only if that wrapper depends on the
-- registered function.
--
-- Every failure aborts the claim with the hook marker: the message is "hook <function>: ...",
-- TABLE = 'hooks' (schema ordergate), so a client tells a hook's failure from the gate's own and
-- sets the order apart (the consumer and the scanner). A hook's own error keeps its SQLSTATE; a
-- statement timeout or a cancel request that lands in a hook (query_canceled, which WHEN OTHERS
-- does not catch) keeps 57014. Refusals are 42501 (the checks), 42883 (the function or its
-- operator is gone: drop_hook(id) removes the registration).
--
-- With the session setting ordergate.hook_timing = on (the consumer and the scanner set it),
-- each call's wall time is sent as a NOTICE, failed calls included, in a fixed form the clients
-- parse (common/hook_timing.h):
--   ordergate_hook_timing id=<hooks.id> event=<event> ms=<milliseconds> fn=<function>
CREATE OR REPLACE FUNCTION ordergate._hooks_run(p_event text, p_nos text[], p_source text,
                                               p_context jsonb DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SET search_path = ordergate, pg_temp AS $$
DECLARE
    h        record;
    v_nos    text[];
    v_ctx    jsonb;
    v_state  text;
    v_msg    text;
    v_det    text;
    v_hint   text;
    v_timing boolean := current_setting('ordergate.hook_timing', true) = 'on';
    v_t0     timestamptz;
    v_redo   text;
BEGIN
    IF p_nos IS NULL OR cardinality(p_nos) = 0 THEN
        RETURN;
    END IF;
    -- The checks of _hook_inspect, inline (keep them equal): refusal and fingerprint per hook.
    FOR h IN
        SELECT k.id, k.fn, k.opname, k.fingerprint, k.nargs, p.oid IS NOT NULL AS fn_exists, p.xmin AS fn_xmin,
               CASE WHEN p.oid IS NULL THEN k.fn_name ELSE p.oid::regprocedure::text END AS fn_name,
               CASE WHEN k.nargs = 2 THEN
                   EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                            WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                              AND o.oprname = k.opname AND o.oprcode = k.fn
                              AND o.oprleft = 'text[]'::regtype AND o.oprright = 'text'::regtype)
               ELSE
                   EXISTS (SELECT 1 FROM pg_catalog.pg_operator o
                             JOIN pg_catalog.pg_proc w ON w.oid = o.oprcode
                                                      AND w.pronamespace = 'ordergate_hooks'::regnamespace
                             JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass
                                                        AND d.objid = w.oid
                                                        AND d.refclassid = 'pg_catalog.pg_proc'::regclass
                                                        AND d.refobjid = k.fn
                            WHERE o.oprnamespace = 'ordergate_hooks'::regnamespace
                              AND o.oprname = k.opname
                              AND o.oprleft = 'text[]'::regtype
                              AND o.oprright = 'ordergate_hooks.hook_call'::regtype)
               END AS bound,
               CASE
                   WHEN p.prokind <> 'f' OR p.proretset OR p.prorettype <> 'void'::regtype
                        OR p.pronargs NOT IN (2, 3) OR p.proargtypes[0] <> 'text[]'::regtype
                        OR p.proargtypes[1] <> 'text'::regtype
                        OR (p.pronargs = 3 AND p.proargtypes[2] <> 'jsonb'::regtype)
                        OR p.provariadic <> 0
                       THEN 'it must be a function (order_nos text[], source text) or (order_nos text[], source text, context jsonb) RETURNS void'
                   WHEN n.nspname IN ('ordergate', 'ordergate_hooks', 'pg_catalog', 'information_schema')
                        OR n.nspname LIKE 'pg\_%'
                       THEN format('it is not a shop function (schema %s)', n.nspname)
                   WHEN NOT p.prosecdef
                       THEN 'it is not SECURITY DEFINER, so it would run as ordergate_owner'
                   WHEN r.rolsuper
                       THEN format('it is owned by %s, a superuser', r.rolname)
                   WHEN r.rolname LIKE 'ordergate\_%'
                       THEN format('it is owned by %s, an ordergate role', r.rolname)
                   WHEN pg_has_role(p.proowner, 'ordergate_owner', 'MEMBER')
                       THEN format('its owner %s is a member of ordergate_owner', r.rolname)
                   WHEN pg_has_role(p.proowner, 'pg_write_all_data', 'MEMBER')
                       THEN format('its owner %s may write every table (pg_write_all_data)', r.rolname)
                   WHEN NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) AS c(s) WHERE c.s LIKE 'search\_path=%')
                       THEN 'it does not pin its own search_path (SET search_path = ...), so it would use ordergate''s'
               END AS refusal,
               md5(concat_ws('|', p.pronamespace, p.proname, p.proargtypes::text,
                             p.prorettype, p.prokind, p.proretset, p.provariadic,
                             p.proowner, p.prosecdef, coalesce(p.proconfig::text, '-'),
                             p.prolang, md5(coalesce(p.prosrc, '')),
                             md5(coalesce(p.probin, '')))) AS fp_now
          FROM ordergate.hooks k
          LEFT JOIN pg_catalog.pg_proc p ON p.oid = k.fn
          LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
          LEFT JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
         WHERE k.event = p_event
         ORDER BY k.id
    LOOP
        v_redo := format('SELECT ordergate.add_hook(%L, %L)', p_event, h.fn_name);
        IF NOT h.fn_exists THEN
            RAISE EXCEPTION 'hook %: the function registered for event % no longer exists', h.fn_name, p_event
                USING ERRCODE = '42883', TABLE = 'hooks', SCHEMA = 'ordergate',
                      HINT = format('remove the registration with SELECT ordergate.drop_hook(%s)', h.id);
        END IF;
        IF h.fingerprint IS NULL OR h.opname IS NULL THEN
            RAISE EXCEPTION 'hook %: registered before hooks were checked; refused until registered again', h.fn_name
                USING ERRCODE = '42501', TABLE = 'hooks', SCHEMA = 'ordergate',
                      HINT = format('check it meets docs/integrate.md, "Hooks", then %s', v_redo);
        END IF;
        IF h.refusal IS NOT NULL THEN
            RAISE EXCEPTION 'hook %: refused: %', h.fn_name, h.refusal
                USING ERRCODE = '42501', TABLE = 'hooks', SCHEMA = 'ordergate',
                      HINT = format('fix the function, then %s (or remove it: SELECT ordergate.drop_hook(%s))',
                                    v_redo, h.id);
        END IF;
        IF h.fp_now <> h.fingerprint THEN
            RAISE EXCEPTION 'hook %: changed since it was registered (body, owner, settings or security); refused until registered again', h.fn_name
                USING ERRCODE = '42501', TABLE = 'hooks', SCHEMA = 'ordergate',
                      HINT = format('review the function, then %s', v_redo);
        END IF;
        IF NOT h.bound THEN
            RAISE EXCEPTION 'hook %: its call operator ordergate_hooks.% is missing; refused until registered again', h.fn_name, h.opname
                USING ERRCODE = '42883', TABLE = 'hooks', SCHEMA = 'ordergate', HINT = v_redo;
        END IF;
        IF v_nos IS NULL THEN
            SELECT array_agg(DISTINCT x ORDER BY x) INTO v_nos FROM unnest(p_nos) AS u(x);
        END IF;
        IF h.nargs = 3 AND v_ctx IS NULL THEN
            SELECT coalesce(jsonb_object_agg(u.x, jsonb_build_object('shop', o.shop)
                                                  || CASE WHEN jsonb_typeof(p_context -> u.x) = 'object'
                                                          THEN p_context -> u.x ELSE '{}'::jsonb END),
                            '{}'::jsonb)
              INTO v_ctx
              FROM unnest(v_nos) AS u(x)
              LEFT JOIN orders o ON o.order_no = u.x;
        END IF;
        v_t0 := clock_timestamp();
        BEGIN
            -- opname is add_hook's (the table admits operator characters only): no input here.
            IF h.nargs = 2 THEN
                EXECUTE format('SELECT $1 OPERATOR(ordergate_hooks.%s) $2', h.opname)
                  USING v_nos, p_source;
            ELSE
                EXECUTE format('SELECT $1 OPERATOR(ordergate_hooks.%s) ROW($2, $3)::ordergate_hooks.hook_call',
                               h.opname)
                  USING v_nos, p_source, v_ctx;
            END IF;
        EXCEPTION WHEN query_canceled OR OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT,
                                    v_det = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
            IF v_timing THEN
                RAISE NOTICE 'ordergate_hook_timing id=% event=% ms=% fn=%', h.id, p_event,
                    round((extract(epoch FROM clock_timestamp() - v_t0) * 1000)::numeric, 3), h.fn_name;
            END IF;
            RAISE EXCEPTION 'hook %: %', h.fn_name, v_msg
                USING ERRCODE = v_state, TABLE = 'hooks', SCHEMA = 'ordergate',
                      DETAIL = coalesce(v_det, ''), HINT = coalesce(v_hint, '');
        END;
        IF v_timing THEN
            RAISE NOTICE 'ordergate_hook_timing id=% event=% ms=% fn=%', h.id, p_event,
                round((extract(epoch FROM clock_timestamp() - v_t0) * 1000)::numeric, 3), h.fn_name;
        END IF;
        -- Replaced or altered by another session between the check and the call (any change
        -- writes a new version of its pg_proc row): whatever ran is undone with the claim.
        IF (SELECT p.xmin FROM pg_catalog.pg_proc p WHERE p.oid = h.fn) IS DISTINCT FROM h.fn_xmin THEN
            RAISE EXCEPTION 'hook %: changed while it ran; refused until registered again', h.fn_name
                USING ERRCODE = '42501', TABLE = 'hooks', SCHEMA = 'ordergate',
                      HINT = format('review the function, then %s', v_redo);
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION ordergate._hooks_run(text,text[],text,jsonb) IS
    'Internal: runs the shop''s hooks of an event with the orders a claim won';

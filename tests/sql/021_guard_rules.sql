-- The rules of the orders row, written as cheap expressions, against the rules as first written:
-- the state-machine trigger orders_guard_update fires (OG001/OG002) for exactly the updates the
-- three-way OR of the statuses' moves and closed_at refused, and the CHECKs orders_order_no_check
-- and orders_status_check (migration 026) refuse exactly the values the first expressions
-- refused. Each case is written through the table itself, in a subtransaction rolled back.

SELECT og_reset();

-- The SQLSTATE of the test's own statements (00000 when they pass), run in a subtransaction that
-- is rolled back either way.
CREATE FUNCTION pg_temp.gr_state(p_sql text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
BEGIN
    BEGIN
        BEGIN
            EXECUTE p_sql;
            v_state := '00000';
        EXCEPTION WHEN OTHERS THEN
            v_state := SQLSTATE;
        END;
        RAISE EXCEPTION USING ERRCODE = 'OGT99';
    EXCEPTION WHEN SQLSTATE 'OGT99' THEN
        NULL;
    END;
    RETURN v_state;
END
$$;

-- orders_guard_update: every stored status (NOT NULL and checked, so OLD.status is one of the
-- four), with closed_at NULL or set, moved to each status, an unknown one or NULL, with closed_at
-- left NULL, kept or moved. orders_a_closed_at fires first: closed_at left NULL on a status
-- change reaches the guard as now().
DO $$
DECLARE
    v_st    text[] := ARRAY['pending_payment', 'paid', 'cancelled', 'released'];
    v_new   text[] := ARRAY['pending_payment', 'paid', 'cancelled', 'released', 'shipped', NULL];
    v_at    timestamptz[] := ARRAY[NULL, '2026-01-01 00:00+00', '2026-01-02 00:00+00'];
    os text; ns text; oc timestamptz; nc timestamptz; v_oc timestamptz; v_nc timestamptz;
    v_want boolean; v_got boolean; v_state text;
    v_cases int := 0; v_fired int := 0; v_bad text := '';
BEGIN
    FOREACH os IN ARRAY v_st LOOP
     FOR i IN 1..2 LOOP
      FOREACH ns IN ARRAY v_new LOOP
       FOR j IN 1..3 LOOP
        oc := v_at[i];
        nc := v_at[j];
        -- The insert trigger closes an order inserted closed without closed_at.
        v_oc := CASE WHEN os <> 'pending_payment' AND oc IS NULL THEN now() ELSE oc END;
        v_nc := CASE WHEN nc IS NULL AND os IS DISTINCT FROM ns THEN now() ELSE nc END;
        -- The rule as first written (before migration 026's round).
        v_want := coalesce(
               (os IS DISTINCT FROM ns
                AND NOT (os = 'pending_payment' AND ns IN ('paid', 'cancelled', 'released'))
                AND NOT (os = 'released' AND ns = 'paid'))
            OR (os IS NOT DISTINCT FROM ns AND v_oc IS DISTINCT FROM v_nc)
            OR (os = 'released' AND v_oc IS DISTINCT FROM v_nc), false);
        v_state := pg_temp.gr_state(format(
            'INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at, closed_at) '
            'VALUES (%L, %L, 1, now(), %L); '
            'UPDATE ordergate.orders SET status = %L, closed_at = %L WHERE order_no = %L',
            'GR1', os, oc, ns, nc, 'GR1'));
        v_got := v_state IN ('OG001', 'OG002');
        v_cases := v_cases + 1;
        IF v_got THEN v_fired := v_fired + 1; END IF;
        IF v_got IS DISTINCT FROM v_want THEN
            v_bad := v_bad || format('%s/%s -> %s/%s: %s; ', os, oc, ns, nc, v_state);
        END IF;
       END LOOP;
      END LOOP;
     END LOOP;
    END LOOP;
    PERFORM t_eq('guard_update fires as the rules first written, every move', v_bad, '');
    PERFORM t_eq('guard_update cases tried', v_cases, 144);
    -- Not a vacuous pass: legal and illegal moves both among them.
    PERFORM t_check('guard_update both fired and passed', v_fired BETWEEN 1 AND 143,
                    format('%s of %s fired', v_fired, v_cases));
END
$$;

-- orders_order_no_check and orders_status_check: hostile values, and 3,000 random strings over
-- the allowed characters, their neighbours in ASCII, spaces and controls and characters outside
-- ASCII (letters that fold or look like allowed ones included), of 0 to 70 characters.
DO $$
DECLARE
    v_fixed text[] := ARRAY['', 'a', 'A-1', 'x.y:z_w-v', repeat('a', 64), repeat('a', 65),
        repeat('é', 32), repeat('é', 64), repeat('é', 65), 'é', 'ａ', chr(8490), 'ı', 'ß', 'a b', ' a',
        'a ', E'a\n', E'\na', E'a\tb', 'a/b', 'a+b', 'a$', '^a', 'a*', '[a]', 'a|b', 'a\b',
        '-', '.', ':', '_', '..', repeat('-', 64), repeat('9', 65), 'a' || chr(8203),
        'a' || chr(769), chr(127), chr(1) || 'a', 'Ω', '٣', '１'];
    v_alpha text := 'AZaz09._:-@[`{/;~ ' || E'\t\n' || 'éßＡ١Ωı' || chr(8203) || chr(127);
    x text; v_len int;
    v_old boolean; v_got boolean; v_state text;
    v_cases int := 0; v_ok int := 0; v_bad text := '';
BEGIN
    FOR k IN 1..(array_length(v_fixed, 1) + 3000) LOOP
        IF k <= array_length(v_fixed, 1) THEN
            x := v_fixed[k];
        ELSE
            v_len := floor(random() * 71)::int;
            x := '';
            FOR c IN 1..v_len LOOP
                IF random() < 0.9 THEN
                    x := x || substr('ABCXYZabcxyz0189._:-', 1 + floor(random() * 20)::int, 1);
                ELSE
                    x := x || substr(v_alpha, 1 + floor(random() * length(v_alpha))::int, 1);
                END IF;
            END LOOP;
        END IF;
        v_old := (length(x) <= 64 AND (x COLLATE "C") ~ '^[A-Za-z0-9._:-]+$');
        v_state := pg_temp.gr_state(format(
            'INSERT INTO ordergate.orders (order_no, amount_cents, expire_at) VALUES (%L, 1, now())', x));
        v_got := v_state = '00000';
        v_cases := v_cases + 1;
        IF v_got THEN v_ok := v_ok + 1; END IF;
        IF v_got IS DISTINCT FROM v_old OR v_state NOT IN ('00000', '23514') THEN
            v_bad := v_bad || format('%L: %s; ', x, v_state);
        END IF;
    END LOOP;
    PERFORM t_eq('order_no check accepts exactly what it accepted', v_bad, '');
    PERFORM t_check('order_no check both accepted and refused', v_ok BETWEEN 10 AND v_cases - 10,
                    format('%s of %s accepted', v_ok, v_cases));

    v_bad := '';
    FOREACH x IN ARRAY ARRAY['pending_payment', 'paid', 'cancelled', 'released', 'shipped', '',
                             'Paid', 'paid ', ' paid', 'cancelled' || chr(0 + 8203), 'PENDING_PAYMENT',
                             'released.', 'pending'] LOOP
        v_old := x IN ('pending_payment', 'paid', 'cancelled', 'released');
        v_state := pg_temp.gr_state(format(
            'INSERT INTO ordergate.orders (order_no, status, amount_cents, expire_at) VALUES (%L, %L, 1, now())',
            'GS1', x));
        IF (v_state = '00000') IS DISTINCT FROM v_old OR v_state NOT IN ('00000', '23514') THEN
            v_bad := v_bad || format('%L: %s; ', x, v_state);
        END IF;
    END LOOP;
    PERFORM t_eq('status check accepts exactly the four statuses', v_bad, '');
END
$$;

-- The refusals keep their constraint names, on an UPDATE as on an INSERT, also with triggers
-- off (session_replication_role = replica), where only the CHECKs stand.
SELECT ordergate.place_order('GR2', 100, '[]', NULL, now() + interval '1 hour');
SELECT t_error('order_no on update refused by the guard first', $q$UPDATE ordergate.orders SET order_no = 'bad no' WHERE order_no = 'GR2'$q$, 'OG002');
DO $$
DECLARE
    v_sql  text;
    v_name text;
    v_got  text := '';
BEGIN
    FOREACH v_sql IN ARRAY ARRAY[
        $q$UPDATE ordergate.orders SET order_no = 'bad no' WHERE order_no = 'GR2'$q$,
        $q$UPDATE ordergate.orders SET order_no = repeat('a', 65) WHERE order_no = 'GR2'$q$,
        $q$UPDATE ordergate.orders SET status = 'shipped' WHERE order_no = 'GR2'$q$,
        $q$INSERT INTO ordergate.orders (order_no, amount_cents, expire_at, original_expire_at) VALUES ('é', 1, now(), now())$q$] LOOP
        BEGIN
            SET LOCAL session_replication_role = replica;
            EXECUTE v_sql;
            v_name := 'no error';
        EXCEPTION WHEN check_violation THEN
            GET STACKED DIAGNOSTICS v_name = CONSTRAINT_NAME;
        END;
        v_got := v_got || v_name || ' ';
    END LOOP;
    PERFORM t_eq('checks refuse by name with triggers off', v_got,
                 'orders_order_no_check orders_order_no_check orders_status_check orders_order_no_check ');
END
$$;

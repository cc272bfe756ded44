#!/usr/bin/env bash
# current.sh: writes schema/current.sql, the schema as it is today, from the database itself.
#
#   schema/current.sh                  # a scratch database from install.sql, then current.sql
#   schema/current.sh --db DB          # read an installed database instead (nothing is changed)
#   schema/current.sh --out FILE       # write FILE instead of schema/current.sql (- = stdout)
#
# Reads the catalogs of a database made by install.sql (psql, PG* variables select the server;
# the scratch database needs the rights install.sql needs and is dropped at the end): roles,
# schemas, every table with its columns, defaults, constraints, storage parameters, indexes,
# triggers and grants, the settings a fresh install starts with, then every function by group;
# each object (and each column of a hot table) under its one-line comment (COMMENT ON, from the
# migrations and the function files). The order is fixed (by name; columns as in the table), so
# the output changes only when the schema does; tests/sql/schema_upgrade.sh regenerates it and
# fails when the committed file differs. An object without a comment fails the run: write one where the object
# is made (a migration, or the function's file).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
db=
out="$here/current.sql"
while [ $# -gt 0 ]; do
    case $1 in
        --db) db=${2:?--db needs a database name}; shift 2 ;;
        --out) out=${2:?--out needs a file}; shift 2 ;;
        -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "current.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
psql=(env PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1)

scratch=
cleanup() {
    [ -z "$scratch" ] || "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$scratch\"" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [ -z "$db" ]; then
    scratch="og_current_$$"
    "${psql[@]}" -d postgres -c "CREATE DATABASE \"$scratch\" TEMPLATE template0" >/dev/null
    "${psql[@]}" -d "$scratch" -f "$here/install.sql" >/dev/null
    db=$scratch
fi

# The function files by group, in the order schema/README.md lists the groups: GROUP/NAME.sql.
groups="gate admin console scanner outbox triggers internal"
files=
for g in $groups; do
    [ -d "$here/functions/$g" ] || { echo "current.sh: no functions/$g in $here" >&2; exit 1; }
    for f in "$here/functions/$g"/*.sql; do files="$files $g/$(basename "$f")"; done
done
for d in "$here/functions"/*/; do
    case " $groups " in *" $(basename "$d") "*) ;; *)
        echo "current.sh: functions/$(basename "$d") is not a group this script knows ($groups)" >&2
        exit 1 ;;
    esac
done

body=$("${psql[@]}" -At -d "$db" -v files="${files# }" -v groups="$groups" <<'SQL'
\pset fieldsep ''
-- Objects of ours: the schemas named ordergate*, the NOLOGIN roles named ordergate_* (a
-- deployment's login roles, whatever their names, are not the schema's).
CREATE TEMP VIEW cur_ns AS
    SELECT n.oid, n.nspname FROM pg_namespace n WHERE n.nspname LIKE 'ordergate%';
CREATE TEMP VIEW cur_role AS
    SELECT r.oid, r.rolname FROM pg_roles r
     WHERE r.rolname LIKE 'ordergate\_%' AND NOT r.rolcanlogin;
CREATE TEMP VIEW cur_rel AS
    SELECT c.oid, c.relname, c.relkind, c.relacl, c.relowner, n.nspname
      FROM pg_class c JOIN cur_ns n ON n.oid = c.relnamespace;
CREATE TEMP VIEW cur_file AS
    SELECT f AS path, split_part(f, '/', 1) AS grp, regexp_replace(split_part(f, '/', 2), '\.sql$', '') AS name,
           array_position(string_to_array(:'groups', ' '), split_part(f, '/', 1)) AS grp_pos
      FROM regexp_split_to_table(:'files', ' ') f;
-- One line of comment text: the description's first line (the rest, if any, is in the source).
CREATE TEMP VIEW cur_missing AS
    SELECT 'schema ' || nspname AS what FROM cur_ns WHERE obj_description(oid, 'pg_namespace') IS NULL
    UNION ALL SELECT 'role ' || rolname FROM cur_role WHERE shobj_description(oid, 'pg_authid') IS NULL
    UNION ALL SELECT 'table ' || nspname || '.' || relname FROM cur_rel
               WHERE relkind = 'r' AND obj_description(oid, 'pg_class') IS NULL
    UNION ALL SELECT 'column ' || r.nspname || '.' || r.relname || '.' || a.attname
                FROM cur_rel r JOIN pg_attribute a ON a.attrelid = r.oid
               WHERE r.relkind = 'r' AND r.relname NOT LIKE 'archived\_%' AND a.attnum > 0 AND NOT a.attisdropped
                 AND col_description(r.oid, a.attnum) IS NULL
    UNION ALL SELECT 'index ' || r.nspname || '.' || r.relname FROM cur_rel r JOIN pg_index i ON i.indexrelid = r.oid
               WHERE NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x'))
                 AND obj_description(r.oid, 'pg_class') IS NULL
    UNION ALL SELECT 'trigger ' || t.tgname || ' on ' || r.relname FROM pg_trigger t JOIN cur_rel r ON r.oid = t.tgrelid
               WHERE NOT t.tgisinternal AND obj_description(t.oid, 'pg_trigger') IS NULL
    UNION ALL SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p JOIN cur_ns n ON n.oid = p.pronamespace
               WHERE obj_description(p.oid, 'pg_proc') IS NULL
    -- ordergate_hooks holds add_hook's and add_check's wrappers, one per registration: no file.
    UNION ALL SELECT 'function without a file in functions/: ' || p.oid::regprocedure::text
                FROM pg_proc p JOIN cur_ns n ON n.oid = p.pronamespace
               WHERE n.nspname <> 'ordergate_hooks'
                 AND NOT EXISTS (SELECT 1 FROM cur_file f WHERE f.name = p.proname);
SELECT 'MISSING ' || string_agg(what, '; ' ORDER BY what) FROM cur_missing HAVING count(*) > 0;

CREATE TEMP VIEW cur_acl AS   -- grants to others than the owner, one row per grantee and privilege set
    SELECT x.objoid, g.rolname AS grantee,
           string_agg(x.privilege_type, ', ' ORDER BY x.privilege_type) AS privs
      FROM (SELECT c.oid AS objoid, a.* FROM cur_rel c, aclexplode(c.relacl) a
             UNION ALL SELECT n.oid, a.* FROM cur_ns n JOIN pg_namespace nn ON nn.oid = n.oid, aclexplode(nn.nspacl) a
             UNION ALL SELECT p.oid, a.* FROM pg_proc p JOIN cur_ns n ON n.oid = p.pronamespace, aclexplode(p.proacl) a) x
      JOIN pg_roles g ON g.oid = x.grantee
     WHERE x.grantee <> x.grantor
     GROUP BY x.objoid, g.rolname;
CREATE TEMP VIEW cur_grants AS  -- GRANT lines per object: grantees with the same privileges together
    SELECT objoid, string_agg(line, E'\n' ORDER BY line) AS lines
      FROM (SELECT objoid, privs, string_agg(grantee, ', ' ORDER BY grantee) AS grantees,
                   'GRANT ' || privs || ' ON %s TO ' || string_agg(grantee, ', ' ORDER BY grantee) || ';' AS line
              FROM cur_acl GROUP BY objoid, privs) g
     GROUP BY objoid;
-- A comment as one line of SQL comment; NULL stays NULL (a missing one failed the run above,
-- and a column needs none).
CREATE FUNCTION pg_temp.cur_note(t text) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT '-- ' || split_part(t, E'\n', 1) $$;

-- Roles, then schemas.
SELECT E'\n-- ---- Roles (cluster-wide, created when missing by the migrations) ----';
SELECT E'\n' || pg_temp.cur_note(shobj_description(r.oid, 'pg_authid')) || E'\n'
       || 'CREATE ROLE ' || r.rolname || ' NOLOGIN;'
       || coalesce(E'\n' || (SELECT string_agg('GRANT ' || g.rolname || ' TO ' || r.rolname || ';', E'\n' ORDER BY g.rolname)
                               FROM pg_auth_members m JOIN cur_role g ON g.oid = m.roleid
                              WHERE m.member = r.oid), '')
  FROM cur_role r ORDER BY r.rolname;

SELECT E'\n-- ---- Schemas ----';
SELECT E'\n' || pg_temp.cur_note(obj_description(n.oid, 'pg_namespace')) || E'\n'
       || 'CREATE SCHEMA ' || n.nspname || ' AUTHORIZATION ' || pg_get_userbyid(nn.nspowner) || ';'
       || coalesce(E'\n' || replace(g.lines, '%s', 'SCHEMA ' || n.nspname), '')
  FROM cur_ns n JOIN pg_namespace nn ON nn.oid = n.oid LEFT JOIN cur_grants g ON g.objoid = n.oid
 ORDER BY n.nspname;
SELECT E'\n-- Functions ' || pg_get_userbyid(d.defaclrole) || E' creates: not executable by PUBLIC\n'
       || 'ALTER DEFAULT PRIVILEGES FOR ROLE ' || pg_get_userbyid(d.defaclrole)
       || ' REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;'
  FROM pg_default_acl d
 WHERE d.defaclobjtype = 'f' AND d.defaclnamespace = 0
   AND d.defaclrole IN (SELECT oid FROM cur_role)
   AND NOT EXISTS (SELECT 1 FROM aclexplode(d.defaclacl) a WHERE a.grantee = 0)
 ORDER BY 1;

-- Tables: columns, constraints, then the table's indexes, triggers and grants. The hot tables
-- first, then the archive, then the migration runner's bookkeeping; by name in each.
SELECT E'\n-- ---- Tables (the hot tables, the archive, the migration runner''s) ----';
SELECT E'\n' || pg_temp.cur_note(obj_description(c.oid, 'pg_class')) || E'\n'
       || 'CREATE TABLE ' || c.nspname || '.' || c.relname || E' (\n'
       || (SELECT string_agg(line, E',\n' ORDER BY ord1, ord2, line)
             FROM (SELECT 0 AS ord1, lpad(a.attnum::text, 5, '0') AS ord2,
                          coalesce('    ' || pg_temp.cur_note(col_description(c.oid, a.attnum)) || E'\n', '')
                          || '    ' || quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
                          || CASE WHEN a.attcollation <> t.typcollation
                                  THEN ' COLLATE ' || quote_ident(co.collname) ELSE '' END
                          || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
                          || CASE a.attidentity WHEN 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                                                WHEN 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY' ELSE '' END
                          || CASE WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid) || ') STORED'
                                  WHEN d.adbin IS NOT NULL THEN ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) ELSE '' END AS line
                     FROM pg_attribute a
                     JOIN pg_type t ON t.oid = a.atttypid
                     LEFT JOIN pg_collation co ON co.oid = a.attcollation
                     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                   UNION ALL
                   SELECT 1, position(k.contype IN 'pufcx') || k.conname,
                          '    CONSTRAINT ' || quote_ident(k.conname) || ' ' || pg_get_constraintdef(k.oid)
                     FROM pg_constraint k WHERE k.conrelid = c.oid) cols)
       || E'\n)'
       || coalesce(' WITH (' || (SELECT array_to_string(r.reloptions, ', ') FROM pg_class r WHERE r.oid = c.oid) || ')', '')
       || ';'
       || coalesce((SELECT string_agg(E'\n' || pg_temp.cur_note(obj_description(i.indexrelid, 'pg_class')) || E'\n'
                                      || pg_get_indexdef(i.indexrelid) || ';', '' ORDER BY ic.relname)
                      FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                     WHERE i.indrelid = c.oid
                       AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid
                                                                       AND k.contype IN ('p', 'u', 'x'))), '')
       || coalesce((SELECT string_agg(E'\n' || pg_temp.cur_note(obj_description(t.oid, 'pg_trigger')) || E'\n'
                                      || pg_get_triggerdef(t.oid) || ';', '' ORDER BY t.tgname)
                      FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal), '')
       || coalesce(E'\n' || replace(g.lines, '%s', c.nspname || '.' || c.relname), '')
  FROM cur_rel c LEFT JOIN cur_grants g ON g.objoid = c.oid
 WHERE c.relkind = 'r'
 ORDER BY c.nspname, c.relname LIKE 'archived\_%', c.relname LIKE 'schema\_%', c.relname;

-- The settings a fresh install starts with (set_setting changes them).
SELECT E'\n-- ---- Settings (the rows of ordergate.settings after a fresh install) ----\n'
       || string_agg(format('INSERT INTO ordergate.settings (key, value) VALUES (%L, %L);', key, value),
                     E'\n' ORDER BY key)
  FROM ordergate.settings;

-- Functions by group (the folders of functions/), then by name: signature and grants; the
-- bodies are in the files named.
-- Every function pins search_path (schema/README.md), so only other settings are shown.
SELECT CASE WHEN f.name = first_value(f.name) OVER w AND p.oid = first_value(p.oid) OVER w
            THEN E'\n-- ---- Functions of functions/' || f.grp || E'/ (the bodies are in the files) ----\n'
            ELSE '' END
       || E'\n' || pg_temp.cur_note(obj_description(p.oid, 'pg_proc')) || E'\n'
       || '-- functions/' || f.path
       || CASE WHEN p.prosecdef THEN ', SECURITY DEFINER' ELSE '' END
       || coalesce(', SET ' || (SELECT string_agg(x, ', ' ORDER BY o) FROM unnest(p.proconfig) WITH ORDINALITY AS c(x, o)
                                  WHERE x NOT LIKE 'search\_path=%'), '') || E'\n'
       || 'FUNCTION ' || n.nspname || '.' || quote_ident(p.proname) || '(' || pg_get_function_arguments(p.oid) || ')'
       || ' RETURNS ' || pg_get_function_result(p.oid) || ';'
       || coalesce(E'\n' || replace(g.lines, '%s', 'FUNCTION ' || p.oid::regprocedure::text), '')
  FROM pg_proc p
  JOIN cur_ns n ON n.oid = p.pronamespace
  JOIN cur_file f ON f.name = p.proname
  LEFT JOIN cur_grants g ON g.objoid = p.oid
WINDOW w AS (PARTITION BY f.grp ORDER BY f.name, p.oid::regprocedure::text
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
 ORDER BY f.grp_pos, f.name, p.oid::regprocedure::text;
SQL
)
if grep -q '^MISSING ' <<<"$body"; then
    echo "current.sh: objects without a comment (COMMENT ON in the migration that makes it, or in the function's file) or functions without a file:" >&2
    grep '^MISSING ' <<<"$body" | sed 's/^MISSING //; s/; /\n/g' | sed 's/^/  /' >&2
    exit 1
fi

text="-- schema/current.sql: the ordergate schema as it is today, read from a fresh install.
-- GENERATED by schema/current.sh from the database's catalogs and comments: do not edit. After
-- a change to migrations/ or functions/, regenerate it with
--   schema/current.sh
-- (PG* variables name a PostgreSQL server where you may create a scratch database) and commit
-- it; tests/sql/schema_upgrade.sh fails while it is stale. Each object's comment comes from
-- COMMENT ON in the migration that made it (or in migrations/014_comments.sql) or in the
-- function's file.
--
-- For reading: it is not run (functions show their signature, not their body). Install with
-- schema/install.sql or ordergatectl migrate (schema/README.md).
$body"
if [ "$out" = - ]; then
    printf '%s\n' "$text"
else
    printf '%s\n' "$text" >"$out.tmp.$$" && mv "$out.tmp.$$" "$out"
fi

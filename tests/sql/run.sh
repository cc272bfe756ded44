#!/usr/bin/env bash
# SQL-level tests of the ordergate schema: validation (22023), the state-machine trigger (OG001..),
# least privilege, every gate outcome and side effect, reconcile and its repair, migrations.
#
#   tests/sql/run.sh [FILE.sql ...]     none = every tests/sql/[0-9]*.sql
#
# Connection: libpq's environment (PGHOST, PGPORT, PGUSER...), a role that may create databases
# and apply schema/*.sql (superuser on a throwaway cluster). Each run uses a fresh database built
# with plain psql from schema/*.sql (this also tests that path), dropped at the end.
# Exit status: 0 all passed; 1 a test failed or something could not run.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
db="og_sqltest_$$"

die() { echo "sql: $*" >&2; exit 1; }
"$pgbin/pg_isready" -q -d postgres || die "no PostgreSQL server reachable (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"

cleanup() { "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true; }
trap cleanup EXIT

"${psql[@]}" -d postgres -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null || die "cannot create $db"
for f in "$top"/schema/[0-9][0-9][0-9]_*.sql; do
    "${psql[@]}" -d "$db" -f "$f" >/dev/null || die "applying $(basename "$f") failed"
done
"${psql[@]}" -d "$db" -f "$here/helpers.sql" >/dev/null || die "helpers.sql failed"

# Migrations refuse to run twice (and change nothing).
for f in "$top"/schema/00[123]_*.sql; do
    v=$(basename "$f" | cut -c1-3)
    if out=$("${psql[@]}" -d "$db" -f "$f" 2>&1); then
        "${psql[@]}" -d "$db" -c "SELECT t_check('migration $v refuses a second run', false, 'applied twice')" >/dev/null
    else
        ok=false; grep -q "migration $v is already applied" <<<"$out" && ok=true
        "${psql[@]}" -d "$db" -c "SELECT t_check('migration $v refuses a second run', $ok)" >/dev/null
    fi
done

files=("$@")
if [ ${#files[@]} -eq 0 ]; then files=("$here"/[0-9]*.sql); fi
for f in "${files[@]}"; do
    [ -f "$f" ] || f="$here/$f"
    "${psql[@]}" -d "$db" -v "ON_ERROR_STOP=1" -f "$f" >/dev/null \
        || "${psql[@]}" -d "$db" -c "SELECT t_check('$(basename "$f") ran to the end', false)" >/dev/null
done

"${psql[@]}" -d "$db" -At -F ' ' -c \
    "SELECT CASE WHEN ok THEN 'ok  ' ELSE 'FAIL' END, coalesce(file, '-') || ': ' || name || coalesce(' -- ' || info, '') FROM t_results ORDER BY n"
read -r passed failed < <("${psql[@]}" -d "$db" -At -F ' ' -c \
    "SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok) FROM t_results")
echo "sql: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

#!/usr/bin/env bash
# SQL-level tests of the ordergate schema: validation (22023), the state-machine trigger (OG001..),
# least privilege, every gate outcome and side effect, reconcile and its repair, migrations.
#
#   tests/sql/run.sh [FILE.sql ...]     none = every tests/sql/[0-9]*.sql
#
# Connection: libpq's environment (PGHOST, PGPORT, PGUSER...), a role that may create databases
# and install the schema (superuser on a throwaway cluster). Each run uses a fresh database built
# with plain psql and schema/install.sql (this also tests that path), dropped at the end.
# Exit status: 0 all passed; 1 a test failed or something could not run.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
db="og_sqltest_$$"
work=$(mktemp -d)

die() { echo "sql: $*" >&2; exit 1; }
"$pgbin/pg_isready" -q -d postgres || die "no PostgreSQL server reachable (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"

cleanup() {
    "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$db\"" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

"${psql[@]}" -d postgres -c "CREATE DATABASE \"$db\" TEMPLATE template0" >/dev/null || die "cannot create $db"
"${psql[@]}" -d "$db" -f "$top/schema/install.sql" >/dev/null || die "schema/install.sql failed"
"${psql[@]}" -d "$db" -f "$here/../support/reset.sql" >/dev/null || die "reset.sql failed"
"${psql[@]}" -d "$db" -f "$here/helpers.sql" >/dev/null || die "helpers.sql failed"

results="$work/results"
: >"$results"
# Runs psql on one file; its messages (stderr) go to $work/err, the og-test lines into $results.
run_psql() {
    local rc=0
    env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 "$@" \
        >/dev/null 2>"$work/err" || rc=$?
    grep -o 'og-test|.*' "$work/err" >>"$results" || true
    return $rc
}
record() { printf 'og-test|%s|%s|%s|%s\n' "$1" "$2" "$3" "${4:-}" >>"$results"; }

# install.sql refuses a database that has the schema, and changes nothing (one transaction).
before=$("${psql[@]}" -At -d "$db" -c "SELECT count(*) FROM ordergate.schema_migrations")
if out=$("${psql[@]}" -d "$db" -f "$top/schema/install.sql" 2>&1); then
    record FAIL migrations "install.sql refuses a second run" "installed twice"
elif grep -q 'schema "ordergate" already exists' <<<"$out" &&
     [ "$("${psql[@]}" -At -d "$db" -c "SELECT count(*) FROM ordergate.schema_migrations")" = "$before" ]; then
    record ok migrations "install.sql refuses a second run"
else
    record FAIL migrations "install.sql refuses a second run" "$(head -c 200 <<<"$out")"
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then files=("$here"/[0-9]*.sql); fi
for f in "${files[@]}"; do
    [ -f "$f" ] || f="$here/$f"
    name=$(basename "$f" .sql)
    if run_psql -d "$db" -c "SET og.test_file = '$name'" -f "$f"; then
        record ok "$name" "ran to the end"
    else
        record FAIL "$name" "ran to the end" "$(grep -v 'og-test|' "$work/err" | tail -n 3 | tr '\n' ' ')"
    fi
done

awk -F'|' '{ printf "%-4s %s: %s%s\n", ($2 == "ok" ? "ok" : "FAIL"), $3, $4, ($5 != "" ? " -- " $5 : "") }' "$results"
passed=$(grep -c '^og-test|ok|' "$results" || true)
failed=$(grep -c '^og-test|FAIL|' "$results" || true)
echo "sql: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

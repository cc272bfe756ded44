#!/usr/bin/env bash
# Run ordergate's isolation specs with PostgreSQL's isolationtester.
#
#   tests/isolation/run.sh [SPEC ...]      SPEC: a name in tests/isolation/specs (with or without
#                                          .spec); none = every spec
#   tests/isolation/run.sh --accept SPEC   write the actual output as the expected file (review
#                                          the diff before committing it)
#
# Connection: libpq's environment (PGHOST, PGPORT, PGUSER, PGPASSWORD...). The role must be able to
# create databases and, the first time, install the schema (superuser on a throwaway cluster).
# Each spec runs in its own fresh database, created from the template database
# ${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}, which tests/support/db_template.sh (re)builds with
# schema/install.sql when it is missing or was built from different schema files.
# ORDERGATE_ISOLATION_HOOKS=1 runs them with a shop's hooks registered (hooks.sql).
# Exit status: 0 all passed, 1 a spec's output differs or it could not run (never skipped),
# 2 bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
tester=${ISOLATIONTESTER:-/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/isolationtester}
outdir=${ORDERGATE_ISOLATION_OUT:-${TMPDIR:-/tmp}/ordergate-isolation}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)

accept=0
# ORDERGATE_ISOLATION_HOOKS=1: the same specs, the same expected output, with a shop's hooks
# registered that write shop tables (hooks.sql); each permutation checks the hook calls.
hooks=${ORDERGATE_ISOLATION_HOOKS:-0}
if [ "${1:-}" = "--accept" ]; then accept=1; shift; fi
case "${1:-}" in -h|--help) sed -n '2,16p' "$0"; exit 0 ;; esac

die() { echo "isolation: $*" >&2; exit 1; }

[ -x "$tester" ] || die "isolationtester not found at $tester (Debian package postgresql-15; set ISOLATIONTESTER)"
[ -x "$pgbin/psql" ] || die "psql not found in $pgbin (set PG_BINDIR)"
"$pgbin/pg_isready" -q -d postgres || die "no PostgreSQL server reachable (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"

# Quote an identifier for SQL (database names come from env/our own names only).
qi() { printf '"%s"' "${1//\"/\"\"}"; }

specs=()
if [ $# -eq 0 ]; then
    for f in "$here"/specs/*.spec; do specs+=("$(basename "$f" .spec)"); done
else
    for s in "$@"; do specs+=("$(basename "$s" .spec)"); done
fi
[ ${#specs[@]} -gt 0 ] || { echo "isolation: no specs" >&2; exit 2; }

# The db tests' fixture script builds the template: one builder for every test.
ORDERGATE_TEMPLATE_DB=$tpl "$top/tests/support/db_template.sh" || die "building template $tpl failed"
mkdir -p "$outdir"

passed=0 failed=0
for s in "${specs[@]}"; do
    spec="$here/specs/$s.spec"
    expected="$here/expected/$s.out"
    actual="$outdir/$s.out"
    if [ ! -f "$spec" ]; then
        echo "FAIL $s: no such spec $spec"; failed=$((failed + 1)); continue
    fi
    db="og_iso_${s}_$$"
    [ "$hooks" = 1 ] && db="og_isoh_${s}_$$"
    ok=1
    if ! "${psql[@]}" -d postgres -c "CREATE DATABASE $(qi "$db") TEMPLATE $(qi "$tpl")" >/dev/null; then
        echo "FAIL $s: cannot create database $db from $tpl"; ok=0
    elif ! "${psql[@]}" -d "$db" -f "$top/tests/support/reset.sql" -f "$here/fixtures.sql" >/dev/null; then
        echo "FAIL $s: fixtures.sql failed"; ok=0
    elif [ "$hooks" = 1 ] && ! "${psql[@]}" -d "$db" -f "$here/hooks.sql" >/dev/null; then
        echo "FAIL $s: hooks.sql failed"; ok=0
    else
        rc=0
        "$tester" "dbname=$db" <"$spec" >"$actual" 2>&1 || rc=$?
        if [ $rc -ne 0 ]; then
            echo "FAIL $s: isolationtester exited $rc"; sed 's/^/    /' "$actual" | tail -n 20; ok=0
        elif [ $accept -eq 1 ]; then
            cp "$actual" "$expected"; echo "ACCEPTED $s -> $expected"
        elif [ ! -f "$expected" ]; then
            echo "FAIL $s: no expected output $expected (actual in $actual)"; ok=0
        elif ! diff -u "$expected" "$actual" >"$outdir/$s.diff"; then
            echo "FAIL $s: output differs from expected"; cat "$outdir/$s.diff"; ok=0
        fi
    fi
    "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $(qi "$db")" >/dev/null 2>&1 || true
    if [ $ok -eq 1 ]; then
        [ $accept -eq 1 ] || echo "ok   $s"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done

echo "isolation: $passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# A fresh install and an upgraded 0.1.0 database have the same schema.
#
#   tests/sql/schema_upgrade.sh ORDERGATECTL
#
# Builds four databases and compares `pg_dump --schema-only` of each with the first (comments
# included), and schema/current.sql with what schema/current.sh reads from the first:
#   fresh_psql     schema/install.sql with plain psql
#   fresh_ctl      ordergatectl migrate on an empty database
#   up_007         0.1.0's numbered scripts 001..007 (commit 8319e60), orders in it, then migrate
#   up_006         0.1.0 without 007 (commit af2f98c: outbox.payload still jsonb), then migrate
# The 0.1.0 scripts come from this repository's history (git archive), so the test needs a
# clone with history; without one it fails and says so. After each upgrade the orders placed
# before it are still there, reconcile() finds nothing wrong, the gate still cancels, and a
# second migrate applies nothing.
set -euo pipefail

ctl=${1:?usage: schema_upgrade.sh ORDERGATECTL}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
psql=(env PGOPTIONS="-c client_min_messages=warning" "$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
work=$(mktemp -d)
tag=$$
dbs=()
fails=0 passes=0
# Every migration of this release is applied once the upgrade is through.
nmig=$(find "$top/schema/migrations" -name '[0-9]*.sql' | wc -l)

die() { echo "schema_upgrade: $*" >&2; exit 1; }
cleanup() {
    for d in "${dbs[@]}"; do
        "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$d\"" >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
ok() { echo "ok   $*"; passes=$((passes + 1)); }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$pgbin/pg_isready" -q -d postgres || die "no PostgreSQL server reachable (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"
[ -x "$ctl" ] || die "$ctl: not an executable"

# newdb NAME: creates og_up_NAME_PID and sets $d to it (not a subshell: cleanup must see it).
newdb() {
    d="og_up_${1}_$tag"
    dbs+=("$d")
    "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS \"$d\"" -c "CREATE DATABASE \"$d\" TEMPLATE template0" >/dev/null
}
# The schema as pg_dump prints it, without the per-run \restrict key of newer pg_dump clients.
dump() { pg_dump --schema-only -d "$1" | grep -v '^\\\(un\)\?restrict ' >"$work/$1.sql"; }
migrate() { "$ctl" migrate --db "dbname=$1" --schema-dir "$top/schema" >"$work/$1.migrate" 2>&1; }

old_schema() {  # old_schema COMMIT DIR
    mkdir -p "$2"
    git -C "$top" archive "$1" schema | tar -x -C "$2" 2>/dev/null ||
        die "cannot read commit $1 (0.1.0's schema) from $top's history: run the test in a full clone"
}

same() {  # same NAME DB
    if diff -u "$work/$fresh.sql" "$work/$2.sql" >"$work/$2.diff"; then
        ok "$1: same schema as a fresh install"
    else
        bad "$1: schema differs from a fresh install:"; head -n 40 "$work/$2.diff"
    fi
}

scalar() { "${psql[@]}" -At -d "$1" -c "$2"; }

newdb fresh_psql
fresh=$d
"${psql[@]}" -d "$fresh" -f "$top/schema/install.sql" >/dev/null || die "schema/install.sql failed"
dump "$fresh"

# schema/current.sql is what schema/current.sh reads from this fresh install, to the byte.
if ! "$top/schema/current.sh" --db "$fresh" --out "$work/current.sql" 2>"$work/current.err"; then
    bad "schema/current.sh failed on a fresh install:"; cat "$work/current.err"
elif diff -u "$top/schema/current.sql" "$work/current.sql" >"$work/current.diff"; then
    ok "schema/current.sql is current"
else
    bad "schema/current.sql is stale: run schema/current.sh and commit the result (diff: committed, then fresh):"
    head -n 80 "$work/current.diff"
fi

newdb fresh_ctl
migrate "$d" || { cat "$work/$d.migrate"; die "migrate on an empty database failed"; }
dump "$d"
same "ordergatectl migrate on an empty database" "$d"

# Orders in every state, placed by 0.1.0's functions, to be found intact after the upgrade.
plant='SELECT ordergate.add_stock('"'S1'"', 10), ordergate.add_coupon('"'C1'"');
SELECT ordergate.place_order('"'U1'"', 500, '"'[{\"sku\":\"S1\",\"qty\":2}]'"', '"'C1'"', now() - interval '"'1 minute'"');
SELECT ordergate.place_order('"'U2'"', 300, '"'[{\"sku\":\"S1\",\"qty\":1}]'"', NULL, now() - interval '"'1 minute'"');
SELECT ordergate.place_order('"'U3'"', 300, '"'[{\"sku\":\"S1\",\"qty\":1}]'"', NULL, now() + interval '"'1 hour'"');
SELECT * FROM ordergate.claim_cancel(ARRAY['"'U1'"'], '"'timeout_scanner'"');
SELECT * FROM ordergate.claim_payment('"'U3'"', '"'T3'"', 300, '"'card'"');
SELECT * FROM ordergate.claim_payment('"'U1'"', '"'T1'"', 500, '"'card'"');'

for v in 007:8319e604e54aff60a81f0899f648214eab7654a1 006:af2f98c94fddbcb21c10acad2f69ca5016591f8a; do
    name=${v%%:*} commit=${v#*:}
    src="$work/src_$name"
    old_schema "$commit" "$src"
    newdb "up_$name"
    for f in "$src"/schema/[0-9][0-9][0-9]_*.sql; do
        "${psql[@]}" -d "$d" -f "$f" >/dev/null || die "0.1.0's $(basename "$f") failed"
    done
    [ "$name" = 006 ] && [ -e "$src/schema/007_cancel_fast.sql" ] && die "commit $commit unexpectedly has 007"
    "${psql[@]}" -d "$d" -c "$plant" >/dev/null || die "planting orders in 0.1.0 ($name) failed"
    before=$(scalar "$d" "SELECT string_agg(order_no || ':' || status, ',' ORDER BY order_no) FROM ordergate.orders")

    if migrate "$d" && grep -q 'converted the database from the 0.1.0 layout' "$work/$d.migrate"; then
        ok "0.1.0 ($name): migrate converts it"
    else
        bad "0.1.0 ($name): migrate"; cat "$work/$d.migrate"; continue
    fi
    dump "$d"
    same "0.1.0 ($name) upgraded" "$d"

    after=$(scalar "$d" "SELECT string_agg(order_no || ':' || status, ',' ORDER BY order_no) FROM ordergate.orders")
    [ "$before" = "$after" ] && ok "0.1.0 ($name): orders kept ($after)" || bad "0.1.0 ($name): orders $before -> $after"
    viol=$(scalar "$d" "SELECT sum(violations) FROM ordergate.reconcile()")
    [ "$viol" = 0 ] && ok "0.1.0 ($name): reconcile finds 0 violations" || bad "0.1.0 ($name): reconcile: $viol violations"
    out=$(scalar "$d" "SELECT outcome FROM ordergate.claim_cancel(ARRAY['U2'], 'timeout_scanner')")
    [ "$out" = cancelled ] && ok "0.1.0 ($name): the gate cancels after the upgrade" || bad "0.1.0 ($name): claim_cancel said $out"
    typ=$(scalar "$d" "SELECT json_typeof(payload) FROM ordergate.outbox WHERE order_no = 'U2' AND event_type = 'order_cancelled'")
    [ "$typ" = object ] && ok "0.1.0 ($name): cancel event written as json" || bad "0.1.0 ($name): event payload type $typ"
    # outbox.id became an identity column (025): it goes on from the serial's last number.
    ids=$(scalar "$d" "SELECT (SELECT max(id) FROM ordergate.outbox WHERE order_no <> 'U2') || '<' || (SELECT id FROM ordergate.outbox WHERE order_no = 'U2' AND event_type = 'order_cancelled')")
    [ -n "$ids" ] && [ "${ids%<*}" -lt "${ids#*<}" ] && ok "0.1.0 ($name): event ids go on after the upgrade ($ids)" ||
        bad "0.1.0 ($name): event ids after the upgrade: $ids"
    migrate "$d" || { bad "0.1.0 ($name): second migrate failed"; cat "$work/$d.migrate"; continue; }
    if grep -q "^0 applied, $nmig already applied; functions: 0 applied" "$work/$d.migrate"; then
        ok "0.1.0 ($name): a second migrate applies nothing"
    else
        bad "0.1.0 ($name): second migrate: $(tail -n 1 "$work/$d.migrate")"
    fi
done

# A database of the previous layout (migrations 001..013, function files in one folder, the
# cancel's helpers under their old names: commit 0c0e3c5, installed with its install.sql) is
# upgraded to the same schema, reports the function files it no longer has, and keeps none of
# the functions that were renamed.
src="$work/src_013"
old_schema 0c0e3c542fc5ef1527ebc1021a69312eec02ed04 "$src"
newdb up_013
"${psql[@]}" -d "$d" -f "$src/schema/install.sql" >/dev/null || die "the 013 layout's install.sql failed"
"${psql[@]}" -d "$d" -c "$plant" >/dev/null || die "planting orders in the 013 layout failed"
# As that release's ordergatectl migrate left it: each function file recorded by its name.
for f in "$src"/schema/functions/*.sql; do
    scalar "$d" "INSERT INTO ordergate.schema_functions (file, checksum) VALUES ('$(basename "$f")', 'previous')" >/dev/null
done
before=$(scalar "$d" "SELECT string_agg(order_no || ':' || status, ',' ORDER BY order_no) FROM ordergate.orders")
if migrate "$d"; then
    dump "$d"
    same "013 layout upgraded" "$d"
    olds=$(scalar "$d" "SELECT count(*) FROM pg_proc WHERE proname IN ('_cancel_effects', '_cancel_claim', '_cancel_restock')")
    [ "$olds" = 0 ] && ok "013 layout: the cancel's old helpers are gone" || bad "013 layout: $olds old cancel helpers left"
    grep -q 'removed          functions/_cancel_effects.sql' "$work/$d.migrate" &&
        ok "013 layout: migrate reports the removed function files" ||
        bad "013 layout: removed function files not reported: $(grep removed "$work/$d.migrate" || true)"
    after=$(scalar "$d" "SELECT string_agg(order_no || ':' || status, ',' ORDER BY order_no) FROM ordergate.orders")
    [ "$before" = "$after" ] && ok "013 layout: orders kept ($after)" || bad "013 layout: orders $before -> $after"
    out=$(scalar "$d" "SELECT outcome FROM ordergate.claim_cancel(ARRAY['U2'], 'timeout_scanner')")
    [ "$out" = cancelled ] && ok "013 layout: the gate cancels after the upgrade" || bad "013 layout: claim_cancel said $out"
    viol=$(scalar "$d" "SELECT sum(violations) FROM ordergate.reconcile()")
    [ "$viol" = 0 ] && ok "013 layout: reconcile finds 0 violations" || bad "013 layout: reconcile: $viol violations"
    migrate "$d" && grep -q "^0 applied, $nmig already applied; functions: 0 applied" "$work/$d.migrate" &&
        ok "013 layout: a second migrate applies nothing" || bad "013 layout: second migrate: $(tail -n 1 "$work/$d.migrate")"
else
    bad "013 layout: migrate"; cat "$work/$d.migrate"
fi

# A 0.1.0 database missing one of its scripts is refused and left as it was.
newdb up_partial
for f in "$work"/src_007/schema/00[1-3]_*.sql; do "${psql[@]}" -d "$d" -f "$f" >/dev/null; done
if migrate "$d"; then
    bad "partial 0.1.0: migrate accepted a database without 004..006"
elif grep -q 'lacks migrations 004, 005, 006' "$work/$d.migrate" &&
     [ "$(scalar "$d" "SELECT count(*) FROM ordergate.schema_migrations")" = 3 ] &&
     [ "$(scalar "$d" "SELECT count(*) FROM pg_proc WHERE proname = 'claim_cancel'")" = 1 ]; then
    ok "partial 0.1.0: refused with the missing versions named, nothing changed"
else
    bad "partial 0.1.0: $(tail -n 2 "$work/$d.migrate")"
fi

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]

#!/usr/bin/env bash
# A drill that cannot complete says why in one line and cleans up after itself.
#
#   errors.sh BUILD_DIR
#
#   1. a kafka.properties entry librdkafka refuses, met when the drill builds its producer after
#      placing its orders: exit 1, one line on stderr naming the file and line of the setting
#      (the drill's own Kafka clients read the configuration's kafka.properties), no
#      configuration directory left in TMPDIR;
#   2. a database that does not exist: exit 1, one line that says so;
#   3. options that do not go together, or a malformed one: exit 2 (usage), nothing placed;
#   4. a bad --faults plan: exit 2, one line naming the file and line, nothing placed and no
#      fault's command run.
set -euo pipefail
build=$1
db="og_drill_errors_$$"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
work=$(mktemp -d)
mkdir -m 700 "$work/tmp"
cleanup() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "errors.sh: FAIL: $*" >&2; exit 1; }
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db TEMPLATE $tpl"

# Runs the drill with TMPDIR=$work/tmp; exit status in $rc, stderr in $work/err.
drill() {
    set +e
    TMPDIR=$work/tmp "$build/tools/ordergatectl" "$@" >"$work/out" 2>"$work/err"
    rc=$?
    set -e
}
# The lines of stderr that are not progress ("drill PREFIX [+1.2s] ...").
errors() { grep -v '^drill dr[0-9a-f]*- \[' "$work/err" || true; }

printf 'kafka: {\n  properties = ["socket.timeout.ms=soon"];\n};\n' >"$work/bad.conf"
drill --config "$work/bad.conf" drill --db "dbname=$db" --orders 20 --seed 3
[ "$rc" = 1 ] || { cat "$work/err" >&2; fail "bad kafka.properties: exit $rc, expected 1"; }
[ "$(errors | wc -l)" = 1 ] || { cat "$work/err" >&2; fail "bad kafka.properties: not one line"; }
errors | grep -q "^ordergatectl drill: $work/bad.conf:2: producer: kafka property socket.timeout.ms" ||
    { cat "$work/err" >&2; fail "bad kafka.properties: the line does not name the setting"; }
[ -z "$(ls -A "$work/tmp")" ] || fail "bad kafka.properties: left in TMPDIR: $(ls -A "$work/tmp")"

drill drill --db "dbname=${db}_none" --orders 20 --seed 3
[ "$rc" = 1 ] || { cat "$work/err" >&2; fail "missing database: exit $rc, expected 1"; }
[ "$(errors | wc -l)" = 1 ] && errors | grep -q "^ordergatectl drill: .*does not exist" ||
    { cat "$work/err" >&2; fail "missing database: not one line saying so"; }

orders() { psql -X -qAt -d "$db" -c "SELECT count(*) FROM ordergate.orders"; }
before=$(orders)
drill drill --db "dbname=$db" --schedule-in-db --no-kafka
[ "$rc" = 2 ] || { cat "$work/err" >&2; fail "--schedule-in-db --no-kafka: exit $rc, expected 2"; }
[ "$(orders)" = "$before" ] || fail "--schedule-in-db --no-kafka: orders placed"
drill drill --db "dbname=$db" --schedule-in-db --reminders 5m
[ "$rc" = 2 ] || { cat "$work/err" >&2; fail "--reminders 5m: exit $rc, expected 2"; }
drill drill --db "dbname=$db" --reminders 3,1
[ "$rc" = 2 ] || { cat "$work/err" >&2; fail "--reminders without --schedule-in-db: exit $rc, expected 2"; }
[ "$(orders)" = "$before" ] || fail "--reminders refused: orders placed"
drill drill --db "dbname=$db" --currencies EUR,JPYY
[ "$rc" = 2 ] || { cat "$work/err" >&2; fail "--currencies EUR,JPYY: exit $rc, expected 2"; }
drill drill --db "dbname=$db" --currencies EUR,EUR
[ "$rc" = 2 ] || { cat "$work/err" >&2; fail "--currencies EUR,EUR: exit $rc, expected 2"; }
drill drill --db "dbname=$db" --parts-ratio 0.6 --charge-ratio 0.5
[ "$rc" = 2 ] || { cat "$work/err" >&2; fail "--parts-ratio + --charge-ratio > 1: exit $rc, expected 2"; }
[ "$(orders)" = "$before" ] || fail "money options refused: orders placed"
# A bad fault plan: refused before anything changes. The good first fault's apply would leave
# a file behind.
plan_case() { # $1 = what, $2 = the bad block, $3 = the line expected in the message
    {
        printf '# a plan\n[ok]\nstart = 1s\nduration = 2s\napply = touch %s\nclear = true\n' "$work/applied"
        printf '%b' "$2"
    } >"$work/plan"
    drill drill --db "dbname=$db" --orders 20 --faults "$work/plan"
    [ "$rc" = 2 ] || { cat "$work/err" >&2; fail "plan $1: exit $rc, expected 2"; }
    [ "$(errors | wc -l)" = 1 ] && errors | grep -q "^ordergatectl drill: --faults: $work/plan:$3: " ||
        { cat "$work/err" >&2; fail "plan $1: not one line naming $work/plan:$3"; }
    [ ! -e "$work/applied" ] || fail "plan $1: a fault was applied"
}
plan_case "unknown key" '[b]\nstart = 1s\nlasts = 2s\n' 9
plan_case "bad duration" '[b]\nstart = 1s\nduration = 2h\n' 9
plan_case "no clear" '[b]\nstart = 1s\nduration = 2s\napply = true\n' 7
plan_case "name twice" '[ok]\n' 7
printf 'start = 1s\n' >"$work/plan"
drill drill --db "dbname=$db" --orders 20 --faults "$work/plan"
[ "$rc" = 2 ] && errors | grep -q -- "--faults: $work/plan:1: expected \[name\]" ||
    { cat "$work/err" >&2; fail "plan without a name: exit $rc, expected 2 naming line 1"; }
[ "$(orders)" = "$before" ] || fail "bad plans: orders placed"
drill drill --db "dbname=$db" --orders 20 --faults "$work/none.plan"
[ "$rc" = 2 ] && errors | grep -q -- "--faults: $work/none.plan: No such file" ||
    { cat "$work/err" >&2; fail "missing plan: exit $rc, expected 2 naming it"; }
echo "errors.sh: ok (one line each; exit 1, 1, 2, 2, 2, 2; bad plans 2)"

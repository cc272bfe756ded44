#!/usr/bin/env bash
# Runs `ordergatectl drill` in a database of its own and checks the verdict.
#
#   run_drill.sh BUILD_DIR expect-clean|expect-violations [--planted-bug] -- DRILL_ARGS...
#
# expect-clean: exit 0 and "violations":0 in the JSON report.
# expect-violations: exit 1 and a positive violation count (the drill caught the bug).
set -euo pipefail
build=$1 expect=$2
shift 2
planted=0
if [ "${1:-}" = --planted-bug ]; then planted=1; shift; fi
[ "${1:-}" = -- ] && shift
here=$(cd "$(dirname "$0")" && pwd)
db="og_drill_$$"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
report=$(mktemp)
cleanup() { psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true; rm -f "$report"; }
trap cleanup EXIT

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db TEMPLATE $tpl"
if [ $planted = 1 ]; then
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$here/planted_bug.sql"
fi
set +e
"$build/tools/ordergatectl" drill --db "dbname=$db" --json "$@" >"$report"
rc=$?
set -e
cat "$report"
violations=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["violations"])' "$report" 2>/dev/null || echo missing)
echo "drill exit $rc, violations $violations"
case $expect in
    expect-clean)
        [ $rc -eq 0 ] && [ "$violations" = 0 ] ;;
    expect-violations)
        # The planted bug restocks goods of orders it did not win: the stock invariant (2)
        # must be the one that catches it.
        [ $rc -eq 1 ] && [ "$violations" != missing ] && [ "$violations" -gt 0 ] &&
            python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["reconcile"]; sys.exit(0 if [x for x in r if x["invariant"]==2][0]["violations"] > 0 else 1)' "$report" ;;
    *)
        echo "unknown expectation $expect" >&2; exit 2 ;;
esac

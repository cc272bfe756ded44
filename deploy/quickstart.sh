#!/usr/bin/env bash
# Runs ordergate locally: builds, starts a throwaway PostgreSQL and Kafka,
# applies the schema, and shows what runs where.
#
#   deploy/quickstart.sh          start (idempotent) and demo
#   deploy/quickstart.sh stop     stop everything and remove the local state
#
# State lives in $ORDERGATE_STATE_DIR (default .local/ in the checkout).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
export ORDERGATE_STATE_DIR=${ORDERGATE_STATE_DIR:-$repo/.local}
build=${ORDERGATE_BUILD_DIR:-$repo/build}
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

stop_all() {
    if [ -d "$ORDERGATE_STATE_DIR/run" ]; then
        for pidfile in "$ORDERGATE_STATE_DIR"/run/*.pid; do
            [ -e "$pidfile" ] || continue
            kill "$(cat "$pidfile")" 2>/dev/null || true
        done
    fi
    deploy/local/services.sh down
}

if [ "${1:-}" = stop ]; then
    say "stopping ordergate and the local services"
    stop_all
    exit 0
fi

say "building into $build"
cmake -S . -B "$build" -G Ninja >/dev/null
cmake --build "$build" >/dev/null

say "starting PostgreSQL 15 and Kafka (state in $ORDERGATE_STATE_DIR)"
exports=$(deploy/local/services.sh up)
eval "$exports"
mkdir -p "$ORDERGATE_STATE_DIR/run"

say "applying the schema"
if [ -x "$build/ordergatectl" ] || [ -x "$build/tools/ordergatectl" ]; then
    ctl=$( [ -x "$build/tools/ordergatectl" ] && echo "$build/tools/ordergatectl" || echo "$build/ordergatectl")
    "$ctl" migrate --schema-dir "$repo/schema"
else
    for f in schema/[0-9][0-9][0-9]_*.sql; do
        applied=$(psql -X -At -c "select 1 from ordergate.schema_migrations where version = '$(basename "$f" | cut -c1-3)'" 2>/dev/null || true)
        [ "$applied" = 1 ] || psql -X -q -v ON_ERROR_STOP=1 -f "$f" >/dev/null
    done
fi

cat >&2 <<TXT

ordergate is ready:
  PostgreSQL  PGHOST=$PGHOST PGPORT=$PGPORT PGDATABASE=$PGDATABASE (schema ordergate)
  Kafka       $ORDERGATE_BROKERS
  binaries    $build/consumer/ordergate-consumer, $build/scanner/ordergate-scanner,
              $build/tools/ordergatectl

Use them from this shell with:
$(deploy/local/services.sh env)

Stop everything with: deploy/quickstart.sh stop
TXT

# examples/run_common.sh: what examples/mall/run.sh and examples/saleor/run.sh share, sourced by
# each once it has read its arguments (not run on its own): messages, the cleanup on exit, a
# PostgreSQL to work in, the binaries, and the example's database with ordergate, the shop's
# tables (schema.sql) and hooks (hooks.sql).
#
# The caller sets: example (its name: messages, work folder and database names), here (its
# folder), repo, build, require_db, kafka, keep (1: keep the database and the work folder), py;
# it may put the pids of background processes of its own in the array pids, and those of the
# scanner and the consumer in scanner_pid and consumer_pid. Owns: t0, work, db, psql_q,
# started_services, db_created, scanner, ctl, consumer, scanner_grace and the EXIT, INT and TERM
# traps; must not touch what the example runs or checks.

t0=$(date +%s)
step() { printf '%s: %s (%ss)\n' "$example" "$*" "$(($(date +%s) - t0))"; }
die() { echo "$example: error: $*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ordergate-$example.XXXXXX")
db=og_${example}_$$
scanner_pid=
consumer_pid=
pids=()
started_services=0
db_created=0
psql_q=(env PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1)

example_cleanup() {
    local rc=$? p
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ -n "$consumer_pid" ]; then kill -TERM "$consumer_pid" 2>/dev/null || true; wait "$consumer_pid" 2>/dev/null || true; fi
    if [ -n "$scanner_pid" ]; then kill -TERM "$scanner_pid" 2>/dev/null || true; wait "$scanner_pid" 2>/dev/null || true; fi
    if [ $rc -ne 0 ]; then
        for f in "$work"/*.log; do [ -s "$f" ] && { echo "--- $(basename "$f") (last lines)"; tail -n 20 "$f"; }; done >&2
    fi
    if [ "$keep" = 1 ]; then
        echo "$example: kept database $db and $work" >&2
        [ $started_services = 0 ] || echo "$example: stop its PostgreSQL with: ORDERGATE_STATE_DIR=$ORDERGATE_STATE_DIR $repo/deploy/local/services.sh down" >&2
        exit $rc
    fi
    if [ $started_services = 1 ]; then
        "$repo/deploy/local/services.sh" down || true
    elif [ $db_created = 1 ]; then
        "${psql_q[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
    fi
    rm -rf "$work"
    exit $rc
}
trap example_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A PostgreSQL (libpq's environment, or a throwaway one unless --require-db), the binaries (built
# when missing), the broker's address with --kafka, and psycopg2 for the example's Python.
example_prepare() {
    if ! "${psql_q[@]}" -d postgres -c 'select 1' >/dev/null 2>&1; then
        [ $require_db = 0 ] || die "cannot reach PostgreSQL (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-}); run deploy/local/services.sh up"
        step "no PostgreSQL answers: starting one (deploy/local/services.sh)"
        export ORDERGATE_STATE_DIR=$work/services ORDERGATE_SERVICES=pg
        started_services=1
        exports=$("$repo/deploy/local/services.sh" up)
        eval "$exports"
    fi
    scanner=$build/scanner/ordergate-scanner
    ctl=$build/tools/ordergatectl
    consumer=$build/consumer/ordergate-consumer
    if [ ! -x "$scanner" ] || [ ! -x "$ctl" ] || [ ! -x "$consumer" ]; then
        step "building ordergate-scanner, ordergate-consumer and ordergatectl in $build"
        cmake -S "$repo" -B "$build" -G Ninja >/dev/null
        cmake --build "$build" --target ordergate-scanner ordergate-consumer ordergatectl >/dev/null
    fi
    [ $kafka = 0 ] || [ -n "${ORDERGATE_BROKERS:-}" ] ||
        die "--kafka: ORDERGATE_BROKERS is not set (deploy/local/services.sh up exports it)"
    "$py" -c 'import psycopg2' 2>/dev/null || die "$py cannot import psycopg2 (Debian: apt-get install python3-psycopg2)"
}

# The database $db (PGDATABASE from here on): ordergatectl migrate, then the example's schema.sql
# and hooks.sql.
example_db_create() {
    "${psql_q[@]}" -d postgres -c "CREATE DATABASE $db TEMPLATE template0"
    db_created=1
    export PGDATABASE=$db
    "$ctl" migrate --db "dbname=$db" >"$work/migrate.out" 2>&1 ||
        { cat "$work/migrate.out" >&2; die "ordergatectl migrate failed"; }
    "${psql_q[@]}" -f "$here/schema.sql"
    "${psql_q[@]}" -f "$here/hooks.sql" >/dev/null
}

# With --kafka, the second tier: the example's own topics ($example.<pid>.*), schedule_cancels = 1
# (place_order writes each order's cancel message), ordergate-consumer relaying and claiming them;
# scanner_grace is the scanner's --grace behind it (0 without Kafka).
example_kafka_start() {
    scanner_grace=0
    if [ $kafka = 1 ]; then
        step "Kafka: topics $example.$$.*, schedule_cancels = 1, ordergate-consumer"
        # One delay level of 10 s fits every payment window here; the relay routes by the level.
        cat >"$work/ordergate.conf" <<EOF
kafka = {
    topics = "$example.$$.cancel.10s";
    group = "$example-$$";
    dead_letter_topic = "$example.$$.cancel.dlq";
};
consumer = { batch_size = 50; linger_ms = 20; metrics_listen = ""; };
outbox = { topic = "$example.$$.events"; refund_topic = "$example.$$.refunds"; alert_topic = "$example.$$.alerts"; };
EOF
        "$ctl" --config "$work/ordergate.conf" --brokers "$ORDERGATE_BROKERS" topics --partitions 2 \
            >"$work/topics.out" 2>&1 || { cat "$work/topics.out" >&2; die "ordergatectl topics failed"; }
        "${psql_q[@]}" -At -c "SELECT ordergate.set_setting('schedule_cancels', '1')" >/dev/null
        "$consumer" --config "$work/ordergate.conf" --db "dbname=$db" --brokers "$ORDERGATE_BROKERS" \
            >"$work/consumer.log" 2>&1 &
        consumer_pid=$!
        scanner_grace=3      # the fallback: the consumer gets the first go
    fi
}

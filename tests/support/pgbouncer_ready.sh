#!/usr/bin/env bash
# The pgbouncer fixture: the PgBouncer of deploy/local/services.sh (ORDERGATE_PGBOUNCER_PORT on
# 127.0.0.1) answers, in transaction pooling mode, in front of the PostgreSQL of PGHOST/PGPORT.
# Fails (never skips) when the export is missing or the pooler is not what the tests expect.
set -euo pipefail
port=${ORDERGATE_PGBOUNCER_PORT:-}
if [ -z "$port" ]; then
    echo "pgbouncer_ready: ORDERGATE_PGBOUNCER_PORT is not set; start it with" \
         "ORDERGATE_SERVICES=pg,kafka,pgbouncer deploy/local/services.sh up" >&2
    exit 1
fi
mode=$(psql -X -At -h 127.0.0.1 -p "$port" -d pgbouncer -c 'SHOW CONFIG' | awk -F'|' '$1 == "pool_mode" {print $2}')
if [ "$mode" != transaction ]; then
    echo "pgbouncer_ready: PgBouncer on port $port runs pool_mode '$mode', not transaction" >&2
    exit 1
fi
direct=$(psql -X -At -d postgres -c "select system_identifier from pg_control_system()")
pooled=$(psql -X -At -h 127.0.0.1 -p "$port" -d postgres -c "select system_identifier from pg_control_system()")
if [ "$direct" != "$pooled" ]; then
    echo "pgbouncer_ready: PgBouncer on port $port is in front of another cluster" >&2
    exit 1
fi
echo "pgbouncer on 127.0.0.1:$port: transaction pooling in front of cluster $direct"

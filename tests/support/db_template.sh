#!/usr/bin/env bash
# CTest fixture: (re)builds the template database that every database test
# copies, by applying schema/*.sql in lexical order with plain psql, exactly as
# an operator would. Fails (never skips) when PostgreSQL cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
schema="$here/../../schema"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}

if ! psql -X -q -d postgres -c 'select 1' >/dev/null; then
    echo "db_template: cannot reach PostgreSQL (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-});" \
         "run deploy/local/services.sh up" >&2
    exit 1
fi
PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -d postgres <<SQL
UPDATE pg_database SET datistemplate = false WHERE datname = '$tpl';
DROP DATABASE IF EXISTS $tpl WITH (FORCE);
CREATE DATABASE $tpl;
SQL
shopt -s nullglob
files=("$schema"/[0-9][0-9][0-9]_*.sql)
if [ ${#files[@]} -eq 0 ]; then
    echo "db_template: no migrations in $schema" >&2
    exit 1
fi
for f in "${files[@]}"; do
    psql -X -q -v ON_ERROR_STOP=1 -d "$tpl" -f "$f" >/dev/null
done
psql -X -q -v ON_ERROR_STOP=1 -d postgres \
    -c "UPDATE pg_database SET datistemplate = true WHERE datname = '$tpl'" >/dev/null
echo "db_template: $tpl has ${#files[@]} migrations: $(psql -X -At -d "$tpl" -c \
    "select string_agg(version, ',' order by version) from ordergate.schema_migrations")"

#!/usr/bin/env bash
# Builds the template database that every database test copies, with
# schema/install.sql and plain psql, exactly as an operator would.
# CTest runs it as the `db` fixture; tests/isolation/run.sh calls it too.
#
# The template records a checksum of the schema files in its comment and is
# rebuilt only when they changed (or with --force). It is built under another
# name and renamed at the end, so a concurrent reader never sees half a schema.
# Fails (never skips) when PostgreSQL cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
schema="$here/../../schema"
tpl=${ORDERGATE_TEMPLATE_DB:-ordergate_tpl}
psql=(env PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1)
force=0
[ "${1:-}" = --force ] && force=1

if ! "${psql[@]}" -d postgres -c 'select 1' >/dev/null; then
    echo "db_template: cannot reach PostgreSQL (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-});" \
         "run deploy/local/services.sh up" >&2
    exit 1
fi
shopt -s nullglob
files=("$schema"/install.sql "$schema"/migrations/*.sql "$schema"/functions/*/*.sql)
if [ ! -f "$schema/install.sql" ]; then
    echo "db_template: no install.sql in $schema" >&2
    exit 1
fi
want="ordergate schema $(cat "${files[@]}" | sha256sum | cut -c1-32)"
have=$("${psql[@]}" -At -d postgres -c \
    "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '$tpl'")
if [ $force = 0 ] && [ "$have" = "$want" ]; then
    echo "db_template: $tpl is up to date ($want)"
    exit 0
fi
build="${tpl}_build_$$"
"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $build" -c "CREATE DATABASE $build TEMPLATE template0"
if ! "${psql[@]}" -d "$build" -f "$schema/install.sql" >/dev/null; then
    "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $build"
    echo "db_template: schema/install.sql failed" >&2
    exit 1
fi
"${psql[@]}" -d postgres -c "COMMENT ON DATABASE $build IS '$want'" \
    -c "UPDATE pg_database SET datistemplate = false WHERE datname = '$tpl'" \
    -c "DROP DATABASE IF EXISTS $tpl WITH (FORCE)" \
    -c "ALTER DATABASE $build RENAME TO $tpl"
echo "db_template: built $tpl, migrations $("${psql[@]}" -At -d "$tpl" -c \
    "select string_agg(version, ',' order by version) from ordergate.schema_migrations")"

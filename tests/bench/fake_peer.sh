#!/usr/bin/env bash
# A peer for tests/bench/test_peers.sh: the peers' protocol (tools/bench/consumer/peer.c) with
# no queue behind it, so the harness is tested without Go, Node or anything fetched. It claims
# the pending orders of -prefix through ordergate.claim_cancel, 500 a call, in one psql session;
# with -burst, from -start-at on. Connection: the PG* environment (PGDATABASE is the phase's).
set -euo pipefail
prefix=r burst=0 start_at=0
while [ $# -gt 0 ]; do
    case $1 in
    -prefix) prefix=$2; shift 2 ;;
    -burst) burst=1; shift ;;
    -start-at) start_at=$2; shift 2 ;;
    *) echo "fake_peer: unknown argument $1" >&2; exit 2 ;;
    esac
done
say() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) event=$*"; }
q() { psql -XAtq -v ON_ERROR_STOP=1 -v prefix="$prefix" "$@"; }
n=$(q <<< "SELECT count(*) FROM ordergate.orders WHERE order_no LIKE :'prefix' || '%'
             AND status = 'pending_payment'")
say "loaded orders=$n"
start=$(date +%s%3N)
if [ "$burst" = 1 ]; then
    say "inserted jobs=$n"
    if [ "$start_at" -gt 0 ]; then
        wait_ms=$((start_at - $(date +%s%3N)))
        [ "$wait_ms" -le 0 ] || sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
        start=$start_at
    fi
fi
# One session: claim what is due, 500 at a time, until every order came back cancelled.
q <<'SQL' > /dev/null
SET fake.prefix = :'prefix';
DO $$
DECLARE won bigint := 0; got bigint; total bigint;
BEGIN
    SELECT count(*) INTO total FROM ordergate.orders
     WHERE order_no LIKE current_setting('fake.prefix') || '%' AND status = 'pending_payment';
    WHILE won < total LOOP
        SELECT count(*) FILTER (WHERE outcome = 'cancelled') INTO got
          FROM ordergate.claim_cancel(ARRAY(
                   SELECT order_no FROM ordergate.orders
                    WHERE order_no LIKE current_setting('fake.prefix') || '%'
                      AND status = 'pending_payment' AND expire_at <= clock_timestamp()
                    LIMIT 500), 'timeout_consumer');
        won := won + got;
        COMMIT;
        IF got = 0 THEN
            PERFORM pg_sleep(0.01);
            COMMIT;
        END IF;
    END LOOP;
END $$;
SQL
end=$(date +%s%3N)
say "done orders=$n seconds=$(printf '%d.%03d' $(((end - start) / 1000)) $(((end - start) % 1000)))"

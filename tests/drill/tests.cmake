# The drill in small size: the real consumers, the real scanner, the real broker and database.
set(OG_DRILL ${CMAKE_CURRENT_LIST_DIR}/run_drill.sh)
add_test(NAME drill_small
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-clean --
                 --orders 2000 --consumers 2 --kill-every 4 --seed 42)
add_test(NAME drill_scanner_only
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-clean --
                 --orders 300 --no-kafka --jitter-ms 1000 --lead-ms 3000 --seed 7)
# The sanitizer build runs the drill's own C through drill_small, drill_scanner_only,
# drill_secrets and drill_errors; the planted bugs (SQL), the database-scheduled cancels, the
# pooler and the failover exercise C the consumer and scanner tests already run under it, and
# run once, here (tests/run.sh stays within its 15 minutes).
if(NOT OG_SANITIZE)
add_test(NAME drill_planted_bug
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-violations --planted-bug --
                 --orders 400 --consumers 1 --pay-ratio 0.5 --lead-ms 3000 --seed 9)
# The cancel forgets the captured parts of the orders it cancels (planted_bug_money.sql): the
# drill's ledger and reconcile's invariant 12 must say so. Many orders in parts, due around T.
add_test(NAME drill_planted_money
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-violations --planted-money --
                 --orders 300 --consumers 1 --parts-ratio 0.4 --lead-ms 3000 --seed 13)
# A staff release gives the order's stock back (planted_bug_life.sql): the drill's shelf count
# and reconcile's invariant 2 must say so. Many releases around T.
add_test(NAME drill_planted_life
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-violations --planted-life --
                 --orders 300 --consumers 1 --release-ratio 0.3 --lead-ms 3000 --seed 17)
# The database schedules the cancels (schedule_cancels = 1), the consumers' relays publish them
# to delay topics with levels; lost messages are outbox rows marked published before any relay runs.
add_test(NAME drill_schedule_in_db
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-clean --
                 --schedule-in-db --orders 1000 --consumers 2 --kill-every 4 --lead-ms 8000
                 --seed 11)
set_tests_properties(drill_planted_bug drill_planted_money drill_planted_life drill_schedule_in_db
                     PROPERTIES
                     FIXTURES_REQUIRED "db;kafka" LABELS "kafka;drill" TIMEOUT 600)
# Through the transaction-pooling PgBouncer of services.sh (pool size 2 per database): the
# drill's own sessions, its consumers with their relays and its scanner share two server
# connections.
add_test(NAME drill_pgbouncer
         COMMAND ${OG_DRILL} ${PROJECT_BINARY_DIR} expect-clean --pgbouncer --
                 --orders 500 --consumers 2 --kill-every 4 --seed 21)
set_tests_properties(drill_pgbouncer PROPERTIES
                     FIXTURES_REQUIRED "db;kafka;pgbouncer" LABELS "kafka;drill;pgbouncer" TIMEOUT 600)
# A PostgreSQL failover in the middle of the race: the drill on a primary of its own with a
# synchronous standby (deploy/local/services.sh, ORDERGATE_SERVICES=pg,standby) that lags in
# replay; the primary is SIGKILLed and the standby promoted while payments and cancels run,
# everything reconnecting through a multi-host conninfo (target_session_attrs=read-write).
add_test(NAME drill_failover COMMAND ${CMAKE_CURRENT_LIST_DIR}/failover.sh ${PROJECT_BINARY_DIR})
set_tests_properties(drill_failover PROPERTIES
                     FIXTURES_REQUIRED kafka LABELS "kafka;drill;failover" TIMEOUT 600)
# Toxiproxy between every program and PostgreSQL and the broker (a broker of its own that
# advertises the proxy's port); the fault plan tests/drill/faults/ci.plan loses the broker for
# 8 s, silences the database for 32 s (longer than every bound of a call) and resets connections
# as claims and commits come back; 2000 orders due over 80 s, about 2 minutes. The large run:
# chaos.sh BUILD_DIR --long (tests/drill/faults/local.plan).
add_test(NAME drill_chaos COMMAND ${CMAKE_CURRENT_LIST_DIR}/chaos.sh ${PROJECT_BINARY_DIR})
set_tests_properties(drill_chaos PROPERTIES
                     FIXTURES_REQUIRED db LABELS "kafka;drill;chaos" TIMEOUT 420)
# Three brokers (replication factor 3, min.insync.replicas 2, services.sh with
# ORDERGATE_KAFKA_NODES=3) lose the delay topics' leader to SIGKILL in the middle of the race, then
# the two nodes that do not coordinate the group for 10 s (the consumers are fenced and must join
# again); the database schedules the cancels, so the relays publish through them. The longer run
# adds the coordinator's SIGKILL and a rolling restart: cluster.sh BUILD_DIR --long.
# og_group_watch: the group's state, members and assigned partitions as its coordinator
# describes them, a line per change, for cluster.sh's "whole again" per fault.
add_executable(og_group_watch ${PROJECT_SOURCE_DIR}/tests/support/group_watch.c)
target_link_libraries(og_group_watch PRIVATE PkgConfig::RDKAFKA)
add_test(NAME drill_cluster COMMAND ${CMAKE_CURRENT_LIST_DIR}/cluster.sh ${PROJECT_BINARY_DIR})
set_tests_properties(drill_cluster PROPERTIES
                     FIXTURES_REQUIRED db LABELS "kafka;drill;cluster" TIMEOUT 600)
endif()
set_tests_properties(drill_small PROPERTIES
                     FIXTURES_REQUIRED "db;kafka" LABELS "kafka;drill" TIMEOUT 600)
set_tests_properties(drill_scanner_only PROPERTIES
                     FIXTURES_REQUIRED db LABELS "db;drill" TIMEOUT 300)
# No secret readable on disk: the children's configurations in a private directory (0700,
# files 0600), removed at the end and on SIGTERM; the drill's own Kafka clients log in with
# kafka.sasl_password_file over the SASL_SSL listener (services.sh with ORDERGATE_KAFKA_TLS=1).
add_test(NAME drill_secrets COMMAND ${CMAKE_CURRENT_LIST_DIR}/secrets.sh ${PROJECT_BINARY_DIR})
set_tests_properties(drill_secrets PROPERTIES
                     FIXTURES_REQUIRED "db;kafka" LABELS "kafka;drill" TIMEOUT 300)
# A drill that cannot complete: one line naming the cause (a kafka.properties entry by file and
# line, reached through the drill's own producer; a missing database), exit 1, its configuration
# directory removed; options that do not go together are usage (exit 2).
add_test(NAME drill_errors COMMAND ${CMAKE_CURRENT_LIST_DIR}/errors.sh ${PROJECT_BINARY_DIR})
set_tests_properties(drill_errors PROPERTIES FIXTURES_REQUIRED db LABELS "db;drill" TIMEOUT 120)

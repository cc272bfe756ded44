# ordergate-consumer tests. The integration tests spawn the built binary against the real
# broker and database (each with its own database, topics and group); they fail, never skip,
# without the services.
add_library(ogconsumertest STATIC ${CMAKE_CURRENT_LIST_DIR}/ct.c)
target_link_libraries(ogconsumertest PUBLIC ogtestsupport)
target_include_directories(ogconsumertest PUBLIC ${CMAKE_CURRENT_LIST_DIR})
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/tests/consumer)

function(og_consumer_test name)
  og_add_test(NAME ${name} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${name}.c ${ARGN})
  target_link_libraries(${name} PRIVATE ogconsumertest)
  # The binary under test must be built before the test runs.
  add_dependencies(${name} ordergate-consumer)
endfunction()

og_consumer_test(consumer_flow LABELS kafka FIXTURES db kafka TIMEOUT 120)
og_consumer_test(consumer_dlq LABELS kafka FIXTURES db kafka TIMEOUT 120)
og_consumer_test(consumer_rebalance LABELS kafka FIXTURES db kafka TIMEOUT 150)
og_consumer_test(consumer_crash LABELS kafka FIXTURES db kafka TIMEOUT 150)
og_consumer_test(consumer_busy LABELS kafka FIXTURES db kafka TIMEOUT 150)
og_consumer_test(consumer_hooks LABELS kafka FIXTURES db kafka TIMEOUT 150)
og_consumer_test(consumer_refunds LABELS kafka FIXTURES db kafka TIMEOUT 120)
og_consumer_test(consumer_durability LABELS kafka FIXTURES db kafka TIMEOUT 120)
og_consumer_test(consumer_due LABELS kafka FIXTURES db kafka TIMEOUT 150)
# A full window's partition waits for the window's head instead of refetching every 50 ms.
og_consumer_test(consumer_window_full LABELS kafka FIXTURES db kafka TIMEOUT 120)
# A payment its hook fails, or whose order row is locked, holds back only its order.
og_consumer_test(consumer_payments LABELS kafka FIXTURES db kafka TIMEOUT 180)
og_consumer_test(consumer_holds LABELS kafka FIXTURES db kafka TIMEOUT 120)
# Payment reminders through the delay topics: on time, once, never for a paid order.
og_consumer_test(consumer_reminders LABELS kafka FIXTURES db kafka TIMEOUT 150)
# Restarts the shared PostgreSQL (pg_ctl restart): nothing else may run meanwhile.
og_consumer_test(consumer_outage LABELS kafka FIXTURES db kafka TIMEOUT 150)
set_tests_properties(consumer_outage PROPERTIES RUN_SERIAL TRUE)
# The command line needs no services.
og_consumer_test(consumer_cli LABELS unit TIMEOUT 60)
# The broker goes down and comes back: librdkafka's mock cluster inside the test, so the
# shared broker stays up for the other tests. Needs only PostgreSQL.
og_consumer_test(consumer_broker LABELS db FIXTURES db TIMEOUT 120)
# Static group membership: a restart under the same instance id, two instances with one id.
og_consumer_test(consumer_static LABELS kafka FIXTURES db kafka TIMEOUT 150)
# SIGTERM while the group rebalances: out within 10 s, no offset past unclaimed work.
og_consumer_test(consumer_shutdown LABELS kafka FIXTURES db kafka TIMEOUT 150)
# The systemd watchdog while the database never answers: pings stay within WatchdogSec/2.
og_consumer_test(consumer_watchdog LABELS kafka FIXTURES db kafka TIMEOUT 150)
# The takeover drill: SIGKILL and immediate restart of static members while orders fall due.
og_consumer_test(consumer_takeover LABELS kafka FIXTURES db kafka TIMEOUT 150)
# Through the transaction-pooling PgBouncer of services.sh (pool size 2): two consumers sharing
# its server connections, then a PgBouncer restart mid-claim (restarts the shared pooler:
# nothing else may run meanwhile).
og_consumer_test(consumer_pgbouncer LABELS "kafka;pgbouncer" FIXTURES db kafka pgbouncer
                 TIMEOUT 180)
set_tests_properties(consumer_pgbouncer PROPERTIES RUN_SERIAL TRUE)
# The health endpoint under a connection flood from one peer: the health-file probe, another
# peer's requests and the idle timeout. librdkafka's mock cluster: needs only PostgreSQL.
og_consumer_test(consumer_health LABELS db FIXTURES db TIMEOUT 150)
# Messages taken in while a claim waits for the database (held by a lock): no offset stored
# before the claim that covers it commits, also when the claim's connection drops meanwhile.
og_consumer_test(consumer_intake LABELS kafka FIXTURES db kafka TIMEOUT 150)
# A claim split across two database sessions: both backends win cancels of one batch, each order
# once, and no offset is stored before every part has committed (one part's backend killed).
og_consumer_test(consumer_split LABELS kafka FIXTURES db kafka TIMEOUT 150)
